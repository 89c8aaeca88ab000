import Foundation
import IdentityDirectory
import TrustFramework

/// Where a custom policy's patterns and predicates are matched: two threads of their own, off the
/// event loops (a backtracking pattern would stall every request on its loop) and off NIO's
/// shared pool (which SQLite uses), as bcrypt has its own (``PasswordHasher``). At most
/// ``maximumQueued`` submissions wait; beyond that a submission is answered "try again later" at
/// once. Process-lifetime, like ``OutboundURL/client``: nothing in it outlives a request.
enum PatternThreads {
    static let maximumQueued = 32
    private static let pool = BoundedThreadPool(threads: 2, maximumQueued: maximumQueued)

    /// `work` on the pattern threads; ``ProtocolFailure/temporarilyUnavailable`` when too many wait.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await pool.run(work)
        } catch is BoundedThreadPool.Busy {
            throw ProtocolFailure.temporarilyUnavailable
        }
    }
}
