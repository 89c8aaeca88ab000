import Foundation
import SQLKit
import Storage
import TestSupport
import Testing

@Suite("The storage floor under text validation")
struct TextFloorTests {
    @Test("text holding a NUL is refused before it reaches the driver, and nothing is written", arguments: TestDatabase.engines)
    func nulIsRefused(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            _ = try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)

            await #expect(throws: StorageError.textContainsNUL) {
                try await database.transaction { sql in
                    try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("a"), SQLBind("bob@example.com\u{0}.evil"))
                        .run()
                }
            }
            await #expect(throws: StorageError.textContainsNUL) {
                try await database.transaction { sql in
                    try await sql.raw("INSERT INTO notes (id, body) VALUES ('b', \(bind: "x\u{0}"))").run()
                }
            }
            await #expect(throws: StorageError.textContainsNUL) {
                try await database.read { sql in
                    try await sql.select().column("id").from("notes").where("body", .equal, "\u{0}").all()
                }
            }

            let count = try await database.read { sql in
                try await sql.raw("SELECT COUNT(*) AS n FROM notes").first(decodingColumn: "n", as: Int.self)
            }
            #expect(count == 0)
        }
    }

    @Test("text without a NUL round-trips unchanged: controls, emoji and non-Latin scripts", arguments: TestDatabase.engines)
    func textRoundTrips(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            _ = try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
            let body = "tab\there é e\u{301} 👩‍👩‍👧 иван 東京 \u{7F}"
            try await database.transaction { sql in
                try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("a"), SQLBind(body)).run()
            }
            let stored = try await database.read { sql in
                try await sql.select().column("body").from("notes").where("id", .equal, "a").first(decodingColumn: "body", as: String.self)
            }
            #expect(stored?.unicodeScalars.elementsEqual(body.unicodeScalars) == true)
        }
    }
}

@Suite("SQLite files are owner-only")
struct SQLiteFileModeTests {
    private func mode(_ path: String) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    @Test("a new database outside the data dir: directory 0700, database, -wal and -shm 0600")
    func newDatabase() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("modes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let path = root.appendingPathComponent("nested/todo.sqlite").path
        let database = try await SQLiteDatabase(storage: .file(path), logger: TestDatabase.logger)
        _ = try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
        try await database.transaction { sql in try await sql.raw("INSERT INTO notes (id, body) VALUES ('a', 'b')").run() }
        #expect(try mode(root.appendingPathComponent("nested").path) == 0o700)
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(FileManager.default.fileExists(atPath: file), "\(file)")
            #expect(try mode(file) == 0o600, "\(file)")
        }
        try await database.close()
    }

    @Test("an existing world-readable database is narrowed to 0600 when opened")
    func existingDatabase() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("modes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let path = root.appendingPathComponent("todo.sqlite").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644]))
        let database = try await SQLiteDatabase(storage: .file(path), logger: TestDatabase.logger)
        #expect(try mode(path) == 0o600)
        try await database.close()
    }
}
