import Dispatch
import NIOCore
import NIOPosix
import Storage
import Synchronization

/// How the repository knows that an owner's cached page is still the owner's newest.
enum ListFreshness: Sendable {
    /// Every write to these tasks goes through this process's repository (the server's own
    /// SQLite file): a write drops the owner's page, so a page in the cache is current.
    case exclusive
    /// Other instances write the same tasks (PostgreSQL): a page is current when the owner's
    /// version, read after the request began, is the one it was cached at.
    case shared(SharedListVersions)

    /// The owner's version now; for ``exclusive`` always the same.
    func version(of owner: String) async throws -> Int64? {
        switch self {
        case .exclusive: 0
        case .shared(let versions): try await versions.version(of: owner)
        }
    }
}

/// Owners' task-list versions from PostgreSQL (`task_list_versions`, kept by a trigger on
/// `tasks`), read in batches: each request must see every write that committed before it began,
/// on any instance, so each waits for a read of the database; but requests that arrive while one
/// read is on its way share the next one, which starts after all of them began. Under load that
/// is one round trip for many requests, instead of one each (the list at 18–23% of SQLite's in
/// issue 13). Exact: a batch's statement takes its snapshot after every request in it arrived,
/// and a version never repeats.
///
/// The reads are made by at most ``readerLimit`` reader tasks, each holding one pooled
/// connection while there is work and for ``linger`` after (``PostgresDatabase/withReadSession(_:)``).
final class SharedListVersions: Sendable {
    private struct Waiter {
        var owner: String
        var continuation: CheckedContinuation<Int64?, any Error>
        /// When it arrived (uptime nanoseconds), for ``waitLimit``.
        var arrived: UInt64
        /// The event loop the request ran on: it resumes there, next to its connection, rather
        /// than on the loop that read the batch (NIO's executor keeps a resumed task on the
        /// resuming thread, and the response would hop back).
        var loop: (any EventLoop)?

        func resume(_ outcome: Result<Int64?, any Error>) {
            guard let loop, !loop.inEventLoop else { return continuation.resume(with: outcome) }
            loop.execute { continuation.resume(with: outcome) }
        }
    }

    /// A reader with nothing to read, holding its connection for a while.
    private struct ParkedReader {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var waiting: [Waiter] = []
        var readers = 0
        var parked: [ParkedReader] = []
        var nextParkID: UInt64 = 0
    }

    private let database: PostgresDatabase
    private let state = Mutex(State())
    /// Owners asked for in one statement, at most (its `IN` list).
    static let batchLimit = 200
    /// Reads on their way at once, at most. Two measured best on the list benchmark (one left
    /// the loops waiting on the round trip; four spent the time on more reads).
    static let readerLimit = 2
    /// How long an idle reader keeps its connection for the next request.
    static let linger: TimeAmount = .milliseconds(500)
    /// How long a request waits for its version at most: past it, the next request to arrive
    /// answers it ``StorageError/unavailable(_:)`` (503 with Retry-After), whatever the readers
    /// are doing. No timer per request (a list costs tens of microseconds): arrivals sweep.
    static let waitLimit: UInt64 = 10_000_000_000

    init(database: PostgresDatabase) { self.database = database }

    func version(of owner: String) async throws -> Int64? {
        // Refused here, not in the batch, where it would fail every request read with it.
        if owner.utf8.contains(0) { throw StorageError.textContainsNUL }
        let loop = MultiThreadedEventLoopGroup.currentEventLoop
        return try await withCheckedThrowingContinuation { continuation in
            enum Next {
                case wake(ParkedReader)
                case startReader
                case none
            }
            var expired: [Waiter] = []
            let next = state.withLock { state -> Next in
                // Read under the lock, so the queue is in arrival order; oldest first: those
                // waiting past the limit are at the front.
                let arrived = DispatchTime.now().uptimeNanoseconds
                let stale = state.waiting.prefix { arrived > $0.arrived && arrived - $0.arrived > Self.waitLimit }.count
                if stale > 0 {
                    expired = Array(state.waiting.prefix(stale))
                    state.waiting.removeFirst(stale)
                }
                state.waiting.append(Waiter(owner: owner, continuation: continuation, arrived: arrived, loop: loop))
                if let parked = state.parked.popLast() { return .wake(parked) }
                guard state.readers < Self.readerLimit else { return .none }
                state.readers += 1
                return .startReader
            }
            // A 503, not an outage: a slow read does not make the database unavailable (/readyz
            // learns of a failing database from the reads themselves).
            for waiter in expired { waiter.resume(.failure(StorageError.unavailable("no task-list version read within 10 s"))) }
            switch next {
            case .wake(let reader): reader.continuation.resume(returning: true)
            case .startReader: Task { await self.read() }
            case .none: break
            }
        }
    }

    /// One reader: leases a connection and reads batches until none came for ``linger``, or the
    /// database failed (then those waiting get its error, as a query of their own would have).
    private func read() async {
        repeat {
            await readWhileNeeded()
        } while state.withLock { state in
            // Requests that came after the last batch, when this reader was leaving: stay.
            guard state.waiting.isEmpty else { return true }
            state.readers -= 1
            return false
        }
    }

    private func readWhileNeeded() async {
        do {
            try await database.withReadSession { session in
                let watch = ReadWatch()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    // Every waiting list depends on this reader's read: one that never answers
                    // must not hold them all until TCP gives up.
                    group.addTask { await watch.guardReads(on: session) }
                    defer { group.cancelAll() }
                    try await self.readBatches(session, watch: watch)
                }
            }
        } catch {
            // No connection (the deadline passed): those waiting now get the error rather than
            // wait for another deadline.
            let failed = state.withLock { state in
                defer { state.waiting.removeAll() }
                return state.waiting
            }
            for waiter in failed { waiter.resume(.failure(error)) }
        }
    }

    private func readBatches(_ session: ReadSession, watch: ReadWatch) async throws {
        while true {
            let batch = self.state.withLock { state in
                let taken = state.waiting.prefix(Self.batchLimit)
                state.waiting.removeFirst(taken.count)
                return Array(taken)
            }
            if batch.isEmpty {
                guard await self.park() else { return }
                continue
            }
            do {
                watch.begin()
                let versions = try await Self.read(owners: batch.map(\.owner), session)
                watch.end()
                for waiter in batch { waiter.resume(.success(versions[OwnerKey(waiter.owner)] ?? nil)) }
            } catch {
                // This batch gets the error; the connection goes back (it may be broken), and
                // those still waiting are read on a fresh one.
                let failure = watch.end() ? StorageError.unavailable("PostgreSQL did not answer a version read") : error
                for waiter in batch { waiter.resume(.failure(failure)) }
                return
            }
        }
    }

    /// Waits for a request to arrive (true) or ``linger`` to pass without one (false).
    private func park() async -> Bool {
        await withCheckedContinuation { continuation in
            let id = state.withLock { state -> UInt64? in
                guard state.waiting.isEmpty else { return nil }
                state.nextParkID &+= 1
                state.parked.append(ParkedReader(id: state.nextParkID, continuation: continuation))
                return state.nextParkID
            }
            guard let id else { return continuation.resume(returning: true) }
            MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: Self.linger) {
                let expired = self.state.withLock { state -> ParkedReader? in
                    guard let index = state.parked.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.parked.remove(at: index)
                }
                expired?.continuation.resume(returning: false)
            }
        }
    }

    /// Versions by owner, compared as the database compares them (``OwnerKey``).
    private static func read(owners: [String], _ session: ReadSession) async throws -> [OwnerKey: Int64?] {
        let distinct = Set(owners.map(OwnerKey.init))
        let placeholders = Array(repeating: "?", count: distinct.count).joined(separator: ", ")
        let rows = try await session.rows(
            "SELECT owner_id, version FROM task_list_versions WHERE owner_id IN (\(placeholders))", distinct.map { .text($0.owner) })
        var versions: [OwnerKey: Int64?] = [:]
        for row in rows { versions[OwnerKey(try row.text("owner_id"))] = try row.integer("version") }
        return versions
    }
}

/// Watches one reader's version reads: a read still unanswered after ``patience`` watch ticks
/// (a second each) has its connection closed, which fails it at once. Ticks, not a deadline on
/// the clock: when the process is too busy to resume the reader, the watch is not resumed
/// either, so a slow machine does not abandon reads that did answer.
private final class ReadWatch: Sendable {
    private struct State {
        var pending = false
        var ticks = 0
        var abandoned = false
    }
    private let state = Mutex(State())
    /// Ticks a read may stay unanswered: 3–4 s, past ``PostgresDatabase/connectionDeadline``.
    static let patience = 4

    func begin() {
        state.withLock {
            $0.pending = true
            $0.ticks = 0
        }
    }

    /// Ends the current read; true when it was abandoned.
    @discardableResult
    func end() -> Bool {
        state.withLock {
            $0.pending = false
            return $0.abandoned
        }
    }

    /// Until cancelled (when the reader's session ends).
    func guardReads(on session: ReadSession) async {
        while true {
            do { try await Task.sleep(for: .seconds(1)) } catch { return }
            let abandon = state.withLock { state -> Bool in
                guard state.pending else { return false }
                state.ticks += 1
                guard state.ticks >= Self.patience else { return false }
                state.abandoned = true
                return true
            }
            if abandon {
                await session.abandon()
                return
            }
        }
    }
}
