import Foundation
import SQLKit
import Storage
import Synchronization
import TestSupport
import Testing

/// ``Database/atomically(_:)``: the writes of one piece of work, through any number of
/// `transaction` and `singleStatement` calls, commit together or not at all (issue 51, F4).
@Suite("Work that commits as one transaction")
struct SharedTransactionTests {
    struct Abort: Error {}

    static func insert(_ database: any Database, _ id: String) async throws {
        try await database.transaction { sql in
            try await sql.insert(into: "notes").columns("id", "body").values(SQLBind(id), SQLBind("note")).run()
        }
    }

    static func ids(_ database: any Database) async throws -> [String] {
        try await database.rows("SELECT id FROM notes ORDER BY id", []).map { try $0.text("id") }
    }

    @Test("work that throws after two writes leaves neither; work that returns keeps both", arguments: TestDatabase.engines)
    func allOrNothing(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
            await #expect(throws: Abort.self) {
                try await database.atomically {
                    try await Self.insert(database, "a")
                    try await database.singleStatement { sql in
                        try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("b"), SQLBind("note")).run()
                    }
                    throw Abort()
                }
            }
            #expect(try await Self.ids(database).isEmpty)
            try await database.atomically {
                try await Self.insert(database, "a")
                try await Self.insert(database, "b")
            }
            #expect(try await Self.ids(database) == ["a", "b"])
        }
    }

    @Test(
        "an inner write that fails undoes only itself (a caught duplicate), and the rest commits; PostgreSQL's transaction stays usable",
        arguments: TestDatabase.engines)
    func innerFailure(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
            try await database.atomically {
                try await Self.insert(database, "a")
                do {
                    try await database.transaction { sql in
                        try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("c"), SQLBind("note")).run()
                        try await sql.insert(into: "notes").columns("id", "body").values(SQLBind("a"), SQLBind("twice")).run()
                    }
                    Issue.record("the duplicate was stored")
                } catch where database.isUniqueViolation(error) {}
                try await Self.insert(database, "b")
            }
            #expect(try await Self.ids(database) == ["a", "b"])
        }
    }

    @Test("once begun, reads and rows see the work's own writes", arguments: TestDatabase.engines)
    func readsOwnWrites(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
            let seen = try await database.atomically {
                try await Self.insert(database, "a")
                let counted = try await database.read { sql in
                    try await sql.raw("SELECT COUNT(*) AS n FROM notes").first(decodingColumn: "n", as: Int.self)
                }
                return (counted, try await Self.ids(database))
            }
            #expect(seen.0 == 1 && seen.1 == ["a"])
        }
    }

    @Test(
        "the transaction begins at the first write: before it, another request's write is not held up (SQLite's one writer)",
        arguments: TestDatabase.engines)
    func beginsAtFirstWrite(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
            let (outside, outsideDone) = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await database.atomically {
                        // The work has started and written nothing: a write outside it commits.
                        var waiting = outside.makeAsyncIterator()
                        _ = await waiting.next()
                        try await Self.insert(database, "inside")
                    }
                }
                group.addTask {
                    try await Self.insert(database, "outside")
                    outsideDone.yield()
                    outsideDone.finish()
                }
                try await group.waitForAll()
            }
            #expect(try await Self.ids(database) == ["inside", "outside"])
        }
    }

    @Test(
        "a cache told to forget forgets now and again when the transaction ends, either way; a write after the end stands when the work rolls back",
        arguments: TestDatabase.engines)
    func afterTheTransaction(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
            let calls = Mutex<[String]>([])
            try await database.atomically {
                try await Self.insert(database, "a")
                database.afterTransaction { calls.withLock { $0.append("forget") } }
                calls.withLock { $0.append("work") }
            }
            #expect(calls.withLock { $0 } == ["forget", "work", "forget"])
            calls.withLock { $0.removeAll() }
            _ = try? await database.atomically {
                try await Self.insert(database, "b")
                database.afterTransaction { calls.withLock { $0.append("forget") } }
                // A refusal's record: written once the work has ended, outside it.
                await database.afterEnd { try? await Self.insert(database, "record") }
                throw Abort()
            }
            #expect(calls.withLock { $0 } == ["forget", "forget"])
            #expect(try await Self.ids(database) == ["a", "record"])
        }
    }

    @Test("work inside work joins it: the inner work's writes go when the outer work throws", arguments: TestDatabase.engines)
    func nested(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await StorageTests.migrations.run(on: database, logger: TestDatabase.logger)
            _ = try? await database.atomically {
                try await database.atomically { try await Self.insert(database, "inner") }
                throw Abort()
            }
            #expect(try await Self.ids(database).isEmpty)
        }
    }
}
