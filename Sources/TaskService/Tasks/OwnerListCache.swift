import Synchronization

/// Each owner's newest page of tasks, in memory, for the list route (issue 13): answering it
/// from the database costs about 40% of its rate on SQLite, in thread hops rather than in the
/// indexed read, and most of it on PostgreSQL. Exact, not "eventually": each page is kept with
/// the owner's version it was read at (``ListFreshness``) and served only at that version; a
/// write through this repository drops the owner's entry once it is done, and a list read that
/// overlapped such a write is not stored (the epoch).
final class OwnerListCache: Sendable {
    private struct Entry {
        var version: Int64?
        var rows: [SQLTaskRepository.Row]
        /// The route's encoding of the default-size first page, once one request made it.
        var encodedPage: (body: [UInt8], next: TaskCursor?)?
    }

    private struct State {
        var epoch: UInt64 = 0
        var lists: [OwnerKey: Entry] = [:]
        var rows = 0
    }

    private let state = Mutex(State())
    /// Rows kept in all (a few MB), an empty list counting as one; past it the cache starts over.
    static let capacity = 20_000

    /// Changes with every write; taken before a read, checked before storing it.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    func rows(owner: String, at version: Int64?) -> [SQLTaskRepository.Row]? {
        state.withLock { state in state.lists[OwnerKey(owner)].flatMap { $0.version == version ? $0.rows : nil } }
    }

    func encodedPage(owner: String, at version: Int64?) -> (body: [UInt8], next: TaskCursor?)? {
        state.withLock { state in state.lists[OwnerKey(owner)].flatMap { $0.version == version ? $0.encodedPage : nil } }
    }

    /// Keeps the encoded page with the owner's rows it was made from (kept at `version`), unless
    /// a write happened since `epoch` was taken (which also dropped those rows).
    func storeEncodedPage(_ page: (body: [UInt8], next: TaskCursor?), owner: String, at version: Int64?, ifEpoch epoch: UInt64) {
        state.withLock { state in
            let key = OwnerKey(owner)
            guard state.epoch == epoch, let entry = state.lists[key], entry.version == version else { return }
            state.lists[key]?.encodedPage = page
        }
    }

    /// Keeps `rows`, read after the owner's version was `version`, unless a write happened
    /// since `epoch` was taken. Rows newer than their version only cost a read later: the
    /// next request sees another version and reads again.
    func store(_ rows: [SQLTaskRepository.Row], owner: String, at version: Int64?, ifEpoch epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch else { return }
            let key = OwnerKey(owner)
            if state.rows + Self.weight(rows) > Self.capacity {
                state.lists.removeAll(keepingCapacity: true)
                state.rows = 0
            }
            state.rows += Self.weight(rows) - (state.lists[key].map { Self.weight($0.rows) } ?? 0)
            state.lists[key] = Entry(version: version, rows: rows)
        }
    }

    /// A write for `owner` is done (or failed: it may still have been stored).
    func written(owner: String) {
        state.withLock { state in
            state.epoch &+= 1
            if let dropped = state.lists.removeValue(forKey: OwnerKey(owner)) { state.rows -= Self.weight(dropped.rows) }
        }
    }

    /// What an entry counts toward ``capacity``: its rows, and at least one, so owners with
    /// empty lists cannot fill memory without limit.
    private static func weight(_ rows: [SQLTaskRepository.Row]) -> Int { max(rows.count, 1) }
}
