import Foundation
import IdentityDirectory

/// Sends the 6-digit codes that prove an address (sign-up and password reset), through the
/// outbox or the flow's OnOtpSend extension, within the per-address limits (``CodeLimits``).
struct VerificationMailer: Sendable {
    let interactions: any InteractionStore
    let limits: CodeLimits
    let extensions: PageExtensions

    /// Runs a "send code" step in at least ``sendCodeFloor``. Why: finding an account and writing
    /// its message still cost a fraction of a millisecond more than finding none, which a patient
    /// attacker can average out (the security issue's L-6); a floor well above the step's own
    /// cost leaves nothing to measure.
    static func takingTheSameTime<T>(_ body: () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        // A failure (an OnOtpSend extension's) waits out the floor too.
        try await Task.sleep(until: started + sendCodeFloor, clock: .continuous)
        return try result.get()
    }

    static let sendCodeFloor: Duration = .milliseconds(40)

    /// Sends a code for the canonical address `email` to `recipient` through the outbox, bound to
    /// the transaction and to `account` (a reset) or to no account (sign-up). The code is never
    /// logged: logs travel further than the outbox does. With no `recipient` (a reset for a name
    /// without an account) a code is saved that nobody gets: the same work in the same single
    /// transaction, so the time taken does not tell whether the account exists (L-6).
    /// With the flow's OnOtpSend extension the code goes to it instead (SPEC §2.15), for the
    /// address typed even where no account has it: a call made for some addresses only would
    /// take time that tells which.
    /// `false`: the address has been sent its share of codes lately; nothing sent.
    func send(to recipient: String?, for email: String, account: UserAccount?, _ run: JourneyRun) async throws -> Bool {
        let now = run.now
        let code = String(format: "%06d", Int.random(in: 0..<1_000_000))
        let otpSend = try extensions.otpExtension(run)
        let mail = otpSend != nil ? nil : recipient.map { recipient in
            OutboxMessage(
                id: OutboxMessage.newID(), tenantID: run.tenant.id, recipient: recipient,
                subject: "\(run.tenant.displayName) account email verification code",
                body: "Your code is: \(code)\nIt expires in 10 minutes.", createdAt: now)
        }
        guard
            try await interactions.saveVerificationCode(
                interactionID: run.record.id, tenantID: run.tenant.id, email: email, userID: account?.id, code: code,
                expiresAt: now.addingTimeInterval(600), mail: mail, limits: limits, now: now)
        else {
            run.logger.warning("verification codes throttled for an address (AADB2C90229)")
            return false
        }
        if let otpSend {
            let requestType = recipient != nil && account == nil ? "signUp" : "passwordReset"
            try await extensions.otpSend(otpSend, run, recipient: recipient ?? email, code: code, requestType: requestType)
        }
        if recipient != nil {
            run.logger.info("verification code sent", metadata: ["oid": "\(account?.objectID ?? "none (sign-up)")"])
        }
        return true
    }

    func check(_ code: String, for email: String, _ run: JourneyRun) async throws -> CodeCheck {
        try await interactions.checkVerificationCode(
            interactionID: run.record.id, tenantID: run.tenant.id, email: email, code: code, limits: limits, now: run.now)
    }
}
