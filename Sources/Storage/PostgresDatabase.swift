import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresKit
import SQLKit
import Synchronization

/// PostgreSQL through `PostgresClient` (postgres-nio's pool). The pool's `run()` loop is owned by
/// this object, so callers open and close it like the SQLite database.
public final class PostgresDatabase: Database, SharingDatabase {
    public let engine = DatabaseEngine.postgres
    public let health = DatabaseHealth()
    /// How long a request waits for a pooled connection before it is answered 503, unless other
    /// requests got connections meanwhile: while PostgreSQL is down the pool keeps trying, and
    /// requests must not queue behind it; while it is only busy they wait their turn, up to
    /// ``busyDeadline``.
    public static let connectionDeadline: Duration = .seconds(3)
    public static let busyDeadline: Duration = .seconds(30)
    /// How long past ``connectionDeadline`` a request looks again for a lease before giving up.
    static let stallAllowance: Duration = .milliseconds(500)
    /// How long a request waits for a lease while PostgreSQL is known to be down.
    static let outageDeadline: Duration = .milliseconds(250)
    /// When the pool last handed out a connection (uptime, milliseconds): the database is alive.
    private let lastLease = LeaseClock()
    private let client: PostgresClient
    /// One direct connection's settings, for ``verifyConnection()``.
    private let probe: PostgresConnection.Configuration?
    private let runTask: Task<Void, Never>
    private let logger: Logger
    /// Each pooled connection's statement guard: no statement waits on a connection that closed.
    private let watch = ConnectionWatch()
    /// Whether the commit markers' table is known to exist (``prepareMarkers()``).
    private let markersReady = Atomic<Bool>(false)
    /// The markers' table, schema-qualified (``prepareMarkers()``).
    private let markerTableName = Mutex<String?>(nil)
    /// When markers were last swept (uptime, milliseconds).
    private let lastMarkerSweep = Atomic<Int64>(0)

    public convenience init(url: String, logger: Logger) throws {
        guard let components = URLComponents(string: url), let host = components.host,
            let user = components.user, !user.isEmpty
        else { throw StorageError.invalidURL(DatabaseFactory.redacted(url)) }
        let database = components.path.split(separator: "/").first.map(String.init)
        var tls = PostgresClient.Configuration.TLS.disable
        var probeTLS = PostgresConnection.Configuration.TLS.disable
        let query = components.queryItems ?? []
        if query.contains(where: { $0.name == "sslmode" && ($0.value == "require" || $0.value == "verify-full") }) {
            tls = .require(.makeClientConfiguration())
            probeTLS = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user,
            password: components.password, database: database, tls: tls)
        configuration.options.maximumConnections = 20
        // A connection attempt that hangs (a dropped network) is given up within the deadline.
        configuration.options.connectTimeout = .seconds(3)
        // `?search_path=schema` pins the connection to one schema (tests give each case its own).
        if let schema = query.first(where: { $0.name == "search_path" })?.value, !schema.isEmpty {
            configuration.options.additionalStartupParameters.append(("search_path", schema))
        }
        var probe = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: user, password: components.password, database: database,
            tls: probeTLS)
        probe.options.connectTimeout = TimeAmount.seconds(3)
        self.init(configuration: configuration, probe: probe, logger: logger)
    }

    public init(configuration: PostgresClient.Configuration, probe: PostgresConnection.Configuration? = nil, logger: Logger) {
        self.probe = probe
        self.logger = logger
        let client = PostgresClient(configuration: configuration, eventLoopGroup: EventLoopSpread.shared, backgroundLogger: logger)
        self.client = client
        self.runTask = Task { await client.run() }
    }

    /// Makes one direct connection, so that a database that cannot be used is reported at start
    /// with PostgreSQL's own reason (a missing database, a refused login, nothing listening):
    /// the pool would only make requests wait for it.
    public func verifyConnection() async throws {
        guard let probe else { return }
        let logger = self.logger
        let connection = try await withDeadline(.seconds(10), "PostgreSQL") {
            try await PostgresConnection.connect(configuration: probe, id: 0, logger: logger)
        }
        try await connection.close()
    }

    public func read<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        if let shared = SharedTransaction.joined(by: self) {
            do {
                if let value = try await shared.read(body) { return value }
            } catch {
                throw health.classify(error)
            }
        }
        let (logger, watch) = (self.logger, self.watch)
        let value = try await withoutActuallyEscaping(body) { body in
            try await withConnection { connection in
                try await body(connection.sql(queryLogLevel: .trace, logger: logger).guardingText(watch.statements(of: connection)))
            }
        }
        health.recordSuccess(write: false)
        return value
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        if let shared = SharedTransaction.joined(by: self) {
            do {
                return try await shared.write(body)
            } catch is SharedTransaction.Ended {
                // The work ended as this call joined it: it runs on its own, below.
            } catch {
                throw health.classify(error)
            }
        }
        return try await connectionTransaction { sql, _ in try await body(sql) }
    }

    /// A pooled connection's transaction, marked (``mark(_:table:)``), its body given the
    /// connection too (a ``SharedTransaction`` reads its rows there).
    private func connectionTransaction<T: Sendable>(
        _ body: @Sendable (any SQLDatabase, PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            return try await markedTransaction(body)
        } catch is MarkerTableMissing {
            // Rolled back before COMMIT, nothing stored: the table is made again, the work run
            // again once. Work that itself drops the table (a schema made again) runs unmarked:
            // its lost COMMIT is then a 503.
            markersReady.store(false, ordering: .releasing)
            do {
                return try await markedTransaction(body)
            } catch is MarkerTableMissing {
                return try await markedTransaction(body, marked: false)
            }
        }
    }

    private func markedTransaction<T: Sendable>(
        _ body: @Sendable (any SQLDatabase, PostgresConnection) async throws -> T, marked: Bool = true
    ) async throws -> T {
        // BEGIN/COMMIT by hand rather than `PostgresClient.withTransaction`, which wraps the
        // closure's error in a PostgresTransactionError; callers need their own errors back.
        let (logger, watch) = (self.logger, self.watch)
        let table = try await prepareMarkers()
        let beforeCommit: (@Sendable (any SQLDatabase) async throws -> CommitMark?)? =
            marked ? { @Sendable (sql: any SQLDatabase) async throws -> CommitMark? in try await Self.mark(sql, table: table) } : nil
        do {
            let value = try await withoutActuallyEscaping(body) { body in
                try await withConnection { connection in
                    try await connection.sql(queryLogLevel: .trace, logger: logger).guardingText(watch.statements(of: connection))
                        .runTransaction(beforeCommit: beforeCommit) { sql in try await body(sql, connection) }
                }
            }
            health.recordSuccess(write: true)
            sweepMarkersIfDue()
            return value
        } catch let failure as CommitFailure {
            // The connection went during COMMIT: PostgreSQL may or may not have committed. Ask it
            // (a PostgreSQL restart under load did this to one create in seven runs): committed
            // is a success, aborted a plain "unavailable, retry later", since nothing was stored.
            let reason = health.classify(failure.underlying)
            guard let mark = failure.mark else { throw reason }
            let id = mark.transactionID
            switch await commitOutcome(of: mark, table: table) {
            case .committed:
                logger.notice("a lost COMMIT had committed", metadata: ["transaction": "\(id)"])
                health.recordSuccess(write: true)
                guard let value = failure.value as? T else { preconditionFailure("the transaction's own value") }
                return value
            case .aborted:
                logger.notice("a lost COMMIT had rolled back", metadata: ["transaction": "\(id)"])
                throw reason
            case .unknown:
                // PostgreSQL stayed away: the work may be stored. Not retryable.
                throw StorageError.commitOutcomeUnknown(StorageError.operatorDescription(of: failure.underlying))
            }
        }
    }

    /// Makes the commit markers' table once per process (``PostgresDatabase/mark(_:)``): every
    /// schema a database is used in has it, whichever parts run there (the Task API alone runs
    /// no identity migration). Under an advisory lock of its own, as two instances making
    /// it at once race in PostgreSQL's catalogue; in autocommit statements, so that nothing of it
    /// is a COMMIT a caller's transaction could be mistaken for.
    /// Returns the table's name qualified by the connection's own schema, so a transaction that
    /// moves its `search_path` (`SET LOCAL`) still marks it in the one the recovery reads.
    private func prepareMarkers() async throws -> String {
        if markersReady.load(ordering: .acquiring), let table = markerTableName.withLock({ $0 }) { return table }
        let (logger, watch) = (self.logger, self.watch)
        let table = try await withConnection { connection -> String in
            let sql = connection.sql(queryLogLevel: .trace, logger: logger).guardingText(watch.statements(of: connection))
            let schema = try await sql.raw("SELECT current_schema() AS s").first()?.decode(column: "s", as: String.self) ?? "public"
            let table = "\"" + schema.replacingOccurrences(of: "\"", with: "\"\"") + "\"." + Self.markerTable
            try await sql.raw("SELECT pg_advisory_lock(72017)").run()
            do {
                try await sql.raw("CREATE TABLE IF NOT EXISTS \(unsafeRaw: table) (id TEXT PRIMARY KEY)").run()
            } catch {
                try? await sql.raw("SELECT pg_advisory_unlock(72017)").run()
                throw error
            }
            try await sql.raw("SELECT pg_advisory_unlock(72017)").run()
            return table
        }
        markerTableName.withLock { $0 = table }
        markersReady.store(true, ordering: .releasing)
        return table
    }

    /// Deletes markers older than ``markerLifetime``, at most every 30 seconds, in the
    /// background: one range delete on the time-ordered key.
    private func sweepMarkersIfDue() {
        let now = Self.uptimeMilliseconds
        let last = lastMarkerSweep.load(ordering: .relaxed)
        guard now - last >= 30_000, lastMarkerSweep.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        let cutoff = CommitMark.newID(now: Date().addingTimeInterval(-Self.markerLifetime)).prefix(12)
        guard let table = markerTableName.withLock({ $0 }) else { return }
        Task { [self] in
            _ = try? await rows("DELETE FROM \(table) WHERE id < ?", [.text(String(cutoff))])
        }
    }

    public func singleStatement<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await transaction(body)
    }

    /// A pooled connection's marked transaction, lent to a ``SharedTransaction``.
    func sharedOpener() -> SharedTransaction.Opener {
        { [logger, watch] hold in
            try await self.connectionTransaction { sql, connection in
                try await hold(
                    SharedTransaction.Connection(sql: sql) { statement, binds in
                        try await watch.statements(of: connection).run { try await connection.storedRows(statement, binds, logger: logger) }
                    })
            }
        }
    }

    private static var uptimeMilliseconds: Int64 { Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000) }

    /// A pooled connection for `body`, or ``StorageError/unavailable(_:)`` when none comes within
    /// ``connectionDeadline`` while no other request got or gave back one and no work ran on one
    /// (`countsAsWork`: a parked read session is not work) either (or within ``busyDeadline``
    /// at all), and within ``outageDeadline`` while the database is known to be down (no lease for
    /// the whole deadline, and the last work failed as unavailable): an outage is answered at once,
    /// not after seconds of waiting for every request (the reliability rerun's P-4). The lease is
    /// cancelled then, and not waited for: postgres-nio may hold a cancelled lease request until
    /// its pool gives up on connecting. A body already running is never abandoned. Errors that
    /// mean PostgreSQL cannot work now become ``StorageError/unavailable(_:)`` too.
    private func withConnection<T: Sendable>(
        countsAsWork: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let client = self.client
        let health = self.health
        let lastLease = self.lastLease
        // One hand-off: either the connection arrives first and the body runs, or the deadline
        // passes first and a connection arriving later is handed back unused. Never both, so
        // no request is answered 503 for work that went on to commit.
        let lease = LeaseState()
        // Held here, not by the lease task: `read` and `transaction` lend a non-escaping body
        // (`withoutActuallyEscaping`), which must be let go before they return, also when the
        // deadline answers while the lease task is still waiting.
        let lent = LentBody(body)
        do {
            return try await race {
                defer { _ = lent.take() }
                return try await client.withConnection { connection in
                    guard lease.take(.acquired) else { throw StorageError.unavailable("the connection came after the deadline") }
                    lastLease.value.store(Self.uptimeMilliseconds, ordering: .relaxed)
                    guard let body = lent.take() else { throw CancellationError() }
                    // postgres-nio drops a statement written to a channel that has closed, and it
                    // never answers (see ``StatementGuard``).
                    guard !connection.isClosed else { throw StorageError.unavailable("the PostgreSQL connection has closed") }
                    guard countsAsWork else { return try await body(connection) }
                    lastLease.running.add(1, ordering: .relaxed)
                    defer {
                        lastLease.running.subtract(1, ordering: .relaxed)
                        lastLease.value.store(Self.uptimeMilliseconds, ordering: .relaxed)
                    }
                    return try await body(connection)
                }
            } timer: {
                var waited: Duration = .zero
                var lookedAgain = false
                while true {
                    let idle = lastLease.isBusy ? 0 : Self.uptimeMilliseconds - lastLease.value.load(ordering: .relaxed)
                    let outage = health.isFailing && idle > Self.connectionDeadline.milliseconds
                    let pause = outage ? Self.outageDeadline : (lookedAgain ? Self.stallAllowance : Self.connectionDeadline)
                    guard (try? await Task.sleep(for: pause)) != nil else { return nil }
                    waited += pause
                    if lease.state == .acquired { return nil }
                    // Work running on a connection means PostgreSQL is there, only busy: wait
                    // (up to the busy deadline) rather than call it down. Every pooled connection
                    // held by statements slower than the deadline, under a loaded machine, once
                    // made hundreds of queued requests 503 at once. A statement that never
                    // answers ends at its own deadline (``StatementDeadline``), so this wait is
                    // bounded by that too.
                    let idleNow = lastLease.isBusy ? 0 : Self.uptimeMilliseconds - lastLease.value.load(ordering: .relaxed)
                    if waited >= Self.busyDeadline || outage || (idleNow > Self.connectionDeadline.milliseconds && lookedAgain) {
                        guard lease.take(.timedOut) else { return nil }
                        _ = lent.take()
                        return StorageError.unavailable("no PostgreSQL connection within \(waited)")
                    }
                    // No lease for the whole deadline: PostgreSQL is gone, or this process was not
                    // scheduled (a starved machine delays leases and timers alike). Once it runs
                    // again a live pool hands out connections within moments, so look once more
                    // before calling it unavailable.
                    lookedAgain = idleNow > Self.connectionDeadline.milliseconds
                }
            } abandonOnCancel: {
                // Only a lease still being waited for stops; a body that has its connection runs on.
                guard lease.take(.timedOut) else { return false }
                _ = lent.take()
                return true
            }
        } catch let failure as CommitFailure {
            throw failure
        } catch {
            throw health.classify(error)
        }
    }

    public func rows(_ sql: String, _ binds: [StoredValue]) async throws -> [StoredRow] {
        if let shared = SharedTransaction.joined(by: self) {
            do {
                if let rows = try await shared.rows(sql, binds) { return rows }
            } catch {
                throw health.classify(error)
            }
        }
        let (logger, watch) = (self.logger, self.watch)
        return try await withConnection { connection in
            try await watch.statements(of: connection).run { try await connection.storedRows(sql, binds, logger: logger) }
        }
    }

    /// One pooled connection held for a run of reads, for a reader that reads again and again
    /// (the task lists' versions): each lease and release costs the pool two timers (keep-alive
    /// and idle), whose sleeps stay queued until they would have fired, 30 and 60 s later. At a
    /// lease per statement they held 50 MB and a third of the server's CPU (issue 13).
    public func withReadSession<T: Sendable>(_ body: @escaping @Sendable (ReadSession) async throws -> T) async throws -> T {
        let logger = self.logger
        let (health, watch) = (self.health, self.watch)
        // A session parks between batches, holding its connection without work: it is no sign
        // that PostgreSQL is there.
        let value = try await withConnection(countsAsWork: false) { connection in
            try await body(
                ReadSession(connection: connection, logger: logger, health: health, statements: watch.statements(of: connection)))
        }
        health.recordSuccess(write: false)
        return value
    }

    public func isUniqueViolation(_ error: any Error) -> Bool {
        // SQLSTATE 23505 unique_violation
        (error as? PSQLError)?.serverInfo?[.sqlState] == "23505"
    }

    /// Stops the pool. Its `run()` loop ends on cancellation once its connections are closed;
    /// the wait is bounded (10 s), so a connection that never answers its close cannot hold a
    /// shutdown (or a test's clean-up) forever: after that the loop is left to finish on its own.
    public func close() async throws {
        await health.probeStopped()
        runTask.cancel()
        let runTask = self.runTask
        // Unstructured on purpose: a task group would wait for the loop anyway.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = ResumeOnce(continuation)
            Task {
                await runTask.value
                once.resume()
            }
            Task {
                try? await Task.sleep(for: .seconds(10))
                once.resume()
            }
        }
    }
}

/// A connection leased for ``PostgresDatabase/withReadSession(_:)``.
public struct ReadSession: Sendable {
    let connection: PostgresConnection
    let logger: Logger
    let health: DatabaseHealth
    private let statements: StatementGuard

    init(connection: PostgresConnection, logger: Logger, health: DatabaseHealth, statements: StatementGuard) {
        self.connection = connection
        self.logger = logger
        self.health = health
        self.statements = statements
    }

    /// As ``Database/rows(_:_:)``, on this session's connection. A connection that is closed,
    /// or closes under the statement, fails it as ``StorageError/unavailable(_:)`` (recorded
    /// for `/readyz`), whatever postgres-nio does with it.
    public func rows(_ sql: String, _ binds: [StoredValue]) async throws -> [StoredRow] {
        do {
            // postgres-nio writes a statement to its channel without a promise: on a channel that
            // has closed (PostgreSQL restarted while the session was held) the write fails
            // unseen and the statement waits forever. It held every task list of an instance
            // after a restart under load (the reliability rerun's P-1).
            guard !connection.isClosed else { throw StorageError.unavailable("the PostgreSQL connection has closed") }
            let (connection, logger) = (self.connection, self.logger)
            return try await statements.run { try await connection.storedRows(sql, binds, logger: logger) }
        } catch {
            throw health.classify(error)
        }
    }

    /// Closes the connection under a statement that does not answer (a half-open TCP
    /// connection, a lock that is never released): the statement fails at once, and the pool
    /// replaces the connection. postgres-nio has no per-statement timeout.
    public func abandon() async {
        try? await connection.close()
    }
}

extension Duration {
    fileprivate var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

/// When the pool last handed out or took back a connection, and how many bodies run on one now.
private final class LeaseClock: Sendable {
    let value = Atomic<Int64>(0)
    let running = Atomic<Int>(0)
    var isBusy: Bool { running.load(ordering: .relaxed) > 0 }
}

/// A body lent to the lease task, taken out once: by the lease when it runs it, else by whoever
/// gives up on the lease.
private final class LentBody<T: Sendable>: Sendable {
    private let body: Mutex<(@Sendable (PostgresConnection) async throws -> T)?>

    init(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) { self.body = Mutex(body) }

    func take() -> (@Sendable (PostgresConnection) async throws -> T)? { body.withLock { $0.take() } }
}

/// Whether a request got its connection or gave up waiting: decided once.
private final class LeaseState: Sendable {
    enum Outcome: Int {
        case waiting = 0
        case acquired, timedOut
    }
    private let value = Atomic<Int>(Outcome.waiting.rawValue)

    var state: Outcome { Outcome(rawValue: value.load(ordering: .acquiring)) ?? .waiting }

    /// Moves from waiting to `outcome`; false when the other outcome came first.
    func take(_ outcome: Outcome) -> Bool {
        value.compareExchange(expected: Outcome.waiting.rawValue, desired: outcome.rawValue, ordering: .acquiringAndReleasing).exchanged
    }
}

/// Resumes a continuation at most once, whichever of several tasks gets there first.
private final class ResumeOnce: Sendable {
    private let continuation: Mutex<CheckedContinuation<Void, Never>?>

    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = Mutex(continuation) }

    func resume() { continuation.withLock { $0.take() }?.resume() }
}
