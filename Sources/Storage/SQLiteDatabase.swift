import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit
import Synchronization

/// SQLite on one file connection in WAL mode. All work is serialised through one FIFO lock, so
/// a transaction's statements can never interleave with another request's (SQLite has one writer
/// anyway; https://www.sqlite.org/wal.html).
public final class SQLiteDatabase: Database, SharingDatabase {
    public enum Location: Sendable, Equatable {
        case memory
        case file(String)
    }

    public let engine = DatabaseEngine.sqlite
    public let health = DatabaseHealth()
    private let connection: SQLiteConnection
    private let sql: any SQLDatabase
    private let lock = AsyncSerialLock()
    /// Read-only connections to the same file. In WAL mode readers never block the writer or each
    /// other and see every committed transaction (https://sqlite.org/wal.html §2.2), so reads need
    /// not queue behind the writer's lock. Empty for in-memory databases (one connection only).
    private let readers: [SQLiteConnection]
    /// Lends each reader to one read at a time: see ``ReaderPool``.
    private let readerPool: ReaderPool

    /// How a commit reaches the disk (https://sqlite.org/pragma.html#pragma_synchronous).
    public enum Durability: String, Sendable {
        /// Survives the process being killed, not necessarily a power cut; no fsync per commit.
        case normal
        /// Survives a power cut, at an fsync per commit.
        case full
    }

    public init(storage: Location, durability: Durability = .normal, logger: Logger) async throws {
        let nioStorage: SQLiteConnection.Storage
        switch storage {
        case .memory: nioStorage = .memory
        case .file(let path):
            try Self.prepareOwnerOnly(path)
            nioStorage = .file(path: path)
        }
        connection = try await SQLiteConnection.open(storage: nioStorage, logger: logger)
        sql = connection.sql(queryLogLevel: .trace).guardingText
        // WAL with synchronous=NORMAL: a committed transaction survives the process being killed
        // (kill -9: the WAL is in the OS's page cache) but not necessarily a power cut, and commits
        // need no fsync each (https://sqlite.org/pragma.html#pragma_synchronous, sqlite.org/wal.html).
        // `?synchronous=full` on the database URL buys power-cut durability at that cost.
        try await sql.raw("PRAGMA journal_mode = WAL").run()
        try await sql.raw("PRAGMA synchronous = \(unsafeRaw: durability == .full ? "FULL" : "NORMAL")").run()
        try await sql.raw("PRAGMA foreign_keys = ON").run()
        try await sql.raw("PRAGMA busy_timeout = 5000").run()
        var readers: [SQLiteConnection] = []
        if case .file = storage {
            // Two per core (four at least): the NIO thread pool that runs SQLite calls has one
            // thread per core, and each reader serves one read at a time (``ReaderPool``), so a
            // read queued on the pool's threads holds its connection; with two readers on two
            // cores the pool made authorize + page pairs about 10% slower, with four they ran as
            // before (60 s for 16,000 pairs from 16 clients, within run-to-run noise).
            for _ in 0..<max(4, min(8, 2 * System.coreCount)) {
                // Each on the next loop: see ``EventLoopSpread``.
                let reader = try await SQLiteConnection.open(
                    storage: nioStorage, threadPool: .singleton, logger: logger, on: EventLoopSpread.shared.next())
                // A `read` that tried to write would bypass the writer's lock and transaction rules.
                _ = try await reader.query("PRAGMA query_only = ON")
                _ = try await reader.query("PRAGMA busy_timeout = 5000")
                readers.append(reader)
            }
        }
        self.readers = readers
        readerPool = ReaderPool(count: readers.count)
    }

    /// The database holds signing keys, password hashes and the web app's sessions: it is made
    /// owner-only wherever it lives (the security issue's M-6). A directory this creates is 0700;
    /// the file is created 0600 before SQLite opens it, and SQLite gives its `-wal` and `-shm`
    /// files the database file's permissions (https://sqlite.org/tempfiles.html); an existing
    /// database (and its `-wal`/`-shm`) readable by others is narrowed to 0600.
    static func prepareOwnerOnly(_ path: String) throws {
        let manager = FileManager.default
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if !manager.fileExists(atPath: directory) {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if !manager.fileExists(atPath: path) {
            guard manager.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw StorageError.invalidURL("sqlite:\(path) (cannot create the file)")
            }
        }
        for file in [path, path + "-wal", path + "-shm"] where manager.fileExists(atPath: file) {
            let mode = (try manager.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber)?.intValue ?? 0
            if mode & 0o077 != 0 { try manager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file) }
        }
    }

    public func read<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        do {
            if let shared = SharedTransaction.joined(by: self), let value = try await shared.read(body) { return value }
            if !readers.isEmpty {
                let readers = self.readers
                return try await readerPool.lend { try await body(readers[$0].sql(queryLogLevel: .trace).guardingText) }
            }
            let sql = self.sql
            return try await lock.withLock { try await body(sql) }
        } catch {
            throw health.classify(error)
        }
    }

    /// Straight from SQLiteNIO on a reader connection (`?` is SQLite's own placeholder).
    public func rows(_ sql: String, _ binds: [StoredValue]) async throws -> [StoredRow] {
        if binds.contains(where: \.containsNUL) { throw StorageError.textContainsNUL }
        let values = binds.map(\.sqlite)
        let rows: [SQLiteRow]
        do {
            if let shared = SharedTransaction.joined(by: self), let rows = try await shared.rows(sql, binds) { return rows }
            if !readers.isEmpty {
                let readers = self.readers
                rows = try await readerPool.lend { try await readers[$0].query(sql, values) }
            } else {
                let connection = self.connection
                rows = try await lock.withLock { try await connection.query(sql, values) }
            }
        } catch {
            throw health.classify(error)
        }
        return rows.map { StoredRow(backing: .sqlite($0)) }
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let sql = self.sql
        do {
            if let shared = SharedTransaction.joined(by: self) {
                do { return try await shared.write(body) } catch is SharedTransaction.Ended {}
            }
            let value = try await lock.withLock { try await sql.runTransaction(begin: "BEGIN IMMEDIATE", body) }
            health.recordSuccess(write: true)
            return value
        } catch let failure as CommitFailure {
            // SQLite's COMMIT fails whole (a full disk): nothing was stored.
            throw health.classify(failure.underlying)
        } catch {
            throw health.classify(error)
        }
    }

    public func singleStatement<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let sql = self.sql
        do {
            if let shared = SharedTransaction.joined(by: self) {
                do { return try await shared.write(body) } catch is SharedTransaction.Ended {}
            }
            // One statement is atomic on its own in SQLite (https://sqlite.org/lang_transaction.html:
            // "any command that changes the database will automatically start a transaction ...
            // committed when the last SQL statement finishes"); the lock keeps it out of another
            // request's open transaction on this connection.
            let value = try await lock.withLock { try await body(sql) }
            health.recordSuccess(write: true)
            return value
        } catch {
            throw health.classify(error)
        }
    }

    /// The writer's own transaction, lent to a ``SharedTransaction``: its rows are read on the
    /// writer connection, whose lock the transaction holds.
    func sharedOpener() -> SharedTransaction.Opener {
        { [connection] hold in
            try await self.transaction { sql in
                try await hold(
                    SharedTransaction.Connection(sql: sql) { statement, binds in
                        if binds.contains(where: \.containsNUL) { throw StorageError.textContainsNUL }
                        return try await connection.query(statement, binds.map(\.sqlite)).map { StoredRow(backing: .sqlite($0)) }
                    })
            }
        }
    }

    public func isUniqueViolation(_ error: any Error) -> Bool {
        // SQLITE_CONSTRAINT_UNIQUE and SQLITE_CONSTRAINT_PRIMARYKEY, as extended result codes
        // (SQLiteNIO opens connections with SQLITE_OPEN_EXRESCODE).
        guard let error = error as? SQLiteError else { return false }
        switch error.reason {
        case .constraintUniqueFailed, .constraintPrimaryKeyFailed: return true
        default: return false
        }
    }

    public func close() async throws {
        await health.probeStopped()
        for reader in readers { try await reader.close() }
        try await lock.withLock { try await self.connection.close() }
    }
}

/// The reader connections, each lent to one read at a time. A connection has one read
/// transaction, which lasts while any of its statements runs, and SQLiteNIO runs statements
/// from the thread pool's threads at once: a read that started on a connection while another
/// read was under way there joined that one's snapshot, taken before a write the caller had
/// just seen committed. About one authorize in 10,000 then could not read back the transaction
/// it had stored ("Session expired", issue 51's F9). A free reader is taken first; with none
/// free, the read waits for the first one given back.
final class ReaderPool: Sendable {
    private struct State {
        var free: [Int]
        var waiting: [CheckedContinuation<Int, Never>] = []
    }

    private let state: Mutex<State>

    init(count: Int) { state = Mutex(State(free: Array((0..<count).reversed()))) }

    func lend<T: Sendable>(_ body: @Sendable (Int) async throws -> T) async throws -> T {
        let index = await take()
        defer { give(index) }
        return try await body(index)
    }

    private func take() async -> Int {
        await withCheckedContinuation { continuation in
            let index: Int? = state.withLock { state in
                if let index = state.free.popLast() { return index }
                state.waiting.append(continuation)
                return nil
            }
            if let index { continuation.resume(returning: index) }
        }
    }

    private func give(_ index: Int) {
        let next: CheckedContinuation<Int, Never>? = state.withLock { state in
            guard !state.waiting.isEmpty else {
                state.free.append(index)
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume(returning: index)
    }
}
