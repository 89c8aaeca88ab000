import Foundation
import Logging
import SQLKit

/// One versioned schema change. Statements are plain SQL that both engines accept: TEXT ids,
/// BIGINT epoch seconds, BOOLEAN, no SERIAL/AUTOINCREMENT (https://www.sqlite.org/datatype3.html).
public struct Migration: Sendable {
    public let version: Int
    public let name: String
    public let statements: @Sendable (DatabaseEngine) -> [String]

    public init(version: Int, name: String, statements: @escaping @Sendable (DatabaseEngine) -> [String]) {
        self.version = version
        self.name = name
        self.statements = statements
    }

    public init(version: Int, name: String, _ statements: [String]) {
        self.init(version: version, name: name) { _ in statements }
    }
}

/// Applies each library's migrations once, in order, each in its own transaction, recording them in
/// `schema_migrations`. On PostgreSQL an advisory lock keeps two instances starting at once from
/// racing.
public struct MigrationRunner: Sendable {
    public let namespace: String
    public let migrations: [Migration]

    public init(namespace: String, migrations: [Migration]) {
        precondition(
            Set(migrations.map(\.version)).count == migrations.count, "duplicate migration versions in \(namespace)")
        self.namespace = namespace
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Returns the versions that were applied by this call.
    @discardableResult
    public func run(on database: any Database, logger: Logger) async throws -> [Int] {
        let engine = database.engine
        try await database.transaction { sql in
            // Two instances creating the table at once collide in PostgreSQL's catalogue (a unique
            // violation on pg_type): the same lock as the migrations themselves.
            if engine == .postgres { try await sql.raw("SELECT pg_advisory_xact_lock(72016)").run() }
            try await sql.raw(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    namespace TEXT NOT NULL, version BIGINT NOT NULL, name TEXT NOT NULL, applied_at BIGINT NOT NULL,
                    PRIMARY KEY (namespace, version))
                """
            ).run()
        }
        var applied: [Int] = []
        for migration in migrations {
            let namespace = self.namespace
            let didApply = try await database.transaction { sql -> Bool in
                if engine == .postgres {
                    // Serialises concurrent starters; released at COMMIT.
                    try await sql.raw("SELECT pg_advisory_xact_lock(72016)").run()
                }
                let existing = try await sql.select().column("version").from("schema_migrations")
                    .where("namespace", .equal, namespace).where("version", .equal, migration.version)
                    .first()
                if existing != nil { return false }
                for statement in migration.statements(engine) {
                    do {
                        try await sql.raw(SQLQueryString(statement)).run()
                    } catch {
                        throw StorageError.migrationFailed(
                            namespace: namespace, version: migration.version, reason: StorageError.operatorDescription(of: error))
                    }
                }
                try await sql.insert(into: "schema_migrations")
                    .columns("namespace", "version", "name", "applied_at")
                    .values(
                        SQLBind(namespace), SQLBind(migration.version), SQLBind(migration.name),
                        SQLBind(Int64(Date().timeIntervalSince1970))
                    )
                    .run()
                return true
            }
            if didApply {
                logger.debug(
                    "applied migration",
                    metadata: ["namespace": "\(namespace)", "version": "\(migration.version)", "name": "\(migration.name)"])
                applied.append(migration.version)
            }
        }
        // One line at info: a first start applies dozens, and their list buried the banner.
        if let first = applied.first, let last = applied.last {
            logger.info(
                "applied migrations",
                metadata: [
                    "namespace": "\(namespace)", "count": "\(applied.count)",
                    "versions": "\(first == last ? "\(first)" : "\(first)-\(last)")",
                ])
        }
        return applied
    }
}
