import NIOPosix
import Synchronization

/// CPU-bound work (bcrypt, a custom policy's patterns) on threads of its own, off the event
/// loops and off NIO's shared pool (which SQLite uses). At most `maximumQueued` calls run or
/// wait at once; beyond that a call is refused at once (``Busy``) instead of queueing without
/// bound.
package final class BoundedThreadPool: Sendable {
    package struct Busy: Error {}

    private let pool: NIOThreadPool
    private let inFlight = Mutex(0)
    private let maximumQueued: Int

    package init(threads: Int, maximumQueued: Int) {
        pool = NIOThreadPool(numberOfThreads: max(1, threads))
        self.maximumQueued = maximumQueued
        pool.start()
    }

    package func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let admitted = inFlight.withLock { count -> Bool in
            guard count < maximumQueued else { return false }
            count += 1
            return true
        }
        guard admitted else { throw Busy() }
        defer { inFlight.withLock { $0 -= 1 } }
        return try await pool.runIfActive(work)
    }

    package func shutdown() async throws { try await pool.shutdownGracefully() }
}
