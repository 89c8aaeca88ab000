import Foundation
import SQLKit
import Storage
import TodoModels
import WireCoding

/// A stored task with its owner and version (the version is the ETag).
public struct TaskRecord: Sendable, Equatable {
    public var item: TaskItem
    public var ownerID: String
    public var version: Int64

    public var etag: String { "\"\(version)\"" }
}

/// Where a list page starts: after the task with this creation time and id.
public struct TaskCursor: Sendable, Equatable {
    var createdAt: Int64
    var id: String

    /// Opaque to clients: base64url of `createdAt:id`.
    public var token: String { Base64URL.encode("\(createdAt):\(id)") }

    public init?(token: String) {
        guard token.count <= 200, let data = Base64URL.decode(token), let text = String(data: data, encoding: .utf8) else {
            return nil
        }
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let createdAt = Int64(parts[0]), UUIDText.parse(parts[1]) != nil else { return nil }
        self.createdAt = createdAt
        self.id = parts[1]
    }

    init(createdAt: Int64, id: String) {
        self.createdAt = createdAt
        self.id = id
    }
}

public enum TaskUpdateResult: Sendable, Equatable {
    case updated(TaskRecord)
    case notFound
    /// `If-Match` named another version (RFC 9110 §13.1.1).
    case versionMismatch
}

/// Per-user tasks. Every call is scoped by owner, so one user's id never reaches another's task.
public protocol TaskRepository: Sendable {
    func list(owner: String, completed: Bool?, limit: Int, after cursor: TaskCursor?) async throws -> (
        records: [TaskRecord], next: TaskCursor?
    )
    /// The list route's body for this page: `encode`'s bytes for its records and cursor. The
    /// route has one encoding, which is pure, so a repository that keeps an owner's page may keep
    /// its bytes too until the owner's next write.
    func encodedList(
        owner: String, completed: Bool?, limit: Int, after cursor: TaskCursor?,
        encode: @Sendable ([TaskRecord], TaskCursor?) -> [UInt8]
    ) async throws -> (body: [UInt8], next: TaskCursor?)
    func get(owner: String, id: UUID) async throws -> TaskRecord?
    func create(owner: String, ownerName: String?, title: String, completed: Bool, now: Date) async throws -> TaskRecord
    func update(owner: String, id: UUID, patch: TaskPatch, ifVersion: Int64?, now: Date) async throws -> TaskUpdateResult
    func delete(owner: String, id: UUID, ifVersion: Int64?) async throws -> TaskUpdateResult
    /// The tutorials' `DELETE /tasks {"task": "…"}`: removes the owner's tasks with this title.
    func delete(owner: String, title: String) async throws -> Int
}

public struct SQLTaskRepository: TaskRepository {
    let database: any Database
    /// Each owner's first page, and how to tell it is still current.
    let listCache: (pages: OwnerListCache, freshness: ListFreshness)?

    /// - Parameter cachesLists: keep each owner's first page in memory. On SQLite only when no
    ///   one else writes these tasks (the server's own file); on PostgreSQL always exact, since
    ///   each list asks for the owner's version (``SharedListVersions``).
    public init(database: any Database, cachesLists: Bool = false) {
        self.database = database
        listCache =
            cachesLists
            ? (OwnerListCache(), (database as? PostgresDatabase).map { .shared(SharedListVersions(database: $0)) } ?? .exclusive) : nil
    }

    public static let migrations = MigrationRunner(
        namespace: "tasks",
        migrations: [
            Migration(
                version: 1, name: "tasks",
                [
                    """
                    CREATE TABLE tasks (
                        id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, title TEXT NOT NULL, completed BOOLEAN NOT NULL,
                        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, completed_at BIGINT, owner_name TEXT,
                        version BIGINT NOT NULL)
                    """,
                    // Lists and cursor pages walk this index: O(log n) to the page, per owner.
                    "CREATE INDEX tasks_owner_created ON tasks (owner_id, created_at, id)",
                ]),
            // Instances sharing PostgreSQL keep lists in memory too, and ask the database only
            // whether an owner's tasks changed (``SharedListVersions``): every committed write of
            // an owner's tasks gives that owner a new version from one sequence, so a version
            // never repeats. A trigger rather than the repository's own statements, so a write
            // from anywhere (another build, `psql`, a restore) is seen too. The upsert's row lock
            // orders one owner's commits, so versions rise in commit order (one owner's writes
            // commit one at a time; different owners' do not wait on each other). SQLite's file has
            // one process, whose repository sees every write: nothing to add there. The
            // functions keep the schema they were made in, whoever's session writes, and run
            // as their owner, so another role allowed to write `tasks` needs no more grants.
            Migration(version: 2, name: "task list versions") { engine in
                guard engine == .postgres else { return [] }
                return [
                    "CREATE SEQUENCE task_list_version_seq",
                    "CREATE TABLE task_list_versions (owner_id TEXT PRIMARY KEY, version BIGINT NOT NULL)",
                    """
                    CREATE FUNCTION task_list_touch(owner TEXT) RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
                        INSERT INTO task_list_versions (owner_id, version) VALUES (owner, nextval('task_list_version_seq'))
                        ON CONFLICT (owner_id) DO UPDATE SET version = EXCLUDED.version
                    $$
                    """,
                    """
                    CREATE FUNCTION tasks_changed() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
                    BEGIN
                        IF TG_OP = 'TRUNCATE' THEN
                            UPDATE task_list_versions SET version = nextval('task_list_version_seq');
                            RETURN NULL;
                        END IF;
                        IF TG_OP <> 'INSERT' THEN PERFORM task_list_touch(OLD.owner_id); END IF;
                        IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.owner_id IS DISTINCT FROM OLD.owner_id) THEN
                            PERFORM task_list_touch(NEW.owner_id);
                        END IF;
                        RETURN NULL;
                    END
                    $$
                    """,
                    // Deferred to COMMIT, so the version row's lock is held only while committing:
                    // taken at the write itself, it was held across the client's COMMIT round
                    // trip and serialised one owner's creates (2.4k → 0.87k/s).
                    """
                    CREATE CONSTRAINT TRIGGER tasks_list_version AFTER INSERT OR UPDATE OR DELETE ON tasks
                    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION tasks_changed()
                    """,
                    "CREATE TRIGGER tasks_list_version_truncate AFTER TRUNCATE ON tasks FOR EACH STATEMENT EXECUTE FUNCTION tasks_changed()",
                    // Owners with tasks from before get a version now: only an owner who never
                    // had a task reads as "no version", and a TRUNCATE moves every other one on.
                    """
                    INSERT INTO task_list_versions (owner_id, version)
                    SELECT owner_id, nextval('task_list_version_seq') FROM (SELECT DISTINCT owner_id FROM tasks) AS owners
                    """,
                ]
            },
            // Versions never repeat across databases either. A database made again under running
            // instances (dropped and created with the same URL, then restored) started its
            // sequence at 1 again, so an owner's new version could equal one an instance had
            // cached a page at, and that stale page would be served. The sequence now starts at
            // the database's clock in microseconds when it is made: above every version an
            // earlier database gave out, as none gives out a version per microsecond it lives.
            Migration(version: 3, name: "task list versions start at the clock") { engine in
                guard engine == .postgres else { return [] }
                return [
                    """
                    SELECT setval('task_list_version_seq', GREATEST(
                        (SELECT last_value FROM task_list_version_seq), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint))
                    """
                ]
            },
        ])

    struct Row: Codable, Sendable {
        var id: String
        var ownerId: String
        var title: String
        var completed: Bool
        /// Milliseconds since 1970.
        var createdAt: Int64
        var updatedAt: Int64
        var completedAt: Int64?
        var ownerName: String?
        var version: Int64

        /// Column by column instead of through `Decodable`: lists decode up to 101 rows per request.
        init(stored row: StoredRow) throws {
            id = try row.text("id")
            ownerId = try row.text("owner_id")
            title = try row.text("title")
            completed = try row.bool("completed")
            createdAt = try row.integer("created_at")
            updatedAt = try row.integer("updated_at")
            completedAt = try row.optionalInteger("completed_at")
            ownerName = try row.optionalText("owner_name")
            version = try row.integer("version")
        }

        init(
            id: String, ownerId: String, title: String, completed: Bool, createdAt: Int64, updatedAt: Int64, completedAt: Int64?,
            ownerName: String?, version: Int64
        ) {
            self.id = id
            self.ownerId = ownerId
            self.title = title
            self.completed = completed
            self.createdAt = createdAt
            self.updatedAt = updatedAt
            self.completedAt = completedAt
            self.ownerName = ownerName
            self.version = version
        }

        var record: TaskRecord? {
            guard let uuid = UUIDText.parse(id) else { return nil }
            func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: TimeInterval(ms) / 1000) }
            return TaskRecord(
                item: TaskItem(
                    id: uuid, title: title, completed: completed, createdAt: date(createdAt), updatedAt: date(updatedAt),
                    completedAt: completedAt.map(date), ownerName: ownerName),
                ownerID: ownerId, version: version)
        }
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    public func list(owner: String, completed: Bool?, limit: Int, after cursor: TaskCursor?) async throws -> (
        records: [TaskRecord], next: TaskCursor?
    ) {
        let rows: [Row]
        if let (cache, freshness) = listCache, completed == nil, cursor == nil, limit <= TaskLimits.pageSizeMaximum {
            let version = try await freshness.version(of: owner)
            rows = try await cachedRows(cache, owner: owner, at: version)
        } else {
            rows = try await Self.listRows(database, owner: owner, completed: completed, limit: limit, after: cursor)
        }
        return Self.page(rows, limit: limit)
    }

    public func encodedList(
        owner: String, completed: Bool?, limit: Int, after cursor: TaskCursor?,
        encode: @Sendable ([TaskRecord], TaskCursor?) -> [UInt8]
    ) async throws -> (body: [UInt8], next: TaskCursor?) {
        // Only the first page at the route's default size is kept encoded: the one every client
        // asks for again and again (the profile had its encoding at 5% of the list's CPU).
        guard let (cache, freshness) = listCache, completed == nil, cursor == nil, limit == TaskLimits.pageSizeDefault else {
            let (records, next) = try await list(owner: owner, completed: completed, limit: limit, after: cursor)
            return (encode(records, next), next)
        }
        let version = try await freshness.version(of: owner)
        if let page = cache.encodedPage(owner: owner, at: version) { return page }
        let epoch = cache.epoch
        let (records, next) = Self.page(try await cachedRows(cache, owner: owner, at: version), limit: limit)
        let body = encode(records, next)
        cache.storeEncodedPage((body, next), owner: owner, at: version, ifEpoch: epoch)
        return (body, next)
    }

    /// The owner's newest rows (up to the largest page) as of `version`, from the cache or read.
    private func cachedRows(_ cache: OwnerListCache, owner: String, at version: Int64?) async throws -> [Row] {
        if let hit = cache.rows(owner: owner, at: version) { return hit }
        let epoch = cache.epoch
        let rows = try await Self.listRows(database, owner: owner, completed: nil, limit: TaskLimits.pageSizeMaximum, after: nil)
        cache.store(rows, owner: owner, at: version, ifEpoch: epoch)
        return rows
    }

    private static func page(_ rows: [Row], limit: Int) -> (records: [TaskRecord], next: TaskCursor?) {
        let page = rows.prefix(limit)
        let next = rows.count > limit ? page.last.map { TaskCursor(createdAt: $0.createdAt, id: $0.id) } : nil
        return (page.compactMap(\.record), next)
    }

    /// The list query written out and read column by column (``Database/rows(_:_:)``): the list
    /// is the API's hottest route, and its cost was mostly query building and generic row
    /// decoding rather than the indexed read itself. One statement for both engines, on the
    /// `(owner_id, created_at, id)` index.
    static func listRows(_ database: any Database, owner: String, completed: Bool?, limit: Int, after cursor: TaskCursor?)
        async throws -> [Row]
    {
        var sql = "SELECT * FROM tasks WHERE owner_id = ?"
        var binds: [StoredValue] = [.text(owner)]
        if let completed {
            sql += " AND completed = ?"
            binds.append(.bool(completed))
        }
        if let cursor {
            sql += " AND (created_at < ? OR (created_at = ? AND id < ?))"
            binds += [.integer(cursor.createdAt), .integer(cursor.createdAt), .text(cursor.id)]
        }
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        binds.append(.integer(Int64(limit + 1)))
        return try await database.rows(sql, binds).map(Row.init(stored:))
    }

    public func get(owner: String, id: UUID) async throws -> TaskRecord? {
        let key = id.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("tasks").where("id", .equal, key).where("owner_id", .equal, owner)
                .first(decoding: Row.self, with: .snakeCase)
        }?.record
    }

    /// Runs a write of `owners`' tasks, then drops their cached pages (also when it failed: a
    /// lost COMMIT may still have stored it).
    private func writing<T>(_ owners: String..., write: () async throws -> T) async throws -> T {
        defer { for owner in owners { listCache?.pages.written(owner: owner) } }
        return try await write()
    }

    public func create(owner: String, ownerName: String?, title: String, completed: Bool, now: Date) async throws -> TaskRecord {
        let ms = Self.milliseconds(now)
        let row = Row(
            id: Secrets.randomUUIDString(), ownerId: owner, title: title, completed: completed, createdAt: ms, updatedAt: ms,
            completedAt: completed ? ms : nil, ownerName: ownerName, version: 1)
        try await writing(owner) {
            try await database.singleStatement { sql in try await sql.insert(into: "tasks").model(row, with: .snakeCase).run() }
        }
        return row.record!
    }

    public func update(owner: String, id: UUID, patch: TaskPatch, ifVersion: Int64?, now: Date) async throws -> TaskUpdateResult {
        let key = id.uuidString.lowercased()
        return try await writing(owner) { try await updateRow(owner: owner, key: key, patch: patch, ifVersion: ifVersion, now: now) }
    }

    private func updateRow(owner: String, key: String, patch: TaskPatch, ifVersion: Int64?, now: Date) async throws -> TaskUpdateResult {
        try await database.transaction { sql in
            // A row lock on PostgreSQL; SQLite's dialect renders none (its single writer serialises).
            let select = sql.select().columns("*").from("tasks").where("id", .equal, key).where("owner_id", .equal, owner).for(.update)
            guard var row = try await select.first(decoding: Row.self, with: .snakeCase) else { return .notFound }
            if let ifVersion, ifVersion != row.version { return .versionMismatch }
            let ms = Self.milliseconds(now)
            if let title = patch.title { row.title = title }
            if let completed = patch.completed, completed != row.completed {
                row.completed = completed
                row.completedAt = completed ? ms : nil
            }
            row.updatedAt = max(ms, row.updatedAt)
            row.version += 1
            try await sql.update("tasks").set("title", to: row.title).set("completed", to: row.completed)
                .set("completed_at", to: row.completedAt).set("updated_at", to: row.updatedAt).set("version", to: row.version)
                .where("id", .equal, key).where("owner_id", .equal, owner).run()
            return row.record.map(TaskUpdateResult.updated) ?? .notFound
        }
    }

    public func delete(owner: String, id: UUID, ifVersion: Int64?) async throws -> TaskUpdateResult {
        let key = id.uuidString.lowercased()
        return try await writing(owner) { try await deleteRow(owner: owner, key: key, ifVersion: ifVersion) }
    }

    private func deleteRow(owner: String, key: String, ifVersion: Int64?) async throws -> TaskUpdateResult {
        try await database.transaction { sql in
            // Row lock on PostgreSQL, so a concurrent PATCH cannot slip between the version check
            // and the delete; SQLite's dialect renders none (its single writer serialises them).
            let select = sql.select().columns("*").from("tasks").where("id", .equal, key).where("owner_id", .equal, owner).for(.update)
            guard let row = try await select.first(decoding: Row.self, with: .snakeCase), let record = row.record else { return .notFound }
            if let ifVersion, ifVersion != row.version { return .versionMismatch }
            try await sql.delete(from: "tasks").where("id", .equal, key).where("owner_id", .equal, owner).run()
            return .updated(record)
        }
    }

    public func delete(owner: String, title: String) async throws -> Int {
        try await writing(owner) { try await deleteTitled(owner: owner, title: title) }
    }

    private func deleteTitled(owner: String, title: String) async throws -> Int {
        try await database.transaction { sql in
            let count =
                try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("tasks")
                .where("owner_id", .equal, owner).where("title", .equal, title).first(decodingColumn: "n", as: Int.self) ?? 0
            try await sql.delete(from: "tasks").where("owner_id", .equal, owner).where("title", .equal, title).run()
            return count
        }
    }

    /// Whether tasks stored before owner keys named the issuer (a bare object id: no colon) exist.
    public func hasLegacyOwners() async throws -> Bool {
        try await database.read { sql in
            try await sql.raw("SELECT id FROM tasks WHERE owner_id NOT LIKE '%:%' LIMIT 1").first()
        } != nil
    }

    /// Moves the tasks stored under the bare `objectID` to `ownerKey`; returns how many moved.
    public func adoptLegacyTasks(objectID: String, ownerKey: String) async throws -> Int {
        try await writing(objectID, ownerKey) {
            try await database.transaction { sql in
                try await sql.raw("UPDATE tasks SET owner_id = \(bind: ownerKey) WHERE owner_id = \(bind: objectID) RETURNING id").all()
                    .count
            }
        }
    }
}
