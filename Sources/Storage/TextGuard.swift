import Logging
import NIOCore
import SQLKit
import SQLiteNIO

/// Refuses a statement that would bind text holding a NUL character, before it reaches a driver.
///
/// Why: SQLite's driver reads TEXT back with `String(cString:)`, which stops at the first NUL, so
/// `bob@example.com\0x` would be stored whole and read back as `bob@example.com` (a different
/// value than the one checked for uniqueness); PostgreSQL refuses NUL in `text` with an error.
/// Validation above the store refuses such input with a proper message; this is the floor under
/// it, so no code path can store a value that comes back truncated.
struct TextGuardedSQLDatabase: SQLDatabase {
    let base: any SQLDatabase
    /// PostgreSQL: the connection's guard, so a statement on a connection that closed fails
    /// rather than waits for ever (``StatementGuard``).
    var statements: StatementGuard? = nil

    var logger: Logger { base.logger }
    var eventLoop: any EventLoop { base.eventLoop }
    var version: (any SQLDatabaseReportedVersion)? { base.version }
    var dialect: any SQLDialect { base.dialect }
    var queryLogLevel: Logger.Level? { base.queryLogLevel }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) -> EventLoopFuture<Void> {
        do {
            return base.execute(sql: try checked(query), onRow)
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let checked = try checked(query)
        guard let statements else { return try await base.execute(sql: checked, onRow) }
        let base = self.base
        try await statements.run { try await base.execute(sql: checked, onRow) }
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        let statements = self.statements
        return try await base.withSession { try await closure(TextGuardedSQLDatabase(base: $0, statements: statements)) }
    }

    /// The query serialised once, its binds checked, and handed on already serialised (the
    /// placeholders are in the text; the binds keep their order).
    private func checked(_ query: any SQLExpression) throws -> any SQLExpression {
        let (sql, binds) = base.serialize(query)
        for bind in binds where StoredTextFloor.holdsNUL(bind) { throw StorageError.textContainsNUL }
        return Serialized(sql: sql, binds: binds)
    }

    private struct Serialized: SQLExpression {
        let sql: String
        let binds: [any Encodable & Sendable]

        func serialize(to serializer: inout SQLSerializer) {
            serializer.write(sql)
            serializer.binds.append(contentsOf: binds)
        }
    }
}

enum StoredTextFloor {
    /// Whether a bound value is text (or optional text) with a NUL in it.
    static func holdsNUL(_ value: any Encodable & Sendable) -> Bool {
        if let text = value as? String { return text.utf8.contains(0) }
        if let text = value as? Substring { return text.utf8.contains(0) }
        if case .text(let text) = value as? SQLiteData { return text.utf8.contains(0) }
        return false
    }
}

extension SQLDatabase {
    /// This database behind the NUL floor.
    var guardingText: any SQLDatabase { TextGuardedSQLDatabase(base: self) }

    /// Behind the NUL floor, each statement under `statements` (a PostgreSQL connection's guard).
    func guardingText(_ statements: StatementGuard) -> any SQLDatabase { TextGuardedSQLDatabase(base: self, statements: statements) }
}
