import Foundation
import Metrics
import Synchronization

/// The sign-in log's queue, written behind: a grant or a sign-in hands its record over and goes
/// on, never waiting on the log's table (issue 51, F4: with `sign_in_events` locked or slow, no
/// grant completed). One writer drains the queue in batches, one statement for each (written one
/// statement each, the log cost refresh grants on SQLite about a third of their rate). At most
/// ``maximumQueued`` records wait; beyond that, and when a batch cannot be written, records are
/// dropped and counted (`todo.sign_in_log.dropped`, by reason), never held up or retried forever.
final class SignInBatches: Sendable {
    private struct Pending {
        var events: [SignInEvent] = []
        var writing = false
        /// Records handed over, and records whose batch has been written or dropped.
        var added = 0
        var settled = 0
        var flushes: [(upTo: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    /// Rows per statement: 17 columns each stay far below both engines' limits on bound values.
    static let maximumBatch = 256
    static let maximumQueued = 10_000
    private let pending = Mutex(Pending())

    /// Queues `event`; false when it was dropped (the queue is full). The first record while
    /// none is being written starts the writer, which writes until the queue is empty.
    @discardableResult
    func add(_ event: SignInEvent, write: @escaping @Sendable ([SignInEvent]) async throws -> Void) -> Bool {
        let (admitted, starts) = pending.withLock { queue -> (Bool, Bool) in
            guard queue.events.count < Self.maximumQueued else { return (false, false) }
            queue.events.append(event)
            queue.added += 1
            guard !queue.writing else { return (true, false) }
            queue.writing = true
            return (true, true)
        }
        if !admitted { Self.dropped("full", count: 1) }
        if starts { Task { await self.drain(write) } }
        return admitted
    }

    /// Returns once every record handed over before the call is written or dropped: reads of the
    /// log (Graph's, the console's) see what was just recorded.
    func flushed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = pending.withLock { queue -> Bool in
                guard queue.settled < queue.added else { return true }
                queue.flushes.append((queue.added, continuation))
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func drain(_ write: @Sendable ([SignInEvent]) async throws -> Void) async {
        while true {
            let batch = pending.withLock { queue -> [SignInEvent] in
                let count = min(queue.events.count, Self.maximumBatch)
                guard count > 0 else {
                    queue.writing = false
                    return []
                }
                defer { queue.events.removeFirst(count) }
                return Array(queue.events.prefix(count))
            }
            guard !batch.isEmpty else { return }
            do {
                try await write(batch)
            } catch {
                Self.dropped("write_failed", count: batch.count)
            }
            let ready = pending.withLock { queue -> [CheckedContinuation<Void, Never>] in
                queue.settled += batch.count
                let settled = queue.settled
                let ready = queue.flushes.filter { $0.upTo <= settled }.map(\.continuation)
                queue.flushes.removeAll { $0.upTo <= settled }
                return ready
            }
            for continuation in ready { continuation.resume() }
        }
    }

    private static func dropped(_ reason: String, count: Int) {
        Counter(label: "todo.sign_in_log.dropped", dimensions: [("reason", reason)]).increment(by: count)
    }
}
