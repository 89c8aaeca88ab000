import Foundation
import Logging
import SQLKit
import Storage

/// The databases every repository test runs on: a real SQLite file always, and a real
/// PostgreSQL when `TODO_TEST_POSTGRES_URL` is set (scripts/test starts one and sets it).
public enum TestDatabase {
    public static var postgresURL: String? {
        ProcessInfo.processInfo.environment["TODO_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// scripts/test sets this so a missing PostgreSQL fails the run instead of quietly testing less.
    public static var postgresRequired: Bool { ProcessInfo.processInfo.environment["TODO_REQUIRE_POSTGRES"] == "1" }

    public static var engines: [DatabaseEngine] {
        postgresURL == nil ? [.sqlite] : [.sqlite, .postgres]
    }

    public static let logger: Logger = {
        var logger = Logger(label: "test")
        logger.logLevel = ProcessInfo.processInfo.environment["TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return logger
    }()

    /// Runs `body` with a fresh, empty database of `engine`, then removes it.
    public static func with<T>(_ engine: DatabaseEngine, _ body: (any Database) async throws -> T) async throws -> T {
        switch engine {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-test-\(UUID().uuidString)")
            let database = try await SQLiteDatabase(storage: .file(directory.appendingPathComponent("test.sqlite").path), logger: logger)
            defer { try? FileManager.default.removeItem(at: directory) }
            do {
                let value = try await body(database)
                try await database.close()
                return value
            } catch {
                try? await database.close()
                throw error
            }
        case .postgres:
            guard let base = postgresURL else { throw StorageError.invalidURL("TODO_TEST_POSTGRES_URL is not set") }
            let schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = try PostgresDatabase(url: base, logger: logger)
            try await admin.read { sql in try await sql.raw("CREATE SCHEMA \(unsafeRaw: schema)").run() }
            let separator = base.contains("?") ? "&" : "?"
            let database = try PostgresDatabase(url: "\(base)\(separator)search_path=\(schema)", logger: logger)
            func cleanUp() async {
                try? await database.close()
                try? await admin.read { sql in try await sql.raw("DROP SCHEMA \(unsafeRaw: schema) CASCADE").run() }
                try? await admin.close()
            }
            do {
                let value = try await body(database)
                await cleanUp()
                return value
            } catch {
                await cleanUp()
                throw error
            }
        }
    }
}
