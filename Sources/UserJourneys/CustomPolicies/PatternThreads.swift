import Foundation
import IdentityDirectory
import NIOPosix
import Synchronization
import TrustFramework

/// Where a custom policy's patterns and predicates are matched: two threads of their own, off the
/// event loops (a backtracking pattern would stall every request on its loop) and off NIO's
/// shared pool (which SQLite uses), as bcrypt has its own (``PasswordHasher``). At most
/// ``maximumQueued`` submissions wait; beyond that a submission is answered "try again later" at
/// once. Process-lifetime, like ``OutboundURL/client``: nothing in it outlives a request.
enum PatternThreads {
    static let maximumQueued = 32
    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        return pool
    }()
    private static let inFlight = Mutex(0)

    /// `work` on the pattern threads; ``ProtocolFailure/temporarilyUnavailable`` when too many wait.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let admitted = inFlight.withLock { count -> Bool in
            guard count < maximumQueued else { return false }
            count += 1
            return true
        }
        guard admitted else { throw ProtocolFailure.temporarilyUnavailable }
        defer { inFlight.withLock { $0 -= 1 } }
        return try await pool.runIfActive(work)
    }
}
