import SQLKit
import Synchronization

/// One transaction that every write of a piece of work joins, through whatever repositories it
/// calls: an admin change and its audit record commit together or not at all (issue 51, F4: a
/// PostgreSQL restart between the two left an acknowledged Graph user with no "Add user"
/// record). ``Database/atomically(_:)`` starts one; inside it each `transaction` and
/// `singleStatement` runs as a savepoint of it (an inner failure undoes only its own writes, as
/// its own transaction did), and once it has begun, reads go to it too, so the work sees what
/// it wrote.
///
/// The transaction begins at the first write, not when the work starts: the work may hash a
/// password or make a key first, and on SQLite a transaction holds the one writer's lock.
final class SharedTransaction: Sendable {
    @TaskLocal static var current: SharedTransaction?
    /// Set inside a job: a repository call made while one runs (a read inside a transaction's
    /// body, `exclusively`'s work) runs straight on the connection, not behind the job's lock.
    @TaskLocal private static var insideJob = false

    /// What an engine lends for the transaction's life: its statements and its row reader.
    struct Connection: Sendable {
        let sql: any SQLDatabase
        let rows: @Sendable (String, [StoredValue]) async throws -> [StoredRow]
    }

    /// Runs the engine's own transaction around `hold`, which returns (commit) or throws (roll back)
    /// when the work is done.
    typealias Opener = @Sendable (_ hold: @escaping @Sendable (Connection) async throws -> Void) async throws -> Void

    private enum State {
        /// Nothing written yet.
        case idle
        case opening([CheckedContinuation<Connection, any Error>])
        case open(Connection)
        /// The work is over (committed, rolled back, or failed): late calls run on their own.
        case ended
    }

    private struct Holder {
        var task: Task<Void, any Error>?
        var end: CheckedContinuation<Bool, Never>?
        var endDecided: Bool?
        /// Run again once the transaction has ended, either way (caches forgetting).
        var afterTransaction: [@Sendable () -> Void] = []
        /// Writes that must not share the transaction's fate, run once it has ended.
        var afterEnd: [@Sendable () async -> Void] = []
    }

    /// A call that reached the transaction after its work ended: it runs on its own instead.
    struct Ended: Error {}

    /// The engine instance this transaction belongs to: a second database is not joined.
    let owner: ObjectIdentifier
    private let opener: Opener
    private let state = Mutex<State>(.idle)
    private let holder = Mutex(Holder())
    private let jobs = AsyncSerialLock()
    private let savepoints = Atomic<Int>(0)

    init(owner: ObjectIdentifier, opener: @escaping Opener) {
        self.owner = owner
        self.opener = opener
    }

    /// The transaction `database`'s calls join now, if any.
    static func joined(by database: AnyObject) -> SharedTransaction? {
        guard let current, current.owner == ObjectIdentifier(database) else { return nil }
        if case .ended = current.state.withLock({ $0 }) { return nil }
        return current
    }

    /// Runs `work` with every write it makes through the owner joining this transaction, and
    /// commits when it returns; rolls back when it throws (its error comes back unchanged).
    func run<T>(_ work: () async throws -> T) async throws -> T {
        let value: T
        do {
            value = try await Self.$current.withValue(self) { try await work() }
        } catch {
            _ = try? await finish(commit: false)
            throw error
        }
        try await finish(commit: true)
        return value
    }

    /// Runs `body` now and, inside a shared transaction, again once it has ended: an in-memory
    /// cache that forgets a change at once may read the old rows back before the change is
    /// committed (or keep rows a rollback took away), and must forget them again then.
    static func afterTransaction(on database: AnyObject, _ body: @escaping @Sendable () -> Void) {
        guard let shared = joined(by: database) else { return body() }
        shared.holder.withLock { $0.afterTransaction.append(body) }
        body()
    }

    /// Runs `body` once the shared transaction has ended, outside it, or now when there is
    /// none: a write that must stand whatever the work does (a refusal's audit record). Inside
    /// the transaction it would wait for the writer the transaction holds, or go with a rollback.
    static func afterEnd(on database: AnyObject, _ body: @escaping @Sendable () async -> Void) async {
        guard let shared = joined(by: database) else { return await body() }
        shared.holder.withLock { $0.afterEnd.append(body) }
    }

    // MARK: Joining calls

    /// A write: a savepoint of the transaction, which begins here if it has not.
    func write<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let connection = try await begun()
        return try await job { try await Self.savepoint(connection.sql, number: self.savepoints.add(1, ordering: .relaxed).newValue, body) }
    }

    /// A read on the transaction once it has begun (it sees the work's own writes); nil before.
    func read<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T? {
        guard let connection = try await begunForRead() else { return nil }
        // A failed statement ends a PostgreSQL transaction: a savepoint keeps a failed read the
        // caller's own failure, as it was outside.
        return try await job { try await Self.savepoint(connection.sql, number: self.savepoints.add(1, ordering: .relaxed).newValue, body) }
    }

    /// ``Database/rows(_:_:)`` on the transaction once it has begun; nil before.
    func rows(_ sql: String, _ binds: [StoredValue]) async throws -> [StoredRow]? {
        guard let connection = try await begunForRead() else { return nil }
        return try await job {
            try await Self.savepoint(connection.sql, number: self.savepoints.add(1, ordering: .relaxed).newValue) { _ in
                try await connection.rows(sql, binds)
            }
        }
    }

    /// The transaction a read joins: the open one, or the one another call is beginning (on
    /// SQLite its opener holds the one connection a read without readers would wait for); nil
    /// before any write, or after the work ended.
    private func begunForRead() async throws -> Connection? {
        switch state.withLock({ $0 }) {
        case .open(let connection): return connection
        case .opening:
            do { return try await begun() } catch is Ended { return nil }
        case .idle, .ended: return nil
        }
    }

    private func job<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if Self.insideJob { return try await body() }
        return try await jobs.withLock { try await Self.$insideJob.withValue(true) { try await body() } }
    }

    private static func savepoint<T: Sendable>(
        _ sql: any SQLDatabase, number: Int, _ body: @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await sql.raw("SAVEPOINT shared_\(unsafeRaw: "\(number)")").run()
        let value: T
        do {
            value = try await body(sql)
        } catch {
            try? await sql.raw("ROLLBACK TO SAVEPOINT shared_\(unsafeRaw: "\(number)")").run()
            try? await sql.raw("RELEASE SAVEPOINT shared_\(unsafeRaw: "\(number)")").run()
            throw error
        }
        try await sql.raw("RELEASE SAVEPOINT shared_\(unsafeRaw: "\(number)")").run()
        return value
    }

    // MARK: The transaction's life

    /// The open transaction, begun by the first caller; the others wait for it.
    private func begun() async throws -> Connection {
        enum Step {
            case ready(Connection)
            case wait
            case start
            case ended
        }
        return try await withCheckedThrowingContinuation { continuation in
            let step: Step = state.withLock { state in
                switch state {
                case .open(let connection): return .ready(connection)
                case .opening(var waiters):
                    waiters.append(continuation)
                    state = .opening(waiters)
                    return .wait
                case .idle:
                    state = .opening([continuation])
                    return .start
                case .ended:
                    // A call that joined just before the work ended: it runs on its own.
                    return .ended
                }
            }
            switch step {
            case .ready(let connection): continuation.resume(returning: connection)
            case .wait: break
            case .start: start()
            case .ended: continuation.resume(throwing: Ended())
            }
        }
    }

    /// The holder: the engine's own transaction, kept open until ``finish(commit:)`` decides.
    private func start() {
        let task = Task {
            try await Self.$current.withValue(nil) {
                let runs = Atomic<Int>(0)
                try await opener { connection in
                    // An engine that runs the transaction again (PostgreSQL's markers' table made
                    // again) must not commit an empty second run as if it were the work.
                    guard runs.add(1, ordering: .relaxed).oldValue == 0 else {
                        throw StorageError.unavailable("the transaction was interrupted; nothing was stored")
                    }
                    let waiters: [CheckedContinuation<Connection, any Error>] = self.state.withLock { state in
                        guard case .opening(let waiters) = state else { return [] }
                        state = .open(connection)
                        return waiters
                    }
                    for waiter in waiters { waiter.resume(returning: connection) }
                    let commit = await withCheckedContinuation { end in
                        let decided: Bool? = self.holder.withLock { holder in
                            if let decided = holder.endDecided { return decided }
                            holder.end = end
                            return nil
                        }
                        if let decided { end.resume(returning: decided) }
                    }
                    guard commit else { throw RolledBack() }
                }
            }
        }
        holder.withLock { $0.task = task }
        // A transaction that could not begin fails its waiters (the database is down).
        Task {
            if case .failure(let error) = await task.result {
                let waiters: [CheckedContinuation<Connection, any Error>] = self.state.withLock { state in
                    guard case .opening(let waiters) = state else { return [] }
                    state = .ended
                    return waiters
                }
                for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }

    private struct RolledBack: Error {}

    /// Ends the work: commits (or rolls back) the transaction if it began, and runs what waits
    /// for the commit.
    private func finish(commit: Bool) async throws {
        let wasOpen: Bool = state.withLock { state in
            defer { state = .ended }
            if case .idle = state { return false }
            return true
        }
        let (task, end) = holder.withLock { holder -> (Task<Void, any Error>?, CheckedContinuation<Bool, Never>?) in
            holder.endDecided = commit
            defer { holder.end = nil }
            return (holder.task, holder.end)
        }
        var failure: (any Error)?
        if wasOpen, let task {
            end?.resume(returning: commit)
            do {
                try await task.value
            } catch is RolledBack {
            } catch {
                failure = error
            }
        }
        let (forget, writes) = holder.withLock { ($0.afterTransaction, $0.afterEnd) }
        for body in forget { body() }
        await Self.$current.withValue(nil) { for write in writes { await write() } }
        if let failure { throw failure }
    }
}

extension Database {
    /// Runs `work` as one transaction: every `transaction` and `singleStatement` it makes
    /// through this database commits when `work` returns, or none does when it throws. Work
    /// already inside one joins it. See ``SharedTransaction``.
    public func atomically<T>(_ work: () async throws -> T) async throws -> T {
        // Both engines share; a stand-in of a test runs the work as it is.
        guard let engine = self as? any SharingDatabase else { return try await work() }
        if SharedTransaction.joined(by: engine) != nil { return try await work() }
        return try await SharedTransaction(owner: ObjectIdentifier(engine), opener: engine.sharedOpener()).run(work)
    }

    /// Runs `body` now and, inside ``atomically(_:)`` work, again once it has ended (an
    /// in-memory cache forgetting a change: see ``SharedTransaction/afterTransaction(on:_:)``).
    public func afterTransaction(_ body: @escaping @Sendable () -> Void) {
        guard let engine = self as? any SharingDatabase else { return body() }
        SharedTransaction.afterTransaction(on: engine, body)
    }

    /// Runs `body` outside the current ``atomically(_:)`` work, once it has ended, or now when
    /// there is none (see ``SharedTransaction/afterEnd(on:_:)``).
    public func afterEnd(_ body: @escaping @Sendable () async -> Void) async {
        guard let engine = self as? any SharingDatabase else { return await body() }
        await SharedTransaction.afterEnd(on: engine, body)
    }
}

/// An engine whose transactions ``SharedTransaction`` can share.
protocol SharingDatabase: Database, AnyObject {
    func sharedOpener() -> SharedTransaction.Opener
}
