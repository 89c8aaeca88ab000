import Crypto
import Foundation
import Logging

/// Checks an email and password with smart lockout, for the sign-in page and ROPC alike
/// (lockout applies to ROPC too; https://learn.microsoft.com/azure/active-directory-b2c/threat-management).
package struct PasswordAuthenticator: Sendable {
    package enum Outcome: Sendable {
        case success(UserAccount)
        case invalid
        case locked
        /// The password was right, but the account is disabled (Graph's `accountEnabled`).
        case disabled
    }

    let users: any UserDirectory
    let hasher: PasswordHasher
    let lockout: LockoutPolicy
    /// Holds the key that fingerprints failed passwords.
    let secrets: any ServerSecrets
    let clock: any IdentityClock

    /// - Parameter source: where the attempt came from; failures lock that source out of the
    ///   account, not everyone (``LockoutPolicy/admit(_:global:fingerprint:now:)``).
    package func authenticate(tenantID: UUID, email: String, password: String, source: String, now: Date, logger: Logger) async throws
        -> Outcome
    {
        // bcrypt stops at a NUL and reads 72 bytes: a password it would cut short can never be
        // the stored one (PasswordPolicy refuses such passwords when they are set), so it is not
        // hashed at all — else `Passw0rd!\0anything` would sign in as `Passw0rd!`.
        let policy = lockout
        let fingerprinter = try await fingerprinter()
        let fingerprint = fingerprinter.fingerprint(password)
        guard PasswordPolicy.isHashable(password), let name = EmailAddress.canonical(email),
            let user = try await users.user(tenantID: tenantID, provider: .local, signInName: name),
            let hash = user.passwordHash
        else {
            // A name without an account is charged and locks like an account (L-6), and costs a
            // hash like a real check, so neither the answer nor its timing says which exist.
            let key = fingerprinter.fingerprint("sign-in name:" + (EmailAddress.canonical(email) ?? email))
            let admission = try await users.updateUnknownNameLockout(
                tenantID: tenantID, nameKey: key, source: source, now: now
            ) { source, global in policy.admit(source, global: global, fingerprint: fingerprint, now: now) }
            if admission == .locked {
                logger.info("sign-in refused: locked (no such account)")
                return .locked
            }
            try await hasher.verifyDecoy(password)
            logger.info("sign-in failed: no such account")
            return .invalid
        }
        // The attempt is charged before the hash is checked (LockoutPolicy.admit), so parallel
        // guesses cannot all slip under the threshold.
        guard
            let admission = try await users.updateLockout(
                id: user.id, source: source,
                { source, global in policy.admit(source, global: global, fingerprint: fingerprint, now: now) }),
            admission != .locked
        else {
            logger.info("sign-in refused: account locked", metadata: ["oid": "\(user.objectID)"])
            return .locked
        }
        guard try await hasher.verify(password, hash: hash) else {
            logger.info(
                "sign-in failed: wrong password",
                metadata: ["oid": "\(user.objectID)", "counted": "\(admission == .charged)"])
            return .invalid
        }
        // A right password gives its charge back and clears the counters. It was admitted before
        // any lock that parallel guesses set meanwhile, so it is one of the allowed attempts.
        _ = try await users.updateLockout(id: user.id, source: source) { _, _ in
            (LockoutState(), LockoutState(), ())
        }
        if hasher.needsRehash(hash) {
            // OWASP: raise the work factor transparently at the next successful sign-in.
            try await users.upgradeHash(id: user.id, hash: try await hasher.hash(password))
        }
        // Said only after the right password, as B2C does (its directory reports a disabled
        // account once the credentials check out), so it tells a guesser nothing.
        guard user.accountEnabled else {
            logger.info("sign-in refused: account disabled", metadata: ["oid": "\(user.objectID)"])
            return .disabled
        }
        return .success(user)
    }

    private func fingerprinter() async throws -> PasswordFingerprinter {
        let secret = try await secrets.serverSecret(named: "lockout-fingerprint-key", now: clock.now)
        return PasswordFingerprinter(key: SymmetricKey(data: Data(secret.utf8)))
    }

    package init(
        users: any UserDirectory,
        hasher: PasswordHasher,
        lockout: LockoutPolicy,
        secrets: any ServerSecrets,
        clock: any IdentityClock
    ) {
        self.users = users
        self.hasher = hasher
        self.lockout = lockout
        self.secrets = secrets
        self.clock = clock
    }
}
