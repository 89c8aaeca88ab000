import Foundation
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys
import SQLKit
import Storage
import TestSupport
import Testing

/// The security issue's M-6 and L-10: key material and secrets are sealed with a key kept
/// outside the database.
@Suite("Data at rest: signing keys and server secrets are sealed with the data key")
struct DataAtRestTests {
    static func column(_ table: String, _ column: String, in database: any Database) async throws -> [String] {
        try await database.read { sql in
            try await sql.select().column(SQLIdentifier(column)).from(table).all(decodingColumn: column, as: String.self)
        }
    }

    @Test("no private key or server secret is stored in clear; both open only with the data key", arguments: TestDatabase.engines)
    func sealedAtRest(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            // A token (the signing key) and a failed password (the lockout fingerprint secret).
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "wrong-Passw0rd").status == .badRequest)

            let pems = try await Self.column("signing_keys", "private_key_pem", in: h.database)
            let secrets = try await Self.column("server_secrets", "value", in: h.database)
            #expect(!pems.isEmpty && !secrets.isEmpty)
            for value in pems + secrets {
                #expect(value.hasPrefix("sealed:v1:"), "stored in clear: \(value.prefix(20))")
            }
            let active = try await h.server.keys.activeKey()
            #expect(!pems.joined().contains(active.privateKey.pemRepresentation))
            #expect(!pems.joined().contains("PRIVATE KEY"))
        }
    }

    @Test("an instance with another data key refuses to start signing, and says which key it needs", arguments: TestDatabase.engines)
    func wrongKeyIsAnError(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let original = try await h.server.keys.activeKey()
            let other = DataKey.generate()
            let stranger = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: h.database, dataKey: other, logger: TestDatabase.logger)
            do {
                _ = try await stranger.keys.activeKey()
                Issue.record("a key sealed with another data key was used")
            } catch let error as DataKeyError {
                guard case .wrongKey(_, _, let have) = error else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(have == other.id)
                #expect(error.description.contains("TODO_DATA_KEY"))
            }
            try await stranger.shutdown()
            // Nothing was replaced: the ring still holds the original key only.
            h.server.keys.invalidate()
            #expect(try await h.server.keys.allKeys().map(\.kid) == [original.kid])
        }
    }

    @Test("a key stored in clear before sealing still signs, and is sealed in place when read", arguments: TestDatabase.engines)
    func legacyClearRowsAreSealed(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let key = try await h.server.keys.activeKey()
            try await h.database.transaction { sql in
                try await sql.update("signing_keys").set("private_key_pem", to: key.privateKey.pemRepresentation)
                    .where("kid", .equal, key.kid).run()
                try await sql.insert(into: "server_secrets").columns("name", "value", "created_at")
                    .values(SQLBind("lockout-fingerprint-key"), SQLBind("legacy-clear-secret"), SQLBind(Int64(0))).run()
            }
            h.server.keys.invalidate()

            #expect(try await h.server.keys.activeKey().kid == key.kid)
            _ = try await h.addUser()
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "wrong-Passw0rd").status == .badRequest)

            for value in try await Self.column("signing_keys", "private_key_pem", in: h.database)
                + Self.column("server_secrets", "value", in: h.database)
            {
                #expect(value.hasPrefix("sealed:v1:"))
            }
        }
    }
}

@Suite("The data key")
struct DataKeyTests {
    @Test("a sealed value opens only with its key and for its place; an altered one does not open")
    func sealAndOpen() throws {
        let key = DataKey.generate()
        let sealed = try key.seal("secret value", context: "server_secrets:a")
        #expect(try key.open(sealed, context: "server_secrets:a") == ("secret value", false) as (String, Bool))
        #expect(throws: DataKeyError.cannotOpen("server_secrets:b")) { try key.open(sealed, context: "server_secrets:b") }
        var bytes = Array(sealed.utf8)
        bytes[bytes.count - 3] = bytes[bytes.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: DataKeyError.cannotOpen("server_secrets:a")) {
            try key.open(String(decoding: bytes, as: UTF8.self), context: "server_secrets:a")
        }
        let other = DataKey.generate()
        #expect(throws: DataKeyError.wrongKey(context: "server_secrets:a", sealedWith: key.id, have: other.id)) {
            try other.open(sealed, context: "server_secrets:a")
        }
        #expect(try key.open("clear", context: "x") == ("clear", true) as (String, Bool))
        #expect(try DataKey(exported: key.exported).id == key.id)
    }

    @Test("the key comes from TODO_DATA_KEY, else a file made once, owner-only")
    func loading() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("data-key-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let first = try DataKey.load(environment: [:], directory: directory.path)
        let path = directory.appendingPathComponent("data-key").path
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try DataKey.load(environment: [:], directory: directory.path).id == first.id)

        let shared = DataKey.generate()
        #expect(try DataKey.load(environment: ["TODO_DATA_KEY": shared.exported], directory: directory.path).id == shared.id)
        #expect(throws: DataKeyError.malformedEnvironment) {
            try DataKey.load(environment: ["TODO_DATA_KEY": "too-short"], directory: directory.path)
        }
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: DataKeyError.malformedFile(path)) { try DataKey.load(environment: [:], directory: directory.path) }
        // Written whole through a file of its own, which is gone afterwards.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["data-key"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count > 0)
        // An empty file (a crash or a full disk at an earlier version's first start) is named as such.
        try Data().write(to: URL(fileURLWithPath: path))
        #expect(throws: DataKeyError.emptyFile(path)) { try DataKey.load(environment: [:], directory: directory.path) }
        let replaced = try DataKey.replaceEmpty(directory: directory.path)
        #expect(try DataKey.load(environment: [:], directory: directory.path).id == replaced.id)
        // A directory that cannot take the file: an error naming why, and nothing left there.
        let missing = directory.appendingPathComponent("gone").path
        #expect(throws: DataKeyError.self) { try DataKey.load(environment: [:], directory: missing) }
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

}

@Suite("Start errors in one line (issue 51, minor)")
struct StartErrorTests {
    @Test("a read-only data dir or a settings.json that is a directory: the path and the reason, not Foundation's text")
    func fileErrors() {
        let readOnly = StorageError.operatorDescription(of: CocoaError(.fileWriteVolumeReadOnly, userInfo: [NSFilePathErrorKey: "/data"]))
        #expect(readOnly == "/data: the file system is read-only")
        let directory = StorageError.operatorDescription(
            of: CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: "/data/settings.json", NSUnderlyingErrorKey: POSIXError(.EISDIR)]))
        #expect(directory == "/data/settings.json: Is a directory", "\(directory)")
        #expect(!readOnly.contains("NSCocoaErrorDomain") && !directory.contains("NSCocoaErrorDomain"))
    }
}
