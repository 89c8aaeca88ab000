import Crypto
import Foundation
import WireCoding

/// The stored smart-lockout counters of an account.
public struct LockoutState: Sendable, Equatable {
    public var failedAttempts: Int
    public var lockoutCount: Int
    public var lockedUntil: Date?
    /// A keyed fingerprint of the last wrong password, so the same wrong password twice counts once.
    public var lastFailedFingerprint: String?

    public init(failedAttempts: Int = 0, lockoutCount: Int = 0, lockedUntil: Date? = nil, lastFailedFingerprint: String? = nil) {
        self.failedAttempts = failedAttempts
        self.lockoutCount = lockoutCount
        self.lockedUntil = lockedUntil
        self.lastFailedFingerprint = lastFailedFingerprint
    }

    public func isLocked(at now: Date) -> Bool { lockedUntil.map { $0 > now } ?? false }

    /// The state from its stored columns (epoch seconds).
    init(stored failedAttempts: Int64, _ lockoutCount: Int64, lockedUntil: Int64?, fingerprint: String?) {
        self.init(
            failedAttempts: Int(failedAttempts), lockoutCount: Int(lockoutCount),
            lockedUntil: lockedUntil.map { Date(timeIntervalSince1970: TimeInterval($0)) }, lastFailedFingerprint: fingerprint)
    }
}

/// B2C's smart lockout (https://learn.microsoft.com/azure/active-directory-b2c/threat-management): 10 failures lock the account for a
/// minute; once an account has been locked, each further failure locks it again; the first 10
/// lockouts last one minute and every further 10 double the period, up to 5 hours; repeating the
/// same wrong password does not count; a successful sign-in resets everything.
public struct LockoutPolicy: Sendable, Equatable {
    public var threshold: Int
    public var duration: TimeInterval
    public var maximumDuration: TimeInterval

    public static let `default` = LockoutPolicy(threshold: 10, duration: 60, maximumDuration: 5 * 3600)

    public init(threshold: Int, duration: TimeInterval, maximumDuration: TimeInterval) {
        self.threshold = threshold
        self.duration = duration
        self.maximumDuration = maximumDuration
    }

    /// How long the `lockoutNumber`-th lockout lasts (1-based).
    public func lockoutDuration(forLockout lockoutNumber: Int) -> TimeInterval {
        let doublings = max(0, (lockoutNumber - 1) / 10)
        let seconds = duration * pow(2, Double(min(doublings, 30)))
        return min(seconds, maximumDuration)
    }

    /// What an attempt may do, decided before its password is hashed.
    public enum Admission: Sendable, Equatable {
        /// Locked: refused without looking at the password, the same answer whether or not it is right.
        case locked
        /// Counted as a failure in advance; a right password gives it back (``afterSuccess(_:)``).
        case charged
        /// The same password as the last wrong one: it is checked but not counted again.
        case repeated
    }

    /// Admits one attempt with the password whose fingerprint is `fingerprint`, charging it
    /// against the threshold *before* the password is checked, in the same atomic step that
    /// reads the state. Why: guesses sent in parallel would otherwise all read "not locked" and all
    /// be checked (the security issue's M-1); charged in advance, at most `threshold` of them
    /// reach the hash and the rest are refused as locked, the right password among them.
    public func admit(_ state: LockoutState, fingerprint: String, now: Date) -> (LockoutState, Admission) {
        if state.isLocked(at: now) { return (state, .locked) }
        if let last = state.lastFailedFingerprint, Secrets.constantTimeEquals(last, fingerprint) { return (state, .repeated) }
        return (afterFailure(state, fingerprint: fingerprint, now: now), .charged)
    }

    /// ``admit(_:fingerprint:now:)`` for one source of attempts (an IP address) and the account
    /// as a whole. The lock falls on the failing source, as B2C's smart lockout does: whoever
    /// guesses from one place cannot lock the owner out everywhere (the security issue's L-7).
    /// The account-wide counter, at ``global`` (ten times the threshold), still stops guessing
    /// spread over many sources (OWASP ASVS 2.2.1: at most 100 failures an hour).
    public func admit(_ source: LockoutState, global: LockoutState, fingerprint: String, now: Date) -> (
        LockoutState, LockoutState, Admission
    ) {
        if global.isLocked(at: now) { return (source, global, .locked) }
        let (nextSource, admission) = admit(source, fingerprint: fingerprint, now: now)
        guard admission == .charged else { return (nextSource, global, admission) }
        return (nextSource, self.global.afterFailure(global, fingerprint: fingerprint, now: now), .charged)
    }

    /// The account-wide policy: ten times the threshold, the same durations.
    public var global: LockoutPolicy {
        LockoutPolicy(threshold: threshold * 10, duration: duration, maximumDuration: maximumDuration)
    }

    /// The state after a wrong password whose fingerprint is `fingerprint`.
    public func afterFailure(_ state: LockoutState, fingerprint: String, now: Date) -> LockoutState {
        var next = state
        if let last = state.lastFailedFingerprint, Secrets.constantTimeEquals(last, fingerprint) {
            return next
        }
        next.lastFailedFingerprint = fingerprint
        next.failedAttempts += 1
        // After a first lockout, one more failure is enough to lock again.
        let limit = state.lockoutCount > 0 ? 1 : threshold
        if next.failedAttempts >= limit {
            next.lockoutCount += 1
            next.failedAttempts = 0
            next.lockedUntil = now.addingTimeInterval(lockoutDuration(forLockout: next.lockoutCount))
        }
        return next
    }

    /// The state after a correct password: counters cleared.
    public func afterSuccess(_ state: LockoutState) -> LockoutState { LockoutState() }
}

/// Fingerprints a wrong password with a server-held key (HMAC-SHA256, truncated), so the store
/// never holds the password or an unkeyed hash of it.
struct PasswordFingerprinter: Sendable {
    let key: SymmetricKey

    func fingerprint(_ password: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data(password.utf8), using: key)
        return Data(mac).prefix(12).base64EncodedString()
    }
}
