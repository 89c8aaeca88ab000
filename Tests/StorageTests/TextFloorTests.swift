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
