import Foundation
import Logging

/// Opens the ``Database`` named by a URL: `sqlite:PATH` (the default; `?synchronous=full` or
/// `=normal` at its end sets ``SQLiteDatabase/Durability``), `sqlite::memory:`, or
/// `postgres://user:pass@host:port/db` (also `postgresql://`).
public enum DatabaseFactory {
    public static func open(url: String, logger: Logger) async throws -> any Database {
        if url.hasPrefix("sqlite:") {
            var path = String(url.dropFirst("sqlite:".count))
            var durability = SQLiteDatabase.Durability.normal
            if let mark = path.range(of: "?synchronous=", options: .backwards) {
                guard let chosen = SQLiteDatabase.Durability(rawValue: path[mark.upperBound...].lowercased()) else {
                    throw StorageError.invalidURL(url)
                }
                durability = chosen
                path = String(path[..<mark.lowerBound])
            }
            if path == ":memory:" { return try await SQLiteDatabase(storage: .memory, logger: logger) }
            guard !path.isEmpty else { throw StorageError.invalidURL(url) }
            return try await SQLiteDatabase(storage: .file(path), durability: durability, logger: logger)
        }
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            let database = try PostgresDatabase(url: url, logger: logger)
            do {
                try await database.verifyConnection()
            } catch {
                try? await database.close()
                throw error
            }
            return database
        }
        throw StorageError.invalidURL(url)
    }

    /// A URL safe to print: the password, if any, is replaced by `***`.
    public static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? "postgres://***"
    }
}
