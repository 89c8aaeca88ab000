import Foundation
import HummingbirdBcrypt
import NIOCore
import NIOPosix
import Synchronization
import WireCoding

/// Hashes and verifies passwords with bcrypt (OWASP Password Storage Cheat Sheet: cost ≥ 10) on
/// a thread pool of its own, so a burst of sign-ins can neither block the event loops nor starve
/// SQLite, which uses NIO's shared pool. Work beyond `maximumQueued` is refused at once
/// (AADB2C90035) instead of queueing without bound.
public final class PasswordHasher: Sendable {
    public enum HasherError: Error { case busy }

    public let cost: UInt8
    private let pool: BoundedThreadPool

    /// A hash of a random password, verified when the account does not exist so that the
    /// response time does not reveal which emails are registered.
    private let decoyHash: String

    public init(cost: UInt8, threads: Int = System.coreCount, maximumQueued: Int? = nil) {
        self.cost = cost
        self.pool = BoundedThreadPool(threads: threads, maximumQueued: maximumQueued ?? max(1, threads) * 64)
        self.decoyHash = Bcrypt.hash(Secrets.randomToken(byteCount: 16), cost: cost)
    }

    public func hash(_ password: String) async throws -> String {
        let cost = self.cost
        return try await run { Bcrypt.hash(password, cost: cost) }
    }

    public func verify(_ password: String, hash: String) async throws -> Bool {
        try await run { Bcrypt.verify(password, hash: hash) }
    }

    /// Spends the same time as a real verification, for unknown accounts.
    public func verifyDecoy(_ password: String) async throws {
        let decoy = decoyHash
        _ = try await run { Bcrypt.verify(password, hash: decoy) }
    }

    /// Whether a stored hash was made with a lower cost than the current setting, so it should be
    /// replaced at the next successful sign-in.
    public func needsRehash(_ hash: String) -> Bool {
        // "$2b$10$..." — the cost is the third field.
        let fields = hash.split(separator: "$")
        guard fields.count >= 2, let stored = UInt8(fields[1]) else { return true }
        return stored < cost
    }

    public func shutdown() async throws { try await pool.shutdown() }

    private func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async throws -> T {
        do {
            return try await pool.run(work)
        } catch is BoundedThreadPool.Busy {
            throw HasherError.busy
        }
    }
}

/// B2C's default "Strong" password complexity: 8–64 characters and three of lowercase,
/// uppercase, digit and symbol. bcrypt reads only 72 bytes, so longer UTF-8 is refused rather than
/// silently truncated.
package enum PasswordPolicy {
    /// Whether bcrypt sees the whole password: no NUL, at most 72 UTF-8 bytes.
    static func isHashable(_ password: String) -> Bool {
        password.utf8.count <= 72 && !password.utf8.contains(0)
    }

    package static func problem(with password: String) -> String? {
        if password.count < 8 || password.count > 64 {
            return "The password must be between 8 and 64 characters."
        }
        if !isHashable(password) {
            return "The password contains characters that cannot be used."
        }
        var classes = 0
        if password.contains(where: { $0.isLowercase }) { classes += 1 }
        if password.contains(where: { $0.isUppercase }) { classes += 1 }
        if password.contains(where: { $0.isNumber }) { classes += 1 }
        if password.contains(where: { !$0.isLetter && !$0.isNumber && !$0.isWhitespace }) { classes += 1 }
        if classes < 3 {
            return "The password must have at least 3 of the following: a lowercase letter, an uppercase letter, a digit, a symbol."
        }
        return nil
    }
}
