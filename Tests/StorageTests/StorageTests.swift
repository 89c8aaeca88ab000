import Foundation
import SQLKit
import Storage
import TestSupport
import Testing

@Suite("Storage on SQLite and PostgreSQL")
struct StorageTests {
    static let migrations = MigrationRunner(
        namespace: "test",
        migrations: [
            Migration(version: 1, name: "counters", ["CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)"]),
            Migration(version: 2, name: "notes", ["CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)"]),
        ])

    @Test("PostgreSQL is configured when the test script requires it")
    func postgresPresentWhenRequired() {
        if TestDatabase.postgresRequired {
            #expect(TestDatabase.postgresURL != nil, "TODO_REQUIRE_POSTGRES=1 but TODO_TEST_POSTGRES_URL is not set")
            #expect(TestDatabase.engines.contains(.postgres))
        }
    }

    @Test("migrations apply once, in order, and are recorded", arguments: TestDatabase.engines)
    func migrationsApplyOnce(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            let first = try await Self.migrations.run(on: database, logger: TestDatabase.logger)
            #expect(first == [1, 2])
            let second = try await Self.migrations.run(on: database, logger: TestDatabase.logger)
            #expect(second.isEmpty)
            let recorded = try await database.read { sql in
                try await sql.select().column("version").from("schema_migrations").where("namespace", .equal, "test")
                    .orderBy("version").all(decodingColumn: "version", as: Int.self)
            }
            #expect(recorded == [1, 2])
        }
    }

    @Test("a failing migration leaves no table and no record behind", arguments: TestDatabase.engines)
    func failingMigrationRollsBack(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            let broken = MigrationRunner(
                namespace: "broken",
                migrations: [
                    Migration(version: 1, name: "half", ["CREATE TABLE half_done (id TEXT)", "THIS IS NOT SQL"])
                ])
            await #expect(throws: StorageError.self) { try await broken.run(on: database, logger: TestDatabase.logger) }
            let recorded = try await database.read { sql in
                try await sql.select().column("version").from("schema_migrations").where("namespace", .equal, "broken").all()
            }
            #expect(recorded.isEmpty)
            // The table from the first statement was rolled back with the transaction.
            await #expect(throws: (any Error).self) {
                try await database.read { sql in try await sql.raw("SELECT * FROM half_done").run() }
            }
        }
    }

    @Test("a thrown error rolls the whole transaction back", arguments: TestDatabase.engines)
    func transactionRollback(engine: DatabaseEngine) async throws {
        struct Abort: Error {}
        try await TestDatabase.with(engine) { database in
            try await Self.migrations.run(on: database, logger: TestDatabase.logger)
            await #expect(throws: Abort.self) {
                try await database.transaction { sql in
                    try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("a"), SQLBind("kept?")).run()
                    throw Abort()
                }
            }
            let count = try await database.read { sql in
                try await sql.raw("SELECT COUNT(*) AS n FROM notes").first(decodingColumn: "n", as: Int.self)
            }
            #expect(count == 0)
        }
    }

    @Test(
        "rows: text, integers, booleans and NULLs read column by column; binds in order; NUL refused; a missing column is an error",
        arguments: TestDatabase.engines)
    func storedRows(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await database.transaction { sql in
                try await sql.raw("CREATE TABLE typed (name TEXT NOT NULL, n BIGINT, flag BOOLEAN NOT NULL, note TEXT)").run()
                try await sql.raw("INSERT INTO typed VALUES ('a', 7, TRUE, NULL), ('b', NULL, FALSE, 'é ✓'), ('c', -9000000000, TRUE, '')")
                    .run()
            }
            let rows = try await database.rows(
                "SELECT * FROM typed WHERE name <> ? AND flag = ? OR n = ? ORDER BY name", [.text("zzz"), .bool(true), .integer(-1)])
            #expect(try rows.map { try $0.text("name") } == ["a", "c"])
            #expect(try rows.map { try $0.optionalInteger("n") } == [7, -9_000_000_000])
            #expect(try rows.map { try $0.bool("flag") } == [true, true])
            #expect(try rows.map { try $0.optionalText("note") } == [nil, ""])
            let b = try await database.rows("SELECT * FROM typed WHERE name = ?", [.text("b")])
            #expect(try b.first?.optionalText("note") == "é ✓" && b.first?.optionalInteger("n") == nil)
            #expect(throws: StorageError.unreadableColumn("n")) { try b.first?.integer("n") }
            #expect(throws: StorageError.unreadableColumn("missing")) { try b.first?.optionalText("missing") }
            await #expect(throws: StorageError.textContainsNUL) {
                _ = try await database.rows("SELECT * FROM typed WHERE name = ?", [.text("a\u{0}")])
            }
        }
    }

    @Test(
        "single-statement writes: stored at once, a failed one stores nothing and leaves no transaction open, none interleaves with a transaction",
        arguments: TestDatabase.engines)
    func singleStatements(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await Self.migrations.run(on: database, logger: TestDatabase.logger)
            try await database.singleStatement { sql in
                try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("one"), SQLBind("first")).run()
            }
            // A duplicate key fails whole; the next transaction's rollback then rolls back only its own work.
            do {
                try await database.singleStatement { sql in
                    try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("one"), SQLBind("again")).run()
                }
                Issue.record("a duplicate key was stored")
            } catch {
                #expect(database.isUniqueViolation(error))
            }
            struct Abort: Error {}
            await #expect(throws: Abort.self) {
                try await database.transaction { sql in
                    try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("two"), SQLBind("rolled back")).run()
                    throw Abort()
                }
            }
            // NUL is refused here too (the guarded SQL database).
            await #expect(throws: StorageError.textContainsNUL) {
                try await database.singleStatement { sql in
                    try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("nul"), SQLBind("a\u{0}b")).run()
                }
            }
            // Single statements racing transactions that read, wait and write: neither sees the
            // other's half-done work, and every row arrives.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<30 {
                    group.addTask {
                        try await database.singleStatement { sql in
                            try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("s\(index)"), SQLBind("single")).run()
                        }
                    }
                    group.addTask {
                        try await database.transaction { sql in
                            let before = try await sql.raw("SELECT COUNT(*) AS n FROM notes").first(decodingColumn: "n", as: Int.self) ?? 0
                            try await Task.sleep(for: .milliseconds(1))
                            try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("t\(index)"), SQLBind("\(before)"))
                                .run()
                            let after = try await sql.raw("SELECT COUNT(*) AS n FROM notes").first(decodingColumn: "n", as: Int.self) ?? 0
                            // On SQLite nothing else writes inside this transaction; PostgreSQL's
                            // read committed may see others' commits, but never fewer rows.
                            if engine == .sqlite { #expect(after == before + 1) } else { #expect(after >= before + 1) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let bodies = try await database.read { sql in
                try await sql.select().column("id").from("notes").all(decodingColumn: "id", as: String.self)
            }
            #expect(Set(bodies) == Set(["one"] + (0..<30).map { "s\($0)" } + (0..<30).map { "t\($0)" }))
        }
    }

    @Test("concurrent read-modify-write transactions never lose an update", arguments: TestDatabase.engines)
    func transactionsDoNotInterleave(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await Self.migrations.run(on: database, logger: TestDatabase.logger)
            try await database.transaction { sql in
                try await sql.insert(into: "counters").columns("name", "value").values(SQLBind("hits"), SQLBind(0)).run()
            }
            // Fewer than the pool's 20 connections: this is about lost updates, not about waiting
            // for a connection (AvailabilityTests cover that). With 40, a starved 2-core machine
            // running every suite at once once kept all 20 behind the row lock past the lease
            // deadline, and the test failed on the deadline instead of on what it checks.
            let workers = 16
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<workers {
                    group.addTask {
                        try await database.transaction { sql in
                            var select = sql.select().column("value").from("counters").where("name", .equal, "hits")
                            if engine == .postgres { select = select.for(.update) }
                            let value = try await select.first(decodingColumn: "value", as: Int.self) ?? 0
                            try await Task.sleep(for: .milliseconds(1))
                            try await sql.update("counters").set("value", to: value + 1).where("name", .equal, "hits").run()
                        }
                    }
                }
                try await group.waitForAll()
            }
            let total = try await database.read { sql in
                try await sql.select().column("value").from("counters").where("name", .equal, "hits")
                    .first(decodingColumn: "value", as: Int.self)
            }
            #expect(total == workers)
        }
    }

    @Test("a unique-constraint violation is recognised as such", arguments: TestDatabase.engines)
    func uniqueViolation(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await Self.migrations.run(on: database, logger: TestDatabase.logger)
            let insert: @Sendable (any SQLDatabase) async throws -> Void = { sql in
                try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("same"), SQLBind("x")).run()
            }
            try await database.transaction(insert)
            do {
                try await database.transaction(insert)
                Issue.record("a duplicate primary key was accepted")
            } catch {
                #expect(database.isUniqueViolation(error))
            }
        }
    }

    @Test("a committed write is on disk: a new connection to the same SQLite file reads it")
    func sqliteDurability() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-durable-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("db.sqlite").path
        let writer = try await SQLiteDatabase(storage: .file(path), logger: TestDatabase.logger)
        try await Self.migrations.run(on: writer, logger: TestDatabase.logger)
        try await writer.transaction { sql in
            try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("1"), SQLBind("Grüße 🎉 'quoted'; DROP TABLE notes;--"))
                .run()
        }
        // A second connection while the first is still open: WAL readers see committed data.
        let reader = try await SQLiteDatabase(storage: .file(path), logger: TestDatabase.logger)
        let body = try await reader.read { sql in
            try await sql.select().column("body").from("notes").where("id", .equal, "1").first(decodingColumn: "body", as: String.self)
        }
        #expect(body == "Grüße 🎉 'quoted'; DROP TABLE notes;--")
        try await reader.close()
        try await writer.close()
    }

    @Test("SQLite reads run on read-only connections that see every committed write at once")
    func sqliteReaders() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-readers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await SQLiteDatabase(
            storage: .file(directory.appendingPathComponent("db.sqlite").path), logger: TestDatabase.logger)
        try await Self.migrations.run(on: database, logger: TestDatabase.logger)
        for index in 0..<20 {
            try await database.transaction { sql in
                try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("\(index)"), SQLBind("note \(index)")).run()
            }
            // Every read after the commit sees it, whichever reader connection it lands on.
            let count = try await database.read { sql in
                try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("notes")
                    .first(decodingColumn: "n", as: Int.self)
            }
            #expect(count == index + 1)
            let rows = try await database.rows("SELECT body FROM notes WHERE id = ?", [.text("\(index)")])
            #expect(try rows.first?.text("body") == "note \(index)")
        }
        // A write smuggled into `read` is refused instead of bypassing the writer's lock.
        await #expect(throws: (any Error).self) {
            try await database.read { sql in try await sql.raw("DELETE FROM notes").run() }
        }
        let remaining = try await database.rows("SELECT COUNT(*) AS n FROM notes", [])
        #expect(try remaining.first?.integer("n") == 20)
        try await database.close()
    }

    @Test("database URLs: unsupported schemes are refused, passwords are redacted")
    func databaseURLs() async throws {
        await #expect(throws: StorageError.self) {
            _ = try await DatabaseFactory.open(url: "mysql://x@y/z", logger: TestDatabase.logger)
        }
        #expect(DatabaseFactory.redacted("postgres://todo:s3cret@localhost:5432/todo") == "postgres://todo:***@localhost:5432/todo")
        #expect(DatabaseFactory.redacted("sqlite:/tmp/x.sqlite") == "sqlite:/tmp/x.sqlite")
    }

    @Test("a SQLite URL's ?synchronous= sets its durability (normal by default, full on request); any other value is refused")
    func sqliteURLDurability() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("durability-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // PRAGMA synchronous answers 1 for NORMAL, 2 for FULL (https://sqlite.org/pragma.html#pragma_synchronous).
        for (suffix, expected) in [("", 1), ("?synchronous=full", 2), ("?synchronous=NORMAL", 1)] {
            let database = try await DatabaseFactory.open(url: "sqlite:\(directory.path)/d.sqlite\(suffix)", logger: TestDatabase.logger)
            // The writer's connection: the one that commits.
            let level = try await database.transaction { sql in
                try await sql.raw("PRAGMA synchronous").first(decodingColumn: "synchronous", as: Int.self)
            }
            try await database.close()
            #expect(level == expected, "\(suffix)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/d.sqlite?synchronous=full"))
        await #expect(throws: StorageError.self) {
            _ = try await DatabaseFactory.open(url: "sqlite:\(directory.path)/d.sqlite?synchronous=sometimes", logger: TestDatabase.logger)
        }
    }
}
