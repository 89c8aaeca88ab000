import Foundation
import Logging
import PostgresNIO
import SQLKit
import SQLiteKit

/// A value bound to a `?` placeholder of ``Database/rows(_:_:)``.
public enum StoredValue: Sendable, Equatable {
    case text(String)
    case integer(Int64)
    case bool(Bool)

    var containsNUL: Bool {
        if case .text(let text) = self { return text.utf8.contains(0) }
        return false
    }

    var sqlite: SQLiteData {
        switch self {
        case .text(let text): .text(text)
        case .integer(let value): .integer(Int(value))
        case .bool(let value): .integer(value ? 1 : 0)
        }
    }
}

/// One row of ``Database/rows(_:_:)``, read column by column: no query builder and no
/// `Decodable` machinery between the engine's row and the caller's values.
public struct StoredRow: Sendable {
    enum Backing: Sendable {
        case sqlite(SQLiteRow)
        /// PostgresNIO's own row: its cells decode straight from the wire format, where
        /// PostgresKit's `SQLRow` goes through `Decodable` (17% of the PostgreSQL list's CPU).
        case postgres(PostgresRandomAccessRow)
    }

    let backing: Backing

    public func text(_ column: String) throws -> String {
        guard let value = try optionalText(column) else { throw StorageError.unreadableColumn(column) }
        return value
    }

    public func optionalText(_ column: String) throws -> String? {
        switch backing {
        case .sqlite(let row):
            guard let data = row.column(column) else { throw StorageError.unreadableColumn(column) }
            if data.isNull { return nil }
            guard let text = data.string else { throw StorageError.unreadableColumn(column) }
            return text
        case .postgres(let row):
            return try row.cell(column).decode(String?.self)
        }
    }

    public func integer(_ column: String) throws -> Int64 {
        guard let value = try optionalInteger(column) else { throw StorageError.unreadableColumn(column) }
        return value
    }

    public func optionalInteger(_ column: String) throws -> Int64? {
        switch backing {
        case .sqlite(let row):
            guard let data = row.column(column) else { throw StorageError.unreadableColumn(column) }
            if data.isNull { return nil }
            guard let value = data.integer else { throw StorageError.unreadableColumn(column) }
            return Int64(value)
        case .postgres(let row):
            return try row.cell(column).decode(Int64?.self)
        }
    }

    public func bool(_ column: String) throws -> Bool {
        switch backing {
        case .sqlite(let row):
            guard let value = row.column(column)?.bool else { throw StorageError.unreadableColumn(column) }
            return value
        case .postgres(let row):
            return try row.cell(column).decode(Bool.self)
        }
    }
}

extension PostgresRandomAccessRow {
    /// The named column's cell, or ``StorageError/unreadableColumn(_:)`` (the subscript traps).
    fileprivate func cell(_ column: String) throws -> PostgresCell {
        guard contains(column) else { throw StorageError.unreadableColumn(column) }
        return self[column]
    }
}

extension PostgresConnection {
    /// `sql` with `?` placeholders as PostgreSQL's `$1, $2, …`, run on PostgresNIO directly.
    /// Text with a NUL is refused here, for every caller: PostgreSQL's TEXT cannot hold it.
    func storedRows(_ sql: String, _ binds: [StoredValue], logger: Logger) async throws -> [StoredRow] {
        if binds.contains(where: \.containsNUL) { throw StorageError.textContainsNUL }
        let parts = sql.split(separator: "?", omittingEmptySubsequences: false)
        precondition(parts.count == binds.count + 1, "placeholders and binds differ in number")
        var text = String(parts[0])
        var bindings = PostgresBindings(capacity: binds.count)
        for (index, (bind, part)) in zip(binds, parts.dropFirst()).enumerated() {
            text += "$\(index + 1)" + part
            switch bind {
            case .text(let value): try bindings.append(value)
            case .integer(let value): try bindings.append(value)
            case .bool(let value): try bindings.append(value)
            }
        }
        var rows: [StoredRow] = []
        for try await row in try await query(PostgresQuery(unsafeSQL: text, binds: bindings), logger: logger) {
            rows.append(StoredRow(backing: .postgres(row.makeRandomAccess())))
        }
        return rows
    }
}
