import Foundation
@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys
import Storage
import TaskService
import TestSupport
import Testing
import TodoSystem

/// `todo-server backup` / `restore` at the storage level: the whole store, typed, onto either
/// engine (a SQLite store moves to PostgreSQL), all or nothing.
@Suite("Backup and restore")
struct BackupTests {
    /// Rows of every table, each table's rows sorted, so two engines' dumps compare; sealed
    /// values (a fresh nonce each time) as `sealed`.
    static func contents(_ data: Data) throws -> [String: [String]] {
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var tables: [String: [String]] = [:]
        for table in try #require(document["tables"] as? [[String: Any]]) {
            let rows = try #require(table["rows"] as? [[Any]]).map { row -> String in
                let row = row.map { value -> Any in (value as? String)?.hasPrefix("sealed:") == true ? "sealed" : value }
                return String(
                    decoding: try JSONSerialization.data(withJSONObject: row, options: [.sortedKeys, .fragmentsAllowed]), as: UTF8.self)
            }
            tables[try #require(table["name"] as? String)] = rows.sorted()
        }
        return tables
    }

    @Test(
        "a store backed up on SQLite restores onto each engine with every row, and its keys and passwords still work",
        arguments: TestDatabase.engines)
    func roundTrip(target: DatabaseEngine) async throws {
        let dataKey = DataKey.generate()
        let logger = TestDatabase.logger
        let (backup, hash): (Data, String) = try await TestDatabase.with(.sqlite) { source in
            try await TodoSystem.migrate(source, logger: logger)
            let server = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: source, dataKey: dataKey, logger: logger)
            let seed = try await server.seedDevelopmentTenant(apiPort: 3000)
            let user = try await server.administration.createLocalUser(
                tenantID: seed.tenant.id, email: "kept@example.com", displayName: "Kept", password: "Kept-Pass1")
            let tasks = SQLTaskRepository(database: source)
            for title in ["one", "two'; DROP TABLE tasks;--", "ünïcødé ✓"] {
                _ = try await tasks.create(owner: user.objectID, ownerName: "Kept", title: title, completed: false, now: Date())
            }
            try await server.shutdown()
            let backup = try await DatabaseBackup.write(source, dataKey: dataKey)
            // No password hash in clear (F-8), no one-time codes or mail.
            let text = String(decoding: backup, as: UTF8.self)
            #expect(!text.contains(try #require(user.passwordHash)))
            #expect(!text.contains("\"outbox\"") && !text.contains("\"verification_codes\"") && !text.contains("\"authorization_codes\""))
            return (backup, try #require(user.passwordHash))
        }
        try await TestDatabase.with(target) { database in
            try await TodoSystem.migrate(database, logger: logger)
            let written = try await DatabaseBackup.restore(backup, into: database, dataKey: dataKey)
            #expect(written["tasks"] == 3 && written["users"] == 1)
            #expect(try Self.contents(try await DatabaseBackup.write(database, dataKey: dataKey)) == (try Self.contents(backup)))
            // Restoring twice is the same as once: the rows are replaced, not added.
            try await DatabaseBackup.restore(backup, into: database, dataKey: dataKey)
            #expect(try Self.contents(try await DatabaseBackup.write(database, dataKey: dataKey)) == (try Self.contents(backup)))

            let server = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: database, dataKey: dataKey, logger: logger)
            let tenant = try #require(try await server.tenants.defaultTenant())
            let user = try await server.administration.findUser(tenantID: tenant.id, emailOrID: "kept@example.com")
            #expect(user.passwordHash == hash, "the sealed hash restored as it was")
            _ = try await server.keys.activeKey()
            let page = try await SQLTaskRepository(database: database).list(owner: user.objectID, completed: nil, limit: 10, after: nil)
            #expect(Set(page.records.map(\.item.title)) == ["one", "two'; DROP TABLE tasks;--", "ünïcødé ✓"])
            try await server.shutdown()
        }
    }

    @Test("a file that is not a backup, or of another schema, changes nothing", arguments: TestDatabase.engines)
    func refusals(engine: DatabaseEngine) async throws {
        let dataKey = DataKey.generate()
        try await TestDatabase.with(engine) { database in
            try await TodoSystem.migrate(database, logger: TestDatabase.logger)
            let server = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: database, dataKey: dataKey, logger: TestDatabase.logger)
            let seed = try await server.seedDevelopmentTenant(apiPort: 3000)
            _ = try await server.administration.createLocalUser(
                tenantID: seed.tenant.id, email: "stays@example.com", displayName: "Stays", password: "Stay-Pass1")
            let before = try Self.contents(try await DatabaseBackup.write(database, dataKey: dataKey))
            var other = try #require(
                try JSONSerialization.jsonObject(with: try await DatabaseBackup.write(database, dataKey: dataKey)) as? [String: Any])
            var tables = try #require(other["tables"] as? [[String: Any]])
            let index = try #require(tables.firstIndex { $0["name"] as? String == "schema_migrations" })
            var rows = try #require(tables[index]["rows"] as? [[Any]])
            rows.append(["identity", 999, "from the future", 0])
            tables[index]["rows"] = rows
            other["tables"] = tables
            // Sealed with another data key: refused as a whole, nothing changed.
            let foreign = try await DatabaseBackup.write(database, dataKey: .generate())
            for bad in [Data("{}".utf8), Data("not json".utf8), try JSONSerialization.data(withJSONObject: other), foreign] {
                await #expect(throws: DatabaseBackup.BackupError.self) {
                    try await DatabaseBackup.restore(bad, into: database, dataKey: dataKey)
                }
            }
            #expect(try Self.contents(try await DatabaseBackup.write(database, dataKey: dataKey)) == before)
            try await server.shutdown()
        }
    }
}
