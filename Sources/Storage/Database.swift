import Logging
import SQLKit

/// Which SQL engine a ``Database`` talks to. Repositories write one SQL code path through SQLKit;
/// the few places where the engines differ (upserts, advisory locks) switch on this.
public enum DatabaseEngine: String, Sendable {
    case sqlite
    case postgres
}

/// The one database seam of the system: SQLite for the embedded default, PostgreSQL for scale.
///
/// Every repository takes a `Database` and runs its SQL through `read` or `transaction`, so the same
/// code runs on both engines (ARCHITECTURE.md, "Repositories are protocols with a SQL implementation").
public protocol Database: Sendable {
    var engine: DatabaseEngine { get }

    /// Runs statements outside an explicit transaction (each statement commits on its own).
    func read<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T

    /// Runs `body` inside `BEGIN … COMMIT`; any thrown error rolls everything back, so a failed
    /// operation never leaves a partial write behind.
    func transaction<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T

    /// Runs `body`, which writes with exactly one statement, atomically. SQLite runs it as its
    /// own transaction (autocommit) under the writer's lock: `BEGIN` and `COMMIT` would be two
    /// more trips to the thread pool while every other write waits (issue 13's create profile).
    /// PostgreSQL keeps `BEGIN … COMMIT`, so a connection lost mid-statement still reads as
    /// "not stored" and only one lost while committing as "outcome unknown".
    func singleStatement<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T

    /// Rows of one read-only statement written with `?` placeholders, read column by column: for
    /// the hot paths, where SQLKit's query building and `Decodable` row decoding cost more than
    /// the indexed read itself. Write the statement in SQL both engines accept.
    func rows(_ sql: String, _ binds: [StoredValue]) async throws -> [StoredRow]

    /// Whether an error raised by a statement is a unique-constraint violation, so repositories
    /// can turn a duplicate insert into a domain error instead of a server error.
    func isUniqueViolation(_ error: any Error) -> Bool

    /// Closes connections. Calls after `close` fail.
    func close() async throws

    /// Whether it works now: its last unavailability (``StorageError/unavailable(_:)``).
    var health: DatabaseHealth { get }
}

/// Errors raised by the storage layer itself (not by the engines).
public enum StorageError: Error, CustomStringConvertible, Equatable {
    case invalidURL(String)
    case closed
    case migrationFailed(namespace: String, version: Int, reason: String)
    /// A statement tried to store text with a NUL character (see ``TextGuardedSQLDatabase``).
    case textContainsNUL
    /// A column of ``StoredRow`` is missing, or not of the type asked for.
    case unreadableColumn(String)
    /// The database cannot work now (unreachable, restarting, full): answered 503 with
    /// `Retry-After`, never as the caller's fault (issue 14).
    case unavailable(String)
    /// The connection was lost during COMMIT: the work may or may not be stored, so this is
    /// not a "retry later" (a retried refresh could look like reuse, a retried create could
    /// store twice).
    case commitOutcomeUnknown(String)

    public var description: String {
        switch self {
        case .invalidURL(let url): "unsupported database URL '\(url)' (use sqlite:PATH or postgres://user:pass@host:port/db)"
        case .closed: "the database is closed"
        case .migrationFailed(let namespace, let version, let reason): "migration \(namespace)#\(version) failed: \(reason)"
        case .textContainsNUL: "refused to store text containing a NUL character"
        case .unreadableColumn(let column): "the column '\(column)' is missing or of another type"
        case .unavailable(let reason): "the database is unavailable: \(reason)"
        case .commitOutcomeUnknown(let reason): "the connection was lost while committing; the outcome is unknown: \(reason)"
        }
    }
}

/// COMMIT itself failed (``SQLDatabase/runTransaction(begin:beforeCommit:_:)``): each engine
/// says what that means. It keeps the body's value and the transaction's id `beforeCommit`
/// noted, for an engine that can learn the work was committed after all.
struct CommitFailure: Error {
    let underlying: any Error
    let value: any Sendable
    let mark: CommitMark?
}

extension SQLDatabase {
    /// `begin` … COMMIT around `body`, ROLLBACK when it throws (the caller's error comes back
    /// unchanged). Both engines' `transaction` use it, on a connection only they hold.
    /// `beforeCommit` runs last inside the transaction and marks it (PostgreSQL's commit marker).
    func runTransaction<T: Sendable>(
        begin: String = "BEGIN", beforeCommit: (@Sendable (any SQLDatabase) async throws -> CommitMark?)? = nil,
        _ body: @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await raw(SQLQueryString(begin)).run()
        let value: T
        let mark: CommitMark?
        do {
            value = try await body(self)
            mark = try await beforeCommit?(self) ?? nil
        } catch {
            await rollback()
            throw error
        }
        do {
            try await raw("COMMIT").run()
        } catch {
            await rollback()
            throw CommitFailure(underlying: error, value: value, mark: mark)
        }
        return value
    }

    /// ROLLBACK in a task of its own: a cancelled caller (a deadline that stopped waiting) must
    /// not leave the connection inside its transaction, where the next BEGIN fails.
    private func rollback() async {
        let database = self
        await Task { try? await database.raw("ROLLBACK").run() }.value
    }
}

// Rows are Swift structs in camelCase; columns are snake_case. SQLKit converts between them, so
// no repository spells a column name twice.
extension SQLRowDecoder {
    public static var snakeCase: SQLRowDecoder { SQLRowDecoder(keyDecodingStrategy: .convertFromSnakeCase) }
}

extension SQLQueryEncoder {
    public static var snakeCase: SQLQueryEncoder { SQLQueryEncoder(keyEncodingStrategy: .convertToSnakeCase) }
}

extension Database {
    /// Runs `body` while no other process sharing this database runs an `exclusively` block with
    /// the same `key`: on PostgreSQL a transaction-scoped advisory lock, held by a transaction that
    /// stays open while `body` works on other connections of the pool (so instances started
    /// together seed one tenant, not two half-made ones). SQLite is one process's file, and
    /// scale-out is PostgreSQL's, so there it just runs `body`.
    public func exclusively<T: Sendable>(key: Int64, _ body: @Sendable () async throws -> T) async throws -> T {
        guard engine == .postgres else { return try await body() }
        return try await transaction { sql in
            try await sql.raw("SELECT pg_advisory_xact_lock(\(bind: key))").run()
            return try await body()
        }
    }
}
