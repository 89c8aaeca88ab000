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
/// on any instance, so each asks the database; but requests that arrive while one read is on its
/// way share the next one, which starts after all of them began. Under load that is one round
/// trip for many requests, instead of one each (the list at 18–23% of SQLite's in issue 13).
/// Exact: a batch's statement takes its snapshot after every request in it arrived, and a
/// version never repeats.
final class SharedListVersions: Sendable {
    private enum Turn {
        case known(Int64?)
        /// The caller reads the next batch for everyone waiting.
        case lead
    }

    private struct Waiter {
        var owner: String
        var continuation: CheckedContinuation<Turn, any Error>
    }

    private struct State {
        var waiting: [Waiter] = []
        /// Batches on their way to the database.
        var reading = 0
    }

    private let database: any Database
    private let state = Mutex(State())
    /// Owners asked for in one statement, at most (its `IN` list).
    static let batchLimit = 200
    /// Batches read at once, at most: a request that finds them all on their way waits for one
    /// to come back, then joins or leads the next. Two measured best on the list benchmark
    /// (one left the loops waiting on the round trip; four spent the time on more reads).
    static let concurrentReads = 2

    init(database: any Database) { self.database = database }

    func version(of owner: String) async throws -> Int64? {
        // Leading needs no continuation: most requests under light load, one per batch under heavy.
        let leadsNow = state.withLock { state in
            guard state.reading < Self.concurrentReads else { return false }
            state.reading += 1
            return true
        }
        if leadsNow { return try await readBatch(leader: owner) }
        let turn = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Turn, any Error>) in
            // Checked again with the enqueue, under one lock: a batch may have ended meanwhile.
            let leads = state.withLock { state in
                if state.reading >= Self.concurrentReads {
                    state.waiting.append(Waiter(owner: owner, continuation: continuation))
                    return false
                }
                state.reading += 1
                return true
            }
            if leads { continuation.resume(returning: .lead) }
        }
        switch turn {
        case .known(let version): return version
        case .lead: return try await readBatch(leader: owner)
        }
    }

    /// Reads the versions of the leader's owner and of everyone waiting now, answers them, and
    /// hands the next batch to one of those who arrived meanwhile.
    private func readBatch(leader: String) async throws -> Int64? {
        let batch = state.withLock { state in
            let taken = state.waiting.prefix(Self.batchLimit - 1)
            state.waiting.removeFirst(taken.count)
            return Array(taken)
        }
        let outcome: Result<[String: Int64], any Error>
        do {
            outcome = .success(try await read(owners: Set(batch.map(\.owner)).union([leader])))
        } catch {
            outcome = .failure(error)
        }
        for waiter in batch {
            switch outcome {
            case .success(let versions): waiter.continuation.resume(returning: .known(versions[waiter.owner]))
            case .failure(let error): waiter.continuation.resume(throwing: error)
            }
        }
        let next = state.withLock { state -> Waiter? in
            guard !state.waiting.isEmpty else {
                state.reading -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.continuation.resume(returning: .lead)
        return try outcome.get()[leader]
    }

    private func read(owners: Set<String>) async throws -> [String: Int64] {
        let placeholders = Array(repeating: "?", count: owners.count).joined(separator: ", ")
        let rows = try await database.rows(
            "SELECT owner_id, version FROM task_list_versions WHERE owner_id IN (\(placeholders))", owners.map { .text($0) })
        var versions: [String: Int64] = [:]
        for row in rows { versions[try row.text("owner_id")] = try row.integer("version") }
        return versions
    }
}
