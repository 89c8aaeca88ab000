import Foundation
import SQLKit
import Storage
import Synchronization
import TestSupport
import Testing
import TodoModels

@testable import TaskService

/// The in-memory first page of each owner's list (issue 13) is exact: every write through the
/// repository shows in the next list, and a read that overlapped a write is never kept.
@Suite("Owner list cache")
struct ListCacheTests {
    /// A fresh database of `engine` with the task schema.
    static func withTasks(_ engine: DatabaseEngine, _ body: (any Database) async throws -> Void) async throws {
        try await TestDatabase.with(engine) { database in
            try await SQLTaskRepository.migrations.run(on: database, logger: TestDatabase.logger)
            try await body(database)
        }
    }

    static func titles(_ repository: SQLTaskRepository, _ owner: String, limit: Int = 100) async throws -> [String] {
        try await repository.list(owner: owner, completed: nil, limit: limit, after: nil).records.map(\.item.title)
    }

    @Test("the encoded first page is made once, shows every write, and other pages are always encoded afresh")
    func encodedPage() async throws {
        try await Self.withTasks(.sqlite) { database in
            let cached = SQLTaskRepository(database: database, cachesLists: true)
            let truth = SQLTaskRepository(database: database)
            let encodings = Counter()
            let encode: @Sendable ([TaskRecord], TaskCursor?) -> [UInt8] = { records, next in
                encodings.increment()
                return Array((records.map(\.item.title).joined(separator: ",") + "|" + (next?.token ?? "")).utf8)
            }
            func body(_ repository: SQLTaskRepository, limit: Int = TaskLimits.pageSizeDefault, completed: Bool? = nil) async throws
                -> String
            {
                let page = try await repository.encodedList(owner: "ann", completed: completed, limit: limit, after: nil, encode: encode)
                return String(decoding: page.body, as: UTF8.self)
            }
            var clock = Date(timeIntervalSince1970: 1_800_000_000)
            for title in ["a", "b"] {
                clock = clock.addingTimeInterval(1)
                _ = try await cached.create(owner: "ann", ownerName: nil, title: title, completed: false, now: clock)
            }
            #expect(try await body(cached) == "b,a|")
            #expect(try await body(cached) == "b,a|")
            #expect(encodings.value == 1)
            // A write drops it: the next body is the database's.
            clock = clock.addingTimeInterval(1)
            let c = try await cached.create(owner: "ann", ownerName: nil, title: "c", completed: false, now: clock)
            #expect(try await body(cached) == "c,b,a|")
            _ = try await cached.update(
                owner: "ann", id: c.item.id, patch: TaskPatch(title: "c2", completed: true), ifVersion: nil, now: clock)
            #expect(try await body(cached) == (try await body(truth)))
            #expect(try await body(cached) == "c2,b,a|")
            // Other sizes and filters are encoded every time, from the same rows.
            let before = encodings.value
            #expect(try await body(cached, limit: 2) == (try await body(truth, limit: 2)))
            #expect(try await body(cached, limit: 2).hasPrefix("c2,b|"))
            #expect(try await body(cached, completed: true) == "c2|")
            #expect(encodings.value == before + 4)
        }
    }

    final class Counter: Sendable {
        private let count = Mutex(0)
        func increment() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    @Test("every write shows in the next list, as the database has it; other owners and filtered lists are unaffected")
    func writesShow() async throws {
        try await Self.withTasks(.sqlite) { database in
            let cached = SQLTaskRepository(database: database, cachesLists: true)
            let truth = SQLTaskRepository(database: database)
            var clock = Date(timeIntervalSince1970: 1_800_000_000)
            func next() -> Date {
                clock = clock.addingTimeInterval(1)
                return clock
            }
            #expect(try await Self.titles(cached, "ann").isEmpty)
            let walk = try await cached.create(owner: "ann", ownerName: nil, title: "walk", completed: false, now: next())
            _ = try await cached.create(owner: "ann", ownerName: nil, title: "feed", completed: false, now: next())
            _ = try await cached.create(owner: "ben", ownerName: nil, title: "ben's", completed: false, now: next())
            #expect(try await Self.titles(cached, "ann") == ["feed", "walk"])
            #expect(try await Self.titles(cached, "ben") == ["ben's"])
            _ = try await cached.update(
                owner: "ann", id: walk.item.id, patch: TaskPatch(title: "run", completed: true), ifVersion: nil, now: next())
            #expect(try await Self.titles(cached, "ann") == ["feed", "run"])
            #expect(try await cached.list(owner: "ann", completed: true, limit: 10, after: nil).records.map(\.item.title) == ["run"])
            #expect(try await cached.delete(owner: "ann", title: "feed") == 1)
            #expect(try await Self.titles(cached, "ann") == ["run"])
            _ = try await cached.delete(owner: "ann", id: walk.item.id, ifVersion: nil)
            #expect(try await Self.titles(cached, "ann").isEmpty)
            // A smaller page from the cached first page: the same page and cursor as the database's.
            for n in 0..<5 { _ = try await cached.create(owner: "cy", ownerName: nil, title: "t\(n)", completed: false, now: next()) }
            _ = try await Self.titles(cached, "cy")
            let page = try await cached.list(owner: "cy", completed: nil, limit: 2, after: nil)
            let expected = try await truth.list(owner: "cy", completed: nil, limit: 2, after: nil)
            #expect(page.records.map(\.item.title) == expected.records.map(\.item.title) && page.next == expected.next)
            // Adoption moves tasks between owner keys: both lists follow.
            _ = try await Self.titles(cached, "legacy-oid")
            _ = try await Self.titles(cached, "iss:legacy-oid")
            _ = try await cached.create(owner: "legacy-oid", ownerName: nil, title: "old", completed: false, now: next())
            #expect(try await cached.adoptLegacyTasks(objectID: "legacy-oid", ownerKey: "iss:legacy-oid") == 1)
            #expect(try await Self.titles(cached, "legacy-oid").isEmpty)
            #expect(try await Self.titles(cached, "iss:legacy-oid") == ["old"])
            for owner in ["ann", "ben", "cy", "iss:legacy-oid"] {
                #expect(try await Self.titles(cached, owner) == (try await Self.titles(truth, owner)), "\(owner)")
            }
        }
    }

    @Test("a read that overlapped a write is not kept; a page is served only at the version it was kept at")
    func overlappingReadNotKept() {
        let cache = OwnerListCache()
        let epoch = cache.epoch
        cache.written(owner: "someone else")
        cache.store([], owner: "ann", at: 7, ifEpoch: epoch)
        #expect(cache.rows(owner: "ann", at: 7) == nil)
        cache.store([], owner: "ann", at: 7, ifEpoch: cache.epoch)
        #expect(cache.rows(owner: "ann", at: 7) != nil)
        #expect(cache.rows(owner: "ann", at: 8) == nil)
        #expect(cache.rows(owner: "ann", at: nil) == nil)
        cache.storeEncodedPage(([1], nil), owner: "ann", at: 8, ifEpoch: cache.epoch)
        #expect(cache.encodedPage(owner: "ann", at: 8) == nil)
        cache.storeEncodedPage(([1], nil), owner: "ann", at: 7, ifEpoch: cache.epoch)
        #expect(cache.encodedPage(owner: "ann", at: 7)?.body == [1])
        #expect(cache.encodedPage(owner: "ann", at: 8) == nil)
        cache.written(owner: "ann")
        #expect(cache.rows(owner: "ann", at: 7) == nil)
    }

    /// PostgreSQL runs only when `TODO_TEST_POSTGRES_URL` is set; scripts/test sets it and
    /// `TODO_REQUIRE_POSTGRES=1`, so there these run.
    static var sharedEngines: [DatabaseEngine] { TestDatabase.engines.filter { $0 == .postgres } }

    @Test(
        "instances sharing PostgreSQL: a write through another instance, or by plain SQL, shows in the next list",
        arguments: sharedEngines)
    func sharedWritesShow(engine: DatabaseEngine) async throws {
        try await Self.withTasks(engine) { database in
            // Two instances: each its own cache and its own version reads.
            let one = SQLTaskRepository(database: database, cachesLists: true)
            let other = SQLTaskRepository(database: database, cachesLists: true)
            let encode: @Sendable ([TaskRecord], TaskCursor?) -> [UInt8] = { records, _ in
                Array(records.map(\.item.title).joined(separator: ",").utf8)
            }
            func page() async throws -> String {
                let page = try await one.encodedList(
                    owner: "ann", completed: nil, limit: TaskLimits.pageSizeDefault, after: nil, encode: encode)
                return String(decoding: page.body, as: UTF8.self)
            }
            func sql(_ statement: String) async throws {
                try await database.transaction { try await $0.raw(SQLQueryString(statement)).run() }
            }
            #expect(try await Self.titles(one, "ann").isEmpty)
            #expect(try await page() == "")
            let walk = try await other.create(owner: "ann", ownerName: nil, title: "walk", completed: false, now: Date())
            #expect(try await Self.titles(one, "ann") == ["walk"])
            #expect(try await page() == "walk")
            _ = try await other.update(owner: "ann", id: walk.item.id, patch: TaskPatch(title: "run"), ifVersion: nil, now: Date())
            #expect(try await page() == "run")
            #expect(try await Self.titles(one, "ann") == ["run"])
            try await sql("UPDATE tasks SET title = 'jog'")
            #expect(try await page() == "jog")
            #expect(try await Self.titles(one, "ann") == ["jog"])
            _ = try await other.delete(owner: "ann", id: walk.item.id, ifVersion: nil)
            #expect(try await page() == "")
            _ = try await other.create(owner: "ann", ownerName: nil, title: "feed", completed: false, now: Date())
            #expect(try await page() == "feed")
            try await sql("TRUNCATE tasks")
            #expect(try await page() == "")
            #expect(try await Self.titles(one, "ann").isEmpty)
            // Adoption moves tasks from one owner key to another: both lists follow.
            _ = try await other.create(owner: "legacy-oid", ownerName: nil, title: "old", completed: false, now: Date())
            #expect(try await Self.titles(one, "legacy-oid") == ["old"])
            #expect(try await Self.titles(one, "iss:legacy-oid").isEmpty)
            #expect(try await other.adoptLegacyTasks(objectID: "legacy-oid", ownerKey: "iss:legacy-oid") == 1)
            #expect(try await Self.titles(one, "legacy-oid").isEmpty)
            #expect(try await Self.titles(one, "iss:legacy-oid") == ["old"])
            // A session whose search_path does not name the schema still moves the version.
            let schema = try #require(try await database.rows("SELECT current_schema() AS s", []).first?.text("s"))
            try await database.transaction { sql in
                try await sql.raw("SET LOCAL search_path = public").run()
                try await sql.raw("UPDATE \(unsafeRaw: schema).tasks SET title = 'moved'").run()
            }
            #expect(try await Self.titles(one, "iss:legacy-oid") == ["moved"])
        }
    }

    @Test(
        "instances sharing PostgreSQL: a database made again under them (same URL) never gives a version a page was cached at",
        arguments: sharedEngines)
    func remadeDatabase(engine: DatabaseEngine) async throws {
        try await Self.withTasks(engine) { database in
            let running = SQLTaskRepository(database: database, cachesLists: true)
            let writer = SQLTaskRepository(database: database)
            _ = try await writer.create(owner: "ann", ownerName: nil, title: "walk", completed: false, now: Date())
            #expect(try await Self.titles(running, "ann") == ["walk"])
            // The database is dropped and made again where it was (here its schema), migrated and
            // written to, while `running` keeps its cache: ann's first write there must not get
            // the version her cached page has.
            let schema = try #require(try await database.rows("SELECT current_schema() AS s", []).first?.text("s"))
            try await database.transaction { sql in
                try await sql.raw("DROP SCHEMA \(unsafeRaw: schema) CASCADE").run()
                try await sql.raw("CREATE SCHEMA \(unsafeRaw: schema)").run()
            }
            try await SQLTaskRepository.migrations.run(on: database, logger: TestDatabase.logger)
            _ = try await writer.create(owner: "ann", ownerName: nil, title: "swim", completed: false, now: Date())
            #expect(try await Self.titles(running, "ann") == ["swim"])
        }
    }

    @Test("creates and lists racing: every list afterwards holds exactly what the database holds")
    func racing() async throws {
        try await Self.withTasks(.sqlite) { database in
            let cached = SQLTaskRepository(database: database, cachesLists: true)
            let truth = SQLTaskRepository(database: database)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<40 {
                    group.addTask {
                        _ = try await cached.create(owner: "ann", ownerName: nil, title: "t\(n)", completed: false, now: Date())
                    }
                    group.addTask { _ = try await Self.titles(cached, "ann") }
                }
                try await group.waitForAll()
            }
            let listed = try await Self.titles(cached, "ann")
            #expect(listed.count == 40)
            #expect(listed == (try await Self.titles(truth, "ann")))
        }
    }

    @Test(
        "instances sharing PostgreSQL, racing: a list that began after a create returned holds it, for every owner",
        arguments: sharedEngines)
    func sharedRacing(engine: DatabaseEngine) async throws {
        try await Self.withTasks(engine) { database in
            let reader = SQLTaskRepository(database: database, cachesLists: true)
            let writer = SQLTaskRepository(database: database, cachesLists: true)
            let owners = (0..<12).map { "owner-\($0)" }
            // Each owner's lists keep the reader's cache busy while the writer adds tasks; after
            // each create returns, the reader's next list must hold it (read-your-writes across
            // instances), whatever batch of version reads it joins.
            try await withThrowingTaskGroup(of: [String].self) { group in
                for owner in owners {
                    group.addTask {
                        var missing: [String] = []
                        for n in 0..<15 {
                            let title = "\(owner) #\(n)"
                            _ = try await writer.create(owner: owner, ownerName: nil, title: title, completed: false, now: Date())
                            if !(try await Self.titles(reader, owner).contains(title)) { missing.append(title) }
                        }
                        return missing
                    }
                    group.addTask {
                        for _ in 0..<30 { _ = try await Self.titles(reader, owner) }
                        return []
                    }
                }
                var missing: [String] = []
                for try await found in group { missing += found }
                #expect(missing.isEmpty, "lists that missed a create that had returned: \(missing)")
            }
            for owner in owners {
                #expect(try await Self.titles(reader, owner) == (try await Self.titles(SQLTaskRepository(database: database), owner)))
            }
        }
    }

    @Test("PostgreSQL that never answers: every list waiting on a version read fails as unavailable within the deadline, again and again")
    func sharedUnavailable() async throws {
        try await SilentPort.with { port in
            let database = try PostgresDatabase(url: "postgres://todo:secret@127.0.0.1:\(port)/todo", logger: TestDatabase.logger)
            let repository = SQLTaskRepository(database: database, cachesLists: true)
            let clock = ContinuousClock()
            for _ in 0..<2 {
                let start = clock.now
                let failures = try await withThrowingTaskGroup(of: String?.self) { group in
                    for n in 0..<12 {
                        group.addTask {
                            do {
                                _ = try await Self.titles(repository, "owner-\(n % 3)")
                                return "owner-\(n % 3) was listed"
                            } catch StorageError.unavailable {
                                return nil
                            } catch {
                                return "\(error)"
                            }
                        }
                    }
                    return try await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
                }
                #expect(failures.isEmpty)
                // Within the connection deadline and its second look, not the busy deadline.
                #expect(clock.now - start < PostgresDatabase.busyDeadline - .seconds(10))
            }
            try await database.close()
        }
    }

    @Test(
        "a version read that never answers (a lock held elsewhere) fails its lists as unavailable within seconds; the next read works",
        arguments: sharedEngines)
    func sharedHungRead(engine: DatabaseEngine) async throws {
        try await Self.withTasks(engine) { database in
            let repository = SQLTaskRepository(database: database, cachesLists: true)
            _ = try await repository.create(owner: "ann", ownerName: nil, title: "kept", completed: false, now: Date())
            #expect(try await Self.titles(repository, "ann") == ["kept"])
            // Another session takes the versions table and keeps it: the version read waits on
            // its lock, as on a connection whose peer went silent.
            let (locked, lockedSignal) = AsyncStream.makeStream(of: Void.self)
            let released = Mutex(false)
            async let holder: Void = database.transaction { sql in
                try await sql.raw("LOCK TABLE task_list_versions IN ACCESS EXCLUSIVE MODE").run()
                lockedSignal.yield()
                // Released by the test, or after 15 s whatever happens, so that without the rule
                // this fails rather than hangs.
                let clock = ContinuousClock()
                let until = clock.now + .seconds(15)
                while !released.withLock({ $0 }), clock.now < until { try await Task.sleep(for: .milliseconds(50)) }
            }
            for await _ in locked { break }
            let clock = ContinuousClock()
            let start = clock.now
            let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        do {
                            return try await Self.titles(repository, "ann").joined()
                        } catch StorageError.unavailable {
                            return "unavailable"
                        }
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            let waited = clock.now - start
            released.withLock { $0 = true }
            try await holder
            #expect(outcomes == Array(repeating: "unavailable", count: 6))
            // Without the rule the reads wait for the holder, which lets go after 15 s; with it they
            // give up after the read timeout, even with six queued on a loaded machine.
            #expect(waited < .seconds(14), "failed after \(waited), not when TCP would give up")
            #expect(try await Self.titles(repository, "ann") == ["kept"], "the next read, on a fresh connection, answers")
        }
    }

    @Test(
        "a database from before the versions: owners with tasks get one, so a TRUNCATE afterwards still shows",
        arguments: sharedEngines)
    func upgradedThenTruncated(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            let first = Array(SQLTaskRepository.migrations.migrations.prefix(1))
            try await MigrationRunner(namespace: "tasks", migrations: first).run(on: database, logger: TestDatabase.logger)
            _ = try await SQLTaskRepository(database: database).create(
                owner: "ann", ownerName: nil, title: "from before", completed: false, now: Date())
            try await SQLTaskRepository.migrations.run(on: database, logger: TestDatabase.logger)
            let cached = SQLTaskRepository(database: database, cachesLists: true)
            #expect(try await Self.titles(cached, "ann") == ["from before"])
            try await database.transaction { try await $0.raw("TRUNCATE tasks").run() }
            #expect(try await Self.titles(cached, "ann").isEmpty)
        }
    }

    @Test(
        "a NUL in one request's owner fails that request alone, not the others read in the same batch",
        arguments: sharedEngines)
    func nulOwnerFailsAlone(engine: DatabaseEngine) async throws {
        try await Self.withTasks(engine) { database in
            let repository = SQLTaskRepository(database: database, cachesLists: true)
            _ = try await repository.create(owner: "ann", ownerName: nil, title: "kept", completed: false, now: Date())
            let outcomes = try await withThrowingTaskGroup(of: (String, String).self) { group in
                for n in 0..<30 {
                    let owner = n % 3 == 0 ? "bad\u{0}owner" : "ann"
                    group.addTask {
                        do {
                            return (owner, try await Self.titles(repository, owner).joined(separator: ","))
                        } catch StorageError.textContainsNUL {
                            return (owner, "refused")
                        }
                    }
                }
                return try await group.reduce(into: [(String, String)]()) { $0.append($1) }
            }
            #expect(outcomes.count == 30)
            for (owner, outcome) in outcomes {
                #expect(outcome == (owner == "ann" ? "kept" : "refused"), "\(owner.debugDescription): \(outcome)")
            }
        }
    }

    @Test(
        "owners spelled alike but not byte for byte (é as one code point, or e and a combining accent) keep their own lists",
        arguments: TestDatabase.engines)
    func canonicallyEquivalentOwners(engine: DatabaseEngine) async throws {
        try await Self.withTasks(engine) { database in
            let repository = SQLTaskRepository(database: database, cachesLists: true)
            let composed = "iss:caf\u{E9}"
            let decomposed = "iss:cafe\u{301}"
            #expect(composed == decomposed)  // Swift's String equality: canonical equivalence
            _ = try await repository.create(owner: composed, ownerName: nil, title: "composed's", completed: false, now: Date())
            // Read together, as one batch would on PostgreSQL, and one after the other from the cache.
            async let first = Self.titles(repository, composed)
            async let second = Self.titles(repository, decomposed)
            #expect(try await first == ["composed's"])
            #expect(try await second.isEmpty)
            #expect(try await Self.titles(repository, decomposed).isEmpty)
            #expect(try await Self.titles(repository, composed) == ["composed's"])
        }
    }
}
