import Foundation
import SQLKit

/// A whole database as one JSON document, and back (`todo-server backup FILE` / `restore FILE`):
/// every lasting table of every library (accounts, apps, keys, sessions, tasks), typed values,
/// on either engine, so a SQLite store can also be moved to PostgreSQL. Values sealed with the
/// data key stay sealed, and password hashes are sealed too, as the tenant export seals them: a
/// restore needs the same `data-key`. One-time codes and the outbox are left out.
public enum DatabaseBackup {
    public static let format = "todob2c-backup"

    /// The column kinds the schema uses (TEXT, BIGINT, BOOLEAN).
    enum Kind: String, Codable, Sendable {
        case text, integer, bool
    }

    enum Value: Codable, Sendable, Equatable {
        case null, text(String), integer(Int64), bool(Bool)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int64.self) {
                self = .integer(value)
            } else {
                self = .text(try container.decode(String.self))
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .text(let value): try container.encode(value)
            case .integer(let value): try container.encode(value)
            case .bool(let value): try container.encode(value)
            }
        }
    }

    struct Column: Codable, Sendable {
        var name: String
        var kind: Kind
    }

    struct Table: Codable, Sendable {
        var name: String
        var columns: [Column]
        var rows: [[Value]]
    }

    struct Document: Codable, Sendable {
        var format: String
        var version: Int
        var createdAt: Date
        var engine: String
        var tables: [Table]
    }

    public enum BackupError: Error, CustomStringConvertible {
        case notABackup(String)
        case schemaDiffers(String)

        public var description: String {
            switch self {
            case .notABackup(let reason): "not a TodoB2C backup: \(reason)"
            case .schemaDiffers(let reason): "the backup's schema differs from this build's: \(reason)"
            }
        }
    }

    /// Tables that others reference come first on restore (and go last on delete).
    static let parentsFirst = ["tenants", "applications", "application_secrets", "user_flows", "users", "refresh_token_families", "groups"]

    static func ordered(_ names: [String]) -> [String] {
        let first = parentsFirst.filter(names.contains)
        return first + names.filter { !first.contains($0) }.sorted()
    }

    /// Tables one engine keeps as a by-product of others, remade by its triggers as rows are
    /// restored: PostgreSQL's task-list versions (instances' caches ask them whether an owner's
    /// tasks changed; a restore moves every restored owner's version on). A backup leaves them
    /// out, so it restores onto either engine.
    static let derivedTables: Set<String> = ["task_list_versions", "storage_probe", "storage_commit_markers"]

    /// What lives minutes and proves something once: sign-in codes, verification and MFA codes,
    /// upstream verifiers, the dev outbox's mail (the second outside attack's F-8: a backup read
    /// by someone else held them). Left out of a backup and emptied by a restore.
    static let transientTables: Set<String> = [
        "outbox", "verification_codes", "federation_codes", "authorization_codes", "mfa_challenges", "upstream_requests",
        // An admin console session is an hour's bearer credential: a restored server signs admins in again.
        "console_sessions",
        // A native-authentication flow lives ten minutes; its per-address count an hour.
        "native_auth_flows", "native_auth_starts",
    ]

    /// Columns a backup seals with the data key, by table: the column, and the column whose
    /// value binds the sealed one to its row.
    static let sealedColumns: [String: (column: String, row: String)] = ["users": ("password_hash", "id")]

    static func sealingContext(table: String, column: String, row: String) -> String { "backup:\(table).\(column):\(row)" }

    /// Version 1 held password hashes in clear and one-time codes; it is refused.
    static let version = 2

    /// The tables and their columns, from the engine's catalogue.
    static func schema(_ database: any Database) async throws -> [(String, [Column])] {
        let engine = database.engine
        return try await database.read { sql in
            var tables: [String] = []
            switch engine {
            case .sqlite:
                for row in try await sql.raw("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() {
                    tables.append(try row.decode(column: "name", as: String.self))
                }
            case .postgres:
                for row in try await sql.raw(
                    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
                ).all() {
                    tables.append(try row.decode(column: "name", as: String.self))
                }
            }
            var schema: [(String, [Column])] = []
            for table in ordered(tables) where !derivedTables.contains(table) && !transientTables.contains(table) {
                var columns: [Column] = []
                switch engine {
                case .sqlite:
                    for row in try await sql.raw("SELECT name, type FROM pragma_table_info(\(bind: table)) ORDER BY cid").all() {
                        columns.append(
                            Column(
                                name: try row.decode(column: "name", as: String.self),
                                kind: kind(try row.decode(column: "type", as: String.self))))
                    }
                case .postgres:
                    for row in try await sql.raw(
                        "SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = \(bind: table) ORDER BY ordinal_position"
                    ).all() {
                        columns.append(
                            Column(
                                name: try row.decode(column: "name", as: String.self),
                                kind: kind(try row.decode(column: "type", as: String.self))))
                    }
                }
                schema.append((table, columns))
            }
            return schema
        }
    }

    static func kind(_ declared: String) -> Kind {
        let type = declared.lowercased()
        if type.contains("bool") { return .bool }
        if type.contains("int") { return .integer }
        return .text
    }

    /// Every lasting table, every row, as JSON, with ``sealedColumns`` sealed by `dataKey`.
    public static func write(_ database: any Database, dataKey: DataKey, now: Date = Date()) async throws -> Data {
        var tables: [Table] = []
        for (name, columns) in try await schema(database) {
            var rows = try await database.read { sql in
                try await sql.raw("SELECT * FROM \(ident: name)").all().map { row in
                    try columns.map { column -> Value in
                        switch column.kind {
                        case .text: return try row.decode(column: column.name, as: String?.self).map(Value.text) ?? .null
                        case .integer: return try row.decode(column: column.name, as: Int64?.self).map(Value.integer) ?? .null
                        case .bool: return try row.decode(column: column.name, as: Bool?.self).map(Value.bool) ?? .null
                        }
                    }
                }
            }
            try transformSealed(&rows, table: name, columns: columns) { value, context in try dataKey.seal(value, context: context) }
            tables.append(Table(name: name, columns: columns, rows: rows))
        }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(
            Document(
                format: format, version: version, createdAt: now, engine: database.engine == .sqlite ? "sqlite" : "postgres",
                tables: tables))
    }

    /// Applies `transform` to the values of `table`'s sealed column, with each row's context.
    private static func transformSealed(
        _ rows: inout [[Value]], table: String, columns: [Column], _ transform: (String, String) throws -> String
    ) throws {
        guard let sealed = sealedColumns[table], let column = columns.firstIndex(where: { $0.name == sealed.column }),
            let key = columns.firstIndex(where: { $0.name == sealed.row })
        else { return }
        for index in rows.indices {
            guard case .text(let value) = rows[index][column], case .text(let row) = rows[index][key] else { continue }
            rows[index][column] = .text(try transform(value, sealingContext(table: table, column: sealed.column, row: row)))
        }
    }

    /// Replaces every table's rows with the backup's, in one transaction: all or nothing. The
    /// database must already have this build's schema (its migrations run), and the backup must
    /// have been written by the same schema.
    /// - Returns: the number of rows written per table.
    @discardableResult
    public static func restore(_ data: Data, into database: any Database, dataKey: DataKey) async throws -> [String: Int] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard var document = try? decoder.decode(Document.self, from: data) else {
            throw BackupError.notABackup("it is not the backup JSON")
        }
        // Version 1 held password hashes in clear: a file relabelled so could carry any. Its
        // schema is older than this build's anyway, which the migrations check refuses.
        guard document.format == format, document.version == version else {
            throw BackupError.notABackup("format \(document.format) v\(document.version)")
        }
        for index in document.tables.indices {
            do {
                try transformSealed(
                    &document.tables[index].rows, table: document.tables[index].name, columns: document.tables[index].columns
                ) { value, context in
                    // Sealed, not merely openable: `open` passes clear text through.
                    let opened = try dataKey.open(value, context: context)
                    guard !opened.wasClear else { throw BackupError.notABackup("a sealed value is in clear") }
                    return opened.value
                }
            } catch {
                throw BackupError.notABackup("its sealed values do not open with this data key")
            }
        }
        // A backup holds no one-time codes: an edited file's are not restored.
        document.tables.removeAll { transientTables.contains($0.name) }
        let target = Dictionary(try await schema(database).map { ($0.0, $0.1.map(\.name)) }, uniquingKeysWith: { first, _ in first })
        for table in document.tables {
            guard let columns = target[table.name] else { throw BackupError.schemaDiffers("this database has no table \(table.name)") }
            guard Set(columns) == Set(table.columns.map(\.name)) else {
                throw BackupError.schemaDiffers("table \(table.name) has columns \(columns.sorted()) here")
            }
            guard table.rows.allSatisfy({ $0.count == table.columns.count }) else {
                throw BackupError.notABackup("a row of \(table.name) does not match its columns")
            }
        }
        let migrations = document.tables.first { $0.name == "schema_migrations" }
        let tables = ordered(document.tables.map(\.name)).compactMap { name in document.tables.first { $0.name == name } }
        return try await database.transaction { sql in
            // Versions first: a backup of another schema version is refused before anything changes.
            if let migrations {
                let here = try await sql.raw("SELECT namespace, version FROM schema_migrations").all().map {
                    "\(try $0.decode(column: "namespace", as: String.self)):\(try $0.decode(column: "version", as: Int64.self))"
                }
                let namespace = migrations.columns.firstIndex { $0.name == "namespace" }
                let version = migrations.columns.firstIndex { $0.name == "version" }
                let there = migrations.rows.compactMap { row -> String? in
                    guard let namespace, let version, case .text(let name) = row[namespace], case .integer(let number) = row[version] else {
                        return nil
                    }
                    return "\(name):\(number)"
                }
                guard Set(here) == Set(there) else {
                    throw BackupError.schemaDiffers("migrations \(Set(there).symmetricDifference(Set(here)).sorted()) differ")
                }
            }
            // One-time codes go first: they may point at rows about to be replaced.
            for table in transientTables.sorted() { try await sql.raw("DELETE FROM \(ident: table)").run() }
            for table in tables.reversed() { try await sql.raw("DELETE FROM \(ident: table.name)").run() }
            var written: [String: Int] = [:]
            for table in tables {
                for row in table.rows {
                    let values: [any SQLExpression] = row.map { value in
                        switch value {
                        case .null: SQLLiteral.null
                        case .text(let text): SQLBind(text)
                        case .integer(let number): SQLBind(number)
                        case .bool(let flag): SQLBind(flag)
                        }
                    }
                    try await sql.insert(into: table.name).columns(table.columns.map(\.name)).values(values).run()
                }
                written[table.name] = table.rows.count
            }
            return written
        }
    }
}
