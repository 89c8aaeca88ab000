import NIOCore
import PostgresNIO
import Synchronization

/// How long a PostgreSQL statement may go unanswered while a request waits on it: past it the
/// connection is closed under the statement, which then fails as unavailable (503). Set by the
/// servers' request middleware; unset (no deadline) for migrations, backups and other tools,
/// whose statements may rightly take long.
public enum StatementDeadline {
    @TaskLocal public static var current: Duration?
    /// What the servers give a request's statements: far beyond any statement's normal time.
    public static let request: Duration = .seconds(15)
}

/// The ``StatementGuard`` of each connection, made on its first use with one close callback: a
/// callback per session or statement would pile up on a pooled connection that lives for hours.
/// An entry goes when its connection closes, so the table holds at most the pool's connections.
final class ConnectionWatch: Sendable {
    private let guards = Mutex<[ObjectIdentifier: StatementGuard]>([:])

    func statements(of connection: PostgresConnection) -> StatementGuard {
        let key = ObjectIdentifier(connection)
        let (statements, isNew) = guards.withLock { guards -> (StatementGuard, Bool) in
            if let existing = guards[key] { return (existing, false) }
            let made = StatementGuard(loop: connection.eventLoop) { Task { try? await connection.close() } }
            guards[key] = made
            return (made, true)
        }
        if isNew {
            connection.closeFuture.whenComplete { [weak self] _ in
                statements.connectionClosed(on: connection.eventLoop)
                _ = self?.guards.withLock { $0.removeValue(forKey: key) }
            }
        }
        return statements
    }
}

/// The statement in flight on one connection, failed when the connection closes
/// and the statement has not ended on its own within ``grace`` (postgres-nio fails the
/// statements it knows about at once; the grace is for those it lost).
final class StatementGuard: Sendable {
    private struct State {
        var closed = false
        var pending: (@Sendable (any Error) -> Void)?
        var nextID: UInt64 = 0
        var pendingID: UInt64 = 0
        var deadline: Scheduled<Void>?
    }
    private let state = Mutex(State())
    static let grace: TimeAmount = .seconds(1)
    private let loop: (any EventLoop)?
    /// Closes the connection: what a statement past its deadline gets (the statement then
    /// fails as the connection's close fails it, or after ``grace``).
    private let closeConnection: @Sendable () -> Void

    init(loop: (any EventLoop)? = nil, closeConnection: @escaping @Sendable () -> Void = {}) {
        self.loop = loop
        self.closeConnection = closeConnection
    }

    /// `body`'s result, or ``StorageError/unavailable(_:)`` when the connection closed under it.
    /// `body` runs in a task of its own, so that a statement that never ends is left behind
    /// rather than waited for.
    func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let once = ResumeResultOnce(continuation)
            // Read here, in the caller's task: a request's deadline, none for tools and migrations.
            let deadline = StatementDeadline.current
            let id = state.withLock { state -> UInt64? in
                guard !state.closed else { return nil }
                state.nextID &+= 1
                state.pendingID = state.nextID
                state.pending = { error in once.resume(.failure(error)) }
                return state.nextID
            }
            guard let id else {
                once.resume(.failure(StorageError.unavailable("the PostgreSQL connection has closed")))
                return
            }
            if let deadline, let loop {
                let timer = loop.scheduleTask(in: .nanoseconds(Int64(deadline.components.seconds) * 1_000_000_000)) {
                    // Still this statement: a connection that neither answers nor closes (a
                    // half-open TCP connection, the reliability rerun's P-3) is closed under it.
                    guard self.state.withLock({ $0.pendingID == id && $0.pending != nil }) else { return }
                    self.closeConnection()
                }
                state.withLock { $0.deadline = timer }
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                let timer = self.state.withLock { state -> Scheduled<Void>? in
                    guard state.pendingID == id else { return nil }
                    state.pending = nil
                    defer { state.deadline = nil }
                    return state.deadline
                }
                timer?.cancel()
                once.resume(result)
            }
        }
    }

    func connectionClosed(on loop: any EventLoop) {
        state.withLock { $0.closed = true }
        loop.scheduleTask(in: Self.grace) {
            let pending = self.state.withLock { state in
                defer { state.pending = nil }
                return state.pending
            }
            pending?(StorageError.unavailable("the PostgreSQL connection closed under a statement"))
        }
    }
}
