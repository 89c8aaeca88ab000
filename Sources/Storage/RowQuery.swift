import Foundation
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

    var bind: any Encodable & Sendable {
        switch self {
        case .text(let text): text
        case .integer(let value): value
        case .bool(let value): value
        }
    }
}

/// One row of ``Database/rows(_:_:)``, read column by column: no query builder and no
/// `Decodable` machinery between the engine's row and the caller's values.
public struct StoredRow: Sendable {
    enum Backing: Sendable {
        case sqlite(SQLiteRow)
        case generic(any SQLRow)
    }

    let backing: Backing

    public func text(_ column: String) throws -> String {
        guard let value = try optionalText(column) else { throw StorageError.unreadableColumn(column) }
        return value
    }

    public func optionalText(_ column: String) throws -> String? {
        switch backing {
        case .sqlite(let row):
            guard let data = row.column(column), !data.isNull else { return nil }
            guard let text = data.string else { throw StorageError.unreadableColumn(column) }
            return text
        case .generic(let row):
            return try row.decode(column: column, as: String?.self)
        }
    }

    public func integer(_ column: String) throws -> Int64 {
        guard let value = try optionalInteger(column) else { throw StorageError.unreadableColumn(column) }
        return value
    }

    public func optionalInteger(_ column: String) throws -> Int64? {
        switch backing {
        case .sqlite(let row):
            guard let data = row.column(column), !data.isNull else { return nil }
            guard let value = data.integer else { throw StorageError.unreadableColumn(column) }
            return Int64(value)
        case .generic(let row):
            return try row.decode(column: column, as: Int64?.self)
        }
    }

    public func bool(_ column: String) throws -> Bool {
        switch backing {
        case .sqlite(let row):
            guard let value = row.column(column)?.bool else { throw StorageError.unreadableColumn(column) }
            return value
        case .generic(let row):
            return try row.decode(column: column, as: Bool.self)
        }
    }
}

extension SQLDatabase {
    /// `sql` with its `?` placeholders turned into SQLKit binds, for engines without `?`.
    func rows(_ sql: String, _ binds: [StoredValue]) async throws -> [StoredRow] {
        let parts = sql.split(separator: "?", omittingEmptySubsequences: false)
        precondition(parts.count == binds.count + 1, "placeholders and binds differ in number")
        var query = SQLQueryString(String(parts[0]))
        for (bind, part) in zip(binds, parts.dropFirst()) {
            query.appendInterpolation(bind: bind.bind)
            query.appendLiteral(String(part))
        }
        return try await raw(query).all().map { StoredRow(backing: .generic($0)) }
    }
}
