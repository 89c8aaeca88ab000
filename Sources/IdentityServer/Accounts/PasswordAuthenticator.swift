import Crypto
import Foundation
import Logging

/// Checks an email and password with smart lockout, for the sign-in page and ROPC alike
/// (lockout applies to ROPC too; research/b2c-protocol.md §5.2).
struct PasswordAuthenticator: Sendable {
    enum Outcome: Sendable {
        case success(UserAccount)
        case invalid
        case locked
    }

    let service: IdentityService

    func authenticate(tenantID: UUID, email: String, password: String, now: Date, logger: Logger) async throws -> Outcome {
        let name = EmailAddress.normalized(email)
        guard let user = try await service.users.user(tenantID: tenantID, provider: .local, signInName: name),
            let hash = user.passwordHash
        else {
            // Same cost as a real check, so timing does not reveal which emails exist.
            try await service.hasher.verifyDecoy(password)
            logger.info("sign-in failed: no such account")
            return .invalid
        }
        // A locked account is refused before the password is looked at, so guessing stops paying.
        if user.lockout.isLocked(at: now) {
            logger.info("sign-in refused: account locked", metadata: ["oid": "\(user.objectID)"])
            return .locked
        }
        let policy = service.configuration.lockout
        guard try await service.hasher.verify(password, hash: hash) else {
            let fingerprint = try await fingerprinter().fingerprint(password)
            let state = try await service.users.updateLockout(id: user.id) { policy.afterFailure($0, fingerprint: fingerprint, now: now) }
            logger.info(
                "sign-in failed: wrong password",
                metadata: ["oid": "\(user.objectID)", "failed_attempts": "\(state.failedAttempts)", "locked": "\(state.isLocked(at: now))"])
            return .invalid
        }
        // Guesses made in parallel all passed the check above; if they locked the account while
        // this one was hashing, even a right password is refused now.
        let state = try await service.users.updateLockout(id: user.id) { current in
            if current.isLocked(at: now) { return current }
            return policy.afterSuccess(current)
        }
        if state.isLocked(at: now) {
            logger.info("sign-in refused: account locked during the attempt", metadata: ["oid": "\(user.objectID)"])
            return .locked
        }
        if service.hasher.needsRehash(hash) {
            // OWASP: raise the work factor transparently at the next successful sign-in.
            try await service.users.upgradeHash(id: user.id, hash: try await service.hasher.hash(password))
        }
        return .success(user)
    }

    private func fingerprinter() async throws -> PasswordFingerprinter {
        let secret = try await service.interactions.serverSecret(named: "lockout-fingerprint-key", now: service.now)
        return PasswordFingerprinter(key: SymmetricKey(data: Data(secret.utf8)))
    }
}
