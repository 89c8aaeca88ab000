import Synchronization

/// Each owner's newest page of tasks, in memory, for the list route (issue 13): answering it
/// from the database costs about 40% of its rate on SQLite, in thread hops rather than in the
/// indexed read. Exact, not "eventually": every write goes through the one repository that
/// holds the cache, which drops the owner's entry once the write is done, and a list read that
/// overlapped any write is not stored (the epoch). Only for a database one process serves
/// (SQLite); instances sharing PostgreSQL read it every time.
final class OwnerListCache: Sendable {
    private struct Entry {
        var rows: [SQLTaskRepository.Row]
        /// The route's encoding of the default-size first page, once one request made it.
        var encodedPage: (body: [UInt8], next: TaskCursor?)?
    }

    private struct State {
        var epoch: UInt64 = 0
        var lists: [String: Entry] = [:]
        var rows = 0
    }

    private let state = Mutex(State())
    /// Rows kept in all (a few MB); past it the cache starts over.
    static let capacity = 20_000

    /// Changes with every write; taken before a read, checked before storing it.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    func rows(owner: String) -> [SQLTaskRepository.Row]? { state.withLock { $0.lists[owner]?.rows } }

    func encodedPage(owner: String) -> (body: [UInt8], next: TaskCursor?)? { state.withLock { $0.lists[owner]?.encodedPage } }

    /// Keeps the encoded page with the owner's rows it was made from, unless a write happened
    /// since `epoch` was taken (which also dropped those rows).
    func storeEncodedPage(_ page: (body: [UInt8], next: TaskCursor?), owner: String, ifEpoch epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch, state.lists[owner] != nil else { return }
            state.lists[owner]?.encodedPage = page
        }
    }

    /// Keeps `rows` for `owner`, unless a write happened since `epoch` was taken.
    func store(_ rows: [SQLTaskRepository.Row], owner: String, ifEpoch epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch else { return }
            if state.rows + rows.count > Self.capacity {
                state.lists.removeAll(keepingCapacity: true)
                state.rows = 0
            }
            state.rows += rows.count - (state.lists[owner]?.rows.count ?? 0)
            state.lists[owner] = Entry(rows: rows)
        }
    }

    /// A write for `owner` is done (or failed: it may still have been stored).
    func written(owner: String) {
        state.withLock { state in
            state.epoch &+= 1
            if let dropped = state.lists.removeValue(forKey: owner) { state.rows -= dropped.rows.count }
        }
    }
}
