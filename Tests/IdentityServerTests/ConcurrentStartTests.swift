import Foundation
@testable import IdentityDirectory
import SQLKit
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// Instances started together on one PostgreSQL (issue 14): migrations and the dev tenant's
/// seeding run once, one instance after the other, and every instance comes up with the same
/// whole tenant.
@Suite("Instances started together")
struct ConcurrentStartTests {
    @Test("four instances migrating and seeding at once on one PostgreSQL: one tenant, all its apps, every instance up")
    func startTogether() async throws {
        guard TestDatabase.engines.contains(.postgres) else {
            #expect(!TestDatabase.postgresRequired, "PostgreSQL is required for this run")
            return
        }
        try await TestDatabase.with(.postgres) { database in
            // Instances of one deployment share the data key.
            let dataKey = DataKey.generate()
            let seeds = try await withThrowingTaskGroup(of: DevTenantSeed.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        let server = try await IdentityServer.make(
                            configuration: .init(passwordHashCost: 4), database: database, dataKey: dataKey, clock: ManualClock(Date()),
                            logger: TestDatabase.logger)
                        do {
                            let seed = try await server.seedDevelopmentTenant(apiPort: 3000)
                            try await server.shutdown()
                            return seed
                        } catch {
                            try? await server.shutdown()
                            throw error
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(seeds.count == 4)
            #expect(Set(seeds.map(\.tenant.id)).count == 1)
            #expect(Set(seeds.map(\.publicApp.clientID)).count == 1 && Set(seeds.map(\.webApp.clientID)).count == 1)
            #expect(seeds.filter(\.created).count == 1, "one instance made the tenant")
            // The web app's secret is in the database: every instance has the one secret.
            #expect(seeds.allSatisfy { $0.webAppSecret != nil } && Set(seeds.compactMap(\.webAppSecret)).count == 1)
            let directory = SQLTenantDirectory(database: database)
            #expect(try await directory.tenants().count == 1)
            #expect(try await directory.applications(tenantID: seeds[0].tenant.id).count == 2)
        }
    }

    @Test(
        "the web app's secret lives sealed in the database: a restart reads it, a legacy file's secret moves in, a lost one is replaced by a working one",
        arguments: TestDatabase.engines)
    func webAppSecretInDatabase(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            let dataKey = DataKey.generate()
            let server = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: database, dataKey: dataKey, logger: TestDatabase.logger)
            let first = try await server.seedDevelopmentTenant(apiPort: 3000)
            let secret = try #require(first.webAppSecret)
            let again = try await server.seedDevelopmentTenant(apiPort: 3000, legacyWebAppSecret: "ignored-when-one-is-stored")
            #expect(again.webAppSecret == secret && !again.created)
            // Stored sealed: the secret's text is nowhere in the table.
            let rows = try await database.read { sql in
                try await sql.select().column("value").from("service_secrets").all(decodingColumn: "value", as: String.self)
            }
            #expect(rows.count == 1 && !rows[0].contains(secret))
            #expect(try await server.tenants.verifySecret(clientID: first.webApp.clientID, secret: secret, now: Date()))

            // A data dir from before: no stored secret, the file's moves in.
            try await database.transaction { sql in try await sql.delete(from: "service_secrets").run() }
            let legacy = try await server.seedDevelopmentTenant(apiPort: 3000, legacyWebAppSecret: secret)
            #expect(legacy.webAppSecret == secret)
            // A file holding something that is not the app's secret does not move in.
            try await database.transaction { sql in try await sql.delete(from: "service_secrets").run() }
            let forged = try await server.seedDevelopmentTenant(apiPort: 3000, legacyWebAppSecret: "not-the-apps-secret")
            #expect(forged.webAppSecret != "not-the-apps-secret")
            #expect(try await server.tenants.verifySecret(clientID: first.webApp.clientID, secret: forged.webAppSecret ?? "", now: Date()))
            try await database.transaction { sql in try await sql.delete(from: "service_secrets").run() }
            #expect(try await server.seedDevelopmentTenant(apiPort: 3000, legacyWebAppSecret: secret).webAppSecret == secret)
            #expect(try await server.seedDevelopmentTenant(apiPort: 3000).webAppSecret == secret)

            // Neither stored nor in a file: a new secret, added to the app, so it authenticates.
            try await database.transaction { sql in try await sql.delete(from: "service_secrets").run() }
            let minted = try #require(try await server.seedDevelopmentTenant(apiPort: 3000).webAppSecret)
            #expect(minted != secret)
            #expect(try await server.tenants.verifySecret(clientID: first.webApp.clientID, secret: minted, now: Date()))

            // Another data key cannot open it, and says so rather than minting a second secret.
            let other = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: database, dataKey: DataKey.generate(), logger: TestDatabase.logger)
            await #expect(throws: (any Error).self) { try await other.seedDevelopmentTenant(apiPort: 3000) }
            try await other.shutdown()
            try await server.shutdown()
        }
    }

    @Test("with a public origin, every instance writes the same issuer and URLs whatever Host reached it")
    func publicOrigin() async throws {
        var configuration = IdentityServerConfiguration(passwordHashCost: 4)
        configuration.publicOrigin = "https://id.example.com"
        try await IdentityHarness.run(.sqlite, configuration: configuration) { h, driver in
            let discovery = try await driver.get(h.path("B2C_1_susi", "v2.0/.well-known/openid-configuration"))
            #expect(discovery.json["issuer"] as? String == "https://id.example.com/\(h.tenant.guid)/v2.0/")
            #expect((discovery.json["authorization_endpoint"] as? String)?.hasPrefix("https://id.example.com/") == true)
            _ = try await h.addUser()
            let tokens = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")
            let claims = DecodedJWT(try #require(tokens.json["access_token"] as? String)).claims
            #expect(claims["iss"] as? String == "https://id.example.com/\(h.tenant.guid)/v2.0/")
            // The hosted pages' URLs, too: the authorize redirect names the public origin.
            let toPage = try await driver.get(AuthorizationAttempt(harness: h).url(harness: h))
            #expect(
                toPage.location?.hasPrefix("https://id.example.com/\(h.tenant.name)/B2C_1_susi/pages/signin?") == true,
                "\(toPage.location ?? "")")
        }
    }

    @Test("behind a balancer the dev surface answers to the public origin's host and port; any other port of it does not")
    func publicOriginHost() {
        var configuration = IdentityServerConfiguration(passwordHashCost: 4, listenPort: 5080)
        configuration.publicOrigin = "http://127.0.0.1:8443"
        let pinned = HostPolicy(configuration: configuration)
        #expect(pinned.isAllowedHost(authority: "127.0.0.1:8443"))
        #expect(pinned.isAllowedHost(authority: "127.0.0.1:5080"))
        #expect(!pinned.isAllowedHost(authority: "127.0.0.1:6666"))
        #expect(!pinned.isAllowedHost(authority: "127.0.0.1:8443.attacker.example"))
        // Without a public origin the balancer's port is not this service's.
        #expect(!HostPolicy(configuration: .init(passwordHashCost: 4, listenPort: 5080)).isAllowedHost(authority: "127.0.0.1:8443"))
    }
}
