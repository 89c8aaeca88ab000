import NIOCore
import NIOPosix

/// RS256 signatures made on threads of their own, not on the event loops.
///
/// An RSA-2048 signature takes about 0.8 ms of CPU. `todo-server` runs Swift concurrency on NIO's
/// event loops, so a signature made in a handler held its loop that long: the SQLite writer's
/// next step, queued on the same loop, waited behind it, and the refresh grant (whose rotation
/// holds the writer across five statements) stretched to 3.4 ms per grant with 1.1 of 2 cores
/// busy (issue 13's refresh benchmark). Here the loops only hand the work over.
package final class SigningThreads: Sendable {
    private let pool: NIOThreadPool

    package init(threads: Int = System.coreCount) {
        pool = NIOThreadPool(numberOfThreads: max(1, threads))
        pool.start()
    }

    package func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive(work)
    }

    package func shutdown() async throws { try await pool.shutdownGracefully() }
}
