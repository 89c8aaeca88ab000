import Foundation
import PostgresNIO
import SQLiteNIO
import Synchronization

/// Whether the database can do work at all (issue 14). Engines turn the errors that mean "not
/// now" (PostgreSQL unreachable, restarting, out of connections or disk; SQLite's disk full or
/// failing) into ``StorageError/unavailable(_:)``, which every wire format answers with 503 and
/// `Retry-After`, and remember the last one, so `/readyz` can say so while writes fail.
public final class DatabaseHealth: Sendable {
    private struct State {
        var failedAt: Date?
        var reason: String?
        /// The failure was about writing (a full disk), which a successful read does not disprove.
        var writesOnly = false
    }

    private let state = Mutex(State())
    private let failing = Atomic<Bool>(false)
    /// When the database was last found unable to work (seconds since 1970), kept after it
    /// recovers; 0 before the first time.
    private let lastOutageSeconds = Atomic<Int64>(0)
    /// When `/readyz` last probed writes (seconds since 1970).
    private let lastProbeSeconds = Atomic<Int64>(0)
    /// How long one failure keeps `/readyz` at 503 without another.
    static let memory: TimeInterval = 30

    public init() {}

    /// `error` as ``StorageError/unavailable(_:)`` when it means the database cannot work now
    /// (recorded); otherwise unchanged.
    public func classify(_ error: any Error) -> any Error {
        guard let (reason, writesOnly) = Self.unavailability(of: error) else { return error }
        let now = Date()
        state.withLock { $0 = State(failedAt: now, reason: reason, writesOnly: writesOnly) }
        failing.store(true, ordering: .relaxed)
        // Only the connection to PostgreSQL failing counts as an outage: a pool that is merely
        // busy (which a flood of requests can cause) must not widen the refresh retry window.
        if Self.isConnectionLoss(error) {
            lastOutageSeconds.store(Int64(now.timeIntervalSince1970.rounded(.up)), ordering: .relaxed)
        }
        return StorageError.unavailable(reason)
    }

    /// The last time this process found the database unable to work (to the second, rounded up),
    /// even if it has recovered since; nil if never.
    public var lastOutage: Date? {
        let seconds = lastOutageSeconds.load(ordering: .relaxed)
        return seconds == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Records that the connection to the database was lost now (what a PostgreSQL connection
    /// error records), for tests of what an outage changes.
    public func recordConnectionLoss(_ reason: String) {
        let now = Date()
        state.withLock { $0 = State(failedAt: now, reason: reason, writesOnly: false) }
        failing.store(true, ordering: .relaxed)
        lastOutageSeconds.store(Int64(now.timeIntervalSince1970.rounded(.up)), ordering: .relaxed)
    }

    /// Whether a readiness write probe is due: at most one every ``probeInterval``, however often
    /// `/readyz` is asked.
    func isProbeDue(now: Date = Date()) -> Bool {
        let seconds = Int64(now.timeIntervalSince1970)
        let last = lastProbeSeconds.load(ordering: .relaxed)
        guard seconds - last >= Self.probeInterval else { return false }
        return lastProbeSeconds.compareExchange(expected: last, desired: seconds, ordering: .relaxed).exchanged
    }

    static let probeInterval: Int64 = 5

    /// The write probe under way, which a close waits for; nil once closing (no probe starts).
    private let probe = Mutex<(task: Task<Void, Never>?, closing: Bool)>((nil, false))

    /// Starts `work` as the write probe unless the database is closing.
    func startProbe(_ work: @escaping @Sendable () async -> Void) {
        probe.withLock { state in
            guard !state.closing else { return }
            state.task = Task { await work() }
        }
    }

    /// Stops new probes and waits for the one under way: a probe must not outlive its database's
    /// connections.
    func probeStopped() async {
        let running = probe.withLock { state -> Task<Void, Never>? in
            state.closing = true
            return state.task
        }
        await running?.value
    }

    /// Whether the last work failed as unavailable and nothing has succeeded since.
    var isFailing: Bool { failing.load(ordering: .relaxed) }

    /// Work succeeded: the database is reachable again, and after a write, writable again.
    func recordSuccess(write: Bool) {
        guard failing.load(ordering: .relaxed) else { return }
        state.withLock { state in
            guard write || !state.writesOnly else { return }
            state = State()
            failing.store(false, ordering: .relaxed)
        }
    }

    /// Why the database is failing now: the last unavailability, unless work of its kind
    /// succeeded since or it is older than ``memory``.
    public func problem(now: Date = Date()) -> String? {
        state.withLock { state in
            guard let failed = state.failedAt, now.timeIntervalSince(failed) < Self.memory else { return nil }
            return state.reason
        }
    }

    /// Whether `error` says the connection to PostgreSQL was lost or refused (the server went
    /// away, is shutting down or cannot take connections).
    static func isConnectionLoss(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .connectionError, .serverClosedConnection, .uncleanShutdown: return true
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            return state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state)
        default: return false
        }
    }

    /// The reason `error` means "not now" and whether only writes are affected, or nil for any
    /// other error.
    static func unavailability(of error: any Error) -> (reason: String, writesOnly: Bool)? {
        if case StorageError.unavailable(let reason) = error { return (reason, false) }
        if let error = error as? PSQLError {
            switch error.code {
            case .connectionError, .serverClosedConnection, .poolClosed, .uncleanShutdown, .clientClosedConnection:
                return ("PostgreSQL cannot be reached (\(error.code))", false)
            case .server:
                // SQLSTATE classes 08 (connection), 53 (insufficient resources: disk full, out of
                // memory, too many connections), 57P01–57P03 (shutting down, cannot connect now).
                let state = error.serverInfo?[.sqlState] ?? ""
                if state.hasPrefix("08") || state.hasPrefix("53") || ["57P01", "57P02", "57P03"].contains(state) {
                    // 53100: disk full; reads may still work.
                    return ("PostgreSQL refused the work (SQLSTATE \(state): \(error.serverInfo?[.message] ?? ""))", state == "53100")
                }
                return nil
            default: return nil
            }
        }
        if let error = error as? SQLiteError {
            switch error.reason {
            case .full: return ("the SQLite database's disk is full", true)
            case .ioError, .ioErrorFailedWrite, .ioErrorFailedSync, .ioErrorFailedDirSync, .ioErrorFailedTruncate, .ioErrorFailedRead,
                .ioErrorIncompleteRead:
                return ("the SQLite database's disk failed (\(error.reason))", true)
            case .cantOpen, .readonlyDirectory, .readOnly: return ("the SQLite database cannot be written (\(error.reason))", true)
            default: return nil
            }
        }
        return nil
    }
}

/// Runs `body`, or throws ``StorageError/unavailable(_:)`` naming `what` once `deadline` has
/// passed without an answer. The body is cancelled then, but not waited for: one that does not
/// heed cancellation (a pool lease while PostgreSQL is down) must not hold the answer (a
/// `/readyz` took up to 3 s, once over 5 s, in the reliability rerun's P-4).
public func withDeadline<T: Sendable>(
    _ deadline: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await race(body) {
        guard (try? await Task.sleep(for: deadline)) != nil else { return nil }
        return StorageError.unavailable("\(what) did not answer within \(deadline)")
    }
}

/// Runs `work` against `timer`: the first to finish answers (`timer` answers with the error it
/// returns, or stands down with nil). The loser is cancelled and not waited for, so a `work`
/// that ignores cancellation cannot hold the caller. Cancelling the caller cancels the timer,
/// and the work too when `abandonOnCancel` agrees (a lease may be given up, a running body not).
func race<T: Sendable>(
    _ work: @escaping @Sendable () async throws -> T, timer: @escaping @Sendable () async -> (any Error)?,
    abandonOnCancel: @escaping @Sendable () -> Bool = { true }
) async throws -> T {
    let tasks = RaceTasks()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let once = ResumeResultOnce(continuation)
            tasks.set(
                work: Task {
                    let result: Result<T, any Error>
                    do { result = .success(try await work()) } catch { result = .failure(error) }
                    once.resume(result)
                    tasks.cancelTimer()
                },
                timer: Task {
                    guard let error = await timer() else { return }
                    once.resume(.failure(error))
                    tasks.cancelWork()
                })
        }
    } onCancel: {
        if abandonOnCancel() { tasks.cancelWork() }
        tasks.cancelTimer()
    }
}

/// The two tasks of a race: the work and its timer, each cancelled when the other wins.
final class RaceTasks: Sendable {
    private let state = Mutex<(work: Task<Void, Never>?, timer: Task<Void, Never>?, cancelled: (work: Bool, timer: Bool))>(
        (nil, nil, (false, false)))

    func set(work: Task<Void, Never>, timer: Task<Void, Never>) {
        let (cancelWork, cancelTimer) = state.withLock { state in
            state.work = work
            state.timer = timer
            return state.cancelled
        }
        if cancelWork { work.cancel() }
        if cancelTimer { timer.cancel() }
    }

    func cancelWork() {
        state.withLock { state in
            state.cancelled.work = true
            return state.work
        }?.cancel()
    }

    func cancelTimer() {
        state.withLock { state in
            state.cancelled.timer = true
            return state.timer
        }?.cancel()
    }
}

/// A throwing continuation resumed at most once, whichever outcome comes first.
final class ResumeResultOnce<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, any Error>?>

    init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = Mutex(continuation) }

    /// False when it was already resumed.
    @discardableResult
    func resume(_ result: Result<T, any Error>) -> Bool {
        guard let continuation = continuation.withLock({ $0.take() }) else { return false }
        continuation.resume(with: result)
        return true
    }
}

extension StorageError {
    /// An error as an operator should read it (issue 14). postgres-nio describes its errors only
    /// as "Generic description to prevent accidental leakage…"; this names PostgreSQL's own
    /// message, SQLSTATE and hint and the connection's underlying error, but never the statement
    /// or its values, which may hold secrets.
    public static func operatorDescription(of error: any Error) -> String {
        if case StorageError.migrationFailed(let namespace, let version, let reason) = error {
            return "migration \(namespace)#\(version) failed: \(reason)"
        }
        if let cocoa = error as? CocoaError { return fileDescription(of: cocoa) }
        guard let error = error as? PSQLError else { return String(describing: error) }
        var parts = ["PostgreSQL \(error.code)"]
        if let message = error.serverInfo?[.message] { parts.append(message) }
        if let state = error.serverInfo?[.sqlState] { parts.append("SQLSTATE \(state)") }
        if let hint = error.serverInfo?[.hint] { parts.append("hint: \(hint)") }
        if let underlying = error.underlying { parts.append(String(describing: underlying)) }
        return parts.joined(separator: ": ")
    }
}

extension StorageError {
    /// A file error as one line: what could not be done, the path, and the system's reason
    /// (Foundation's own text is `Error Domain=NSCocoaErrorDomain Code=642 …`).
    static func fileDescription(of error: CocoaError) -> String {
        let path = error.filePath ?? error.url?.path ?? "a file of the data directory"
        var reason: String
        switch error.code {
        case .fileWriteVolumeReadOnly: reason = "the file system is read-only"
        case .fileWriteNoPermission, .fileReadNoPermission: reason = "permission denied"
        case .fileWriteOutOfSpace: reason = "no space left on the device"
        case .fileNoSuchFile, .fileReadNoSuchFile: reason = "no such file or directory"
        case .fileWriteFileExists: reason = "it exists and is not what was expected (a directory where a file belongs?)"
        default: reason = "error \(error.code.rawValue)"
        }
        if let posix = error.underlying as? POSIXError { reason = String(cString: strerror(posix.code.rawValue)) }
        return "\(path): \(reason)"
    }
}

extension Database {
    /// Whether this instance should get traffic (`/readyz`): the database answers within
    /// `deadline`, and writes are not failing. Throws ``StorageError/unavailable(_:)`` otherwise.
    public func checkReady(within deadline: Duration = .seconds(1)) async throws {
        // Beside the answer, not in it: a probe waiting on a busy writer must not make the instance
        // look unready, and no deadline may cut its transaction short. A failure it finds is
        // recorded, and this and later answers see it.
        if health.isProbeDue() { health.startProbe { try? await self.probeWrites() } }
        try await withDeadline(deadline, "the database") { try await self.read { try await $0.raw("SELECT 1").run() } }
        if let problem = health.problem() { throw StorageError.unavailable(problem) }
    }

    /// Writes a page's worth of random bytes and deletes it, committed: on a full disk (or a
    /// database that may not grow) the write fails, and the failure is recorded like any other,
    /// so an instance restarted on a full disk is not ready before a request's write has failed.
    /// Committed, because a rolled-back write never reaches the file: SQLite keeps its pages in
    /// the cache and writes the log only at COMMIT, so the probe saw nothing after a restart
    /// (issue 51, F6). Random, so no compression makes it smaller. No row is kept.
    func probeWrites() async throws {
        let filler = (0..<8_192).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        do {
            // One transaction: the insert's pages are allocated (SQLite's full database fails
            // here) and, with the delete's freelist, written to the log at COMMIT (a full disk
            // fails there).
            try await transaction { sql in
                try await sql.raw("CREATE TABLE IF NOT EXISTS storage_probe (filler TEXT)").run()
                try await sql.raw("INSERT INTO storage_probe (filler) VALUES (\(bind: filler))").run()
                try await sql.raw("DELETE FROM storage_probe").run()
            }
        } catch let error as StorageError {
            // Recorded by the engine (a full disk: writes only); the answer is readiness's.
            if case .unavailable = error { return }
            throw error
        }
    }
}

/// Ends the write probe's transaction without keeping anything.
