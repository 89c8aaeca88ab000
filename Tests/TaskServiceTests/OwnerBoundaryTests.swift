import Foundation
import Hummingbird
import HummingbirdTesting
import SQLKit
import Storage
import TaskService
import TestSupport
import Testing
import TodoModels

/// Two trusted authorities and one database: the Task API as a multi-tenant deployment runs it.
private func withTwoAuthorities(
    _ engine: DatabaseEngine, seed: (@Sendable (any Database) async throws -> Void)? = nil,
    _ body: @Sendable (MockAuthority, MockAuthority, any Database, any TestClientProtocol) async throws -> Void
) async throws {
    let a = try MockAuthority()
    let b = try MockAuthority()
    try await a.serve { aURL in
        try await b.serve { bURL in
            try await TestDatabase.with(engine) { database in
                try await SQLTaskRepository.migrations.run(on: database, logger: TestDatabase.logger)
                try await seed?(database)
                let fetcher = try HTTPMetadataFetcher()
                let server = try await TaskServer.make(
                    configuration: .init(policy: BearerPolicy(discoveryURLs: [aURL, bURL], audiences: [MockAuthority.audience])),
                    database: database, fetcher: fetcher, logger: TestDatabase.logger)
                do {
                    try await Application(router: server.buildRouter(), logger: TestDatabase.logger).test(.router) { client in
                        try await body(a, b, database, client)
                    }
                    try await fetcher.shutdown()
                } catch {
                    try? await fetcher.shutdown()
                    throw error
                }
            }
        }
    }
}

/// A task row as stored before owner keys named the issuer.
private func insertLegacyTask(_ database: any Database, owner: String, title: String) async throws {
    try await database.transaction { sql in
        try await sql.raw(
            """
            INSERT INTO tasks (id, owner_id, title, completed, created_at, updated_at, version)
            VALUES (\(bind: UUID().uuidString.lowercased()), \(bind: owner), \(bind: title), \(bind: false), 1, 1, 1)
            """
        ).run()
    }
}

@Suite("Task owners are bound to their issuer")
struct OwnerBoundaryTests {
    @Test("a second trusted authority minting the first one's oid sees none of that user's tasks", arguments: TestDatabase.engines)
    func foreignAuthorityCannotReachTasks(engine: DatabaseEngine) async throws {
        try await withTwoAuthorities(engine) { a, b, _, client in
            let created = try await client.call(.post, "/api/tasks", token: a.token(oid: "victim"), json: #"{"title":"payroll"}"#)
            #expect(created.status == .created)
            let id = try created.decode(TaskItem.self).id.uuidString.lowercased()
            let forged = b.token(oid: "victim")
            #expect(try await client.call(.get, "/api/tasks", token: forged).decode(TaskPage.self).items.isEmpty)
            #expect(try await client.call(.get, "/api/tasks/\(id)", token: forged).status == .notFound)
            #expect(try await client.call(.delete, "/api/tasks/\(id)", token: forged).status == .notFound)
            #expect(try await client.call(.get, "/tasks", token: forged).text == "[]")
            #expect(try await client.call(.get, "/api/tasks/\(id)", token: a.token(oid: "victim")).status == .ok)
        }
    }

    @Test("an app-only token (client credentials) is refused with 403: it has no user")
    func appOnlyTokens() async throws {
        try await TaskHarness.run(.sqlite) { h, client in
            let shapes: [(String, [String: Any], [String])] = [
                ("idtyp", ["idtyp": "app"], []),
                ("roles without scp", ["roles": ["Tasks.ReadWrite.All"]], ["scp"]),
                ("subject is the app", ["oid": "client-app", "sub": "client-app"], []),
            ]
            for (label, extra, removing) in shapes {
                let response = try await client.call(.get, "/api/tasks", token: h.authority.token(extra: extra, removing: removing))
                #expect(response.status == .forbidden, "\(label)")
                #expect(response.headers[.wwwAuthenticate]?.contains("error=\"insufficient_scope\"") == true, "\(label)")
                #expect(response.text.contains("urn:todob2c:problem:user-required"), "\(label)")
            }
        }
    }

    @Test("tasks stored under a bare oid are adopted by their user when one issuer is trusted")
    func legacyAdoptionWithOneIssuer() async throws {
        let authority = try MockAuthority()
        try await authority.serve { url in
            try await TestDatabase.with(.sqlite) { database in
                try await SQLTaskRepository.migrations.run(on: database, logger: TestDatabase.logger)
                try await insertLegacyTask(database, owner: "old-user", title: "from before")
                let fetcher = try HTTPMetadataFetcher()
                let server = try await TaskServer.make(
                    configuration: .init(policy: BearerPolicy(discoveryURLs: [url], audiences: [MockAuthority.audience])),
                    database: database, fetcher: fetcher, logger: TestDatabase.logger)
                try await Application(router: server.buildRouter(), logger: TestDatabase.logger).test(.router) { client in
                    let page = try await client.call(.get, "/api/tasks", token: authority.token(oid: "old-user")).decode(TaskPage.self)
                    #expect(page.items.map(\.title) == ["from before"])
                    #expect(try await !server.repository.hasLegacyOwners())
                }
                try await fetcher.shutdown()
            }
        }
    }

    @Test("with two trusted issuers, tasks under a bare oid go to neither (the owner is ambiguous)", arguments: TestDatabase.engines)
    func legacyNotAdoptedWithTwoIssuers(engine: DatabaseEngine) async throws {
        try await withTwoAuthorities(engine, seed: { try await insertLegacyTask($0, owner: "old-user", title: "from before") }) {
            a, b, database, client in
            for authority in [b, a] {
                let page = try await client.call(.get, "/api/tasks", token: authority.token(oid: "old-user")).decode(TaskPage.self)
                #expect(page.items.isEmpty)
            }
            let stillLegacy = try await database.read { sql in
                try await sql.raw("SELECT owner_id FROM tasks").all(decodingColumn: "owner_id", as: String.self)
            }
            #expect(stillLegacy == ["old-user"])
        }
    }

    @Test("owner keys: fixed-length issuer prefix, so no pair spells another pair's key")
    func ownerKeys() {
        // B2C's issuer (with the slash) and Entra's (without) of one directory are one owner.
        #expect(
            AuthenticatedUser.ownerKey(issuer: "https://a.example/t/v2.0", objectID: "o")
                == AuthenticatedUser.ownerKey(issuer: "https://a.example/t/v2.0/", objectID: "o"))
        #expect(
            AuthenticatedUser.ownerKey(issuer: "https://a.example/t/v2.0/", objectID: "o")
                != AuthenticatedUser.ownerKey(issuer: "https://a.example/u/v2.0/", objectID: "o"))
        let one = AuthenticatedUser.ownerKey(issuer: "https://a.example/v2.0/", objectID: "x:y")
        let two = AuthenticatedUser.ownerKey(issuer: "https://a.example/v2.0/x", objectID: "y")
        #expect(one != two)
        #expect(one.hasSuffix(":x:y"))
        #expect(one.split(separator: ":", maxSplits: 1)[0].count == 22)
    }
}

@Suite("Text from tokens and requests before it is stored")
struct StoredTextTests {
    @Test("a token's name with terminal controls is stored with them as visible escapes")
    func ownerNameEscaped() async throws {
        try await TaskHarness.run(.sqlite) { h, client in
            let token = h.authority.token(oid: "eve", name: "Eve\u{1B}[2J")
            let created = try await client.call(.post, "/api/tasks", token: token, json: #"{"title":"t"}"#)
            #expect(try created.decode(TaskItem.self).ownerName == "Eve\\u{1b}[2J")
        }
    }

    @Test(
        "titles with NUL, controls or bidi overrides get 422 and nothing is stored",
        arguments: ["a\u{0}b", "pay \u{202E}001$", "\u{1B}[2J"])
    func titlesRefused(title: String) async throws {
        try await TaskHarness.run(.sqlite) { h, client in
            let body = String(decoding: try JSONEncoder().encode(["title": title]), as: UTF8.self)
            #expect(try await client.call(.post, "/api/tasks", token: h.authority.token(), json: body).status == .unprocessableContent)
            #expect(try await client.call(.get, "/api/tasks", token: h.authority.token()).decode(TaskPage.self).items.isEmpty)
        }
    }
}
