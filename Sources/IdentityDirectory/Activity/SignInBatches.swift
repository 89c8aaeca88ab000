import Foundation
import Synchronization

/// Group commit for the sign-in log: a token grant or sign-in waits until its record is
/// written, but records that arrive while a batch is being written go together in the next
/// batch, one statement for all of them. Written one statement each, the log cost refresh grants
/// on SQLite about a third of their rate (953/s against 1,492/s, `scripts/bench/token.sh`), the
/// writes queueing behind the database's one writer.
final class SignInBatches: Sendable {
    private struct Pending {
        var events: [SignInEvent] = []
        var waiters: [CheckedContinuation<Void, any Error>] = []
        var writing = false
    }

    /// Rows per statement: 17 columns each stay far below both engines' limits on bound values.
    static let maximumBatch = 256
    private let pending = Mutex(Pending())

    /// Queues `event` and returns once a batch holding it is written (or throws that batch's
    /// error). The first record while none is being written starts the writer, which writes
    /// until the queue is empty.
    func add(_ event: SignInEvent, write: @escaping @Sendable ([SignInEvent]) async throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let starts = pending.withLock { queue -> Bool in
                queue.events.append(event)
                queue.waiters.append(continuation)
                guard !queue.writing else { return false }
                queue.writing = true
                return true
            }
            if starts { Task { await self.drain(write) } }
        }
    }

    private func drain(_ write: @Sendable ([SignInEvent]) async throws -> Void) async {
        while true {
            let (batch, waiters) = pending.withLock { queue -> ([SignInEvent], [CheckedContinuation<Void, any Error>]) in
                let count = min(queue.events.count, Self.maximumBatch)
                guard count > 0 else {
                    queue.writing = false
                    return ([], [])
                }
                defer {
                    queue.events.removeFirst(count)
                    queue.waiters.removeFirst(count)
                }
                return (Array(queue.events.prefix(count)), Array(queue.waiters.prefix(count)))
            }
            guard !batch.isEmpty else { return }
            do {
                try await write(batch)
                for waiter in waiters { waiter.resume() }
            } catch {
                for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }
}
