import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit

/// SQLite on one file connection in WAL mode. All work is serialised through one FIFO lock, so
/// a transaction's statements can never interleave with another request's (SQLite has one writer
/// anyway; research/swift-server.md §4).
public final class SQLiteDatabase: Database {
    public enum Location: Sendable, Equatable {
        case memory
        case file(String)
    }

    public let engine = DatabaseEngine.sqlite
    private let connection: SQLiteConnection
    private let sql: any SQLDatabase
    private let lock = AsyncSerialLock()

    public init(storage: Location, logger: Logger) async throws {
        let nioStorage: SQLiteConnection.Storage
        switch storage {
        case .memory: nioStorage = .memory
        case .file(let path):
            let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            nioStorage = .file(path: path)
        }
        connection = try await SQLiteConnection.open(storage: nioStorage, logger: logger)
        sql = connection.sql(queryLogLevel: .trace)
        // WAL with synchronous=NORMAL: a committed transaction survives the process being killed
        // (kill -9: the WAL is in the OS's page cache) but not necessarily a power cut, and commits
        // need no fsync each (https://sqlite.org/pragma.html#pragma_synchronous, sqlite.org/wal.html).
        // `SQLITE_SYNCHRONOUS=FULL` in the environment buys power-cut durability at that cost.
        try await sql.raw("PRAGMA journal_mode = WAL").run()
        let synchronous = ProcessInfo.processInfo.environment["SQLITE_SYNCHRONOUS"] == "FULL" ? "FULL" : "NORMAL"
        try await sql.raw("PRAGMA synchronous = \(unsafeRaw: synchronous)").run()
        try await sql.raw("PRAGMA foreign_keys = ON").run()
        try await sql.raw("PRAGMA busy_timeout = 5000").run()
    }

    public func read<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let sql = self.sql
        return try await lock.withLock { try await body(sql) }
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let sql = self.sql
        return try await lock.withLock { try await sql.runTransaction(begin: "BEGIN IMMEDIATE", body) }
    }

    public func isUniqueViolation(_ error: any Error) -> Bool {
        // SQLITE_CONSTRAINT_UNIQUE and SQLITE_CONSTRAINT_PRIMARYKEY
        let text = String(describing: error)
        return text.contains("UNIQUE constraint failed")
    }

    public func close() async throws {
        try await lock.withLock { try await self.connection.close() }
    }
}
