import Foundation
import Hummingbird
import HummingbirdOTP
import IdentityDirectory
import TodoModels
import WireCoding

/// The flow's second factor (SPEC §2.11; B2C's MFA step): once the account is known, a flow
/// with MFA stops at `pages/mfa` until an authenticator code (enrolling one on first use) or a
/// mailed code is proven. The engine enters no step that acts for the account before this one
/// has cleared it.
struct SecondFactorStep: OrchestrationStep {
    let secondFactors: any SecondFactorStore
    let cookies: BrowserCookies

    let id = "MultiFactorAuthentication"
    var pages: Set<HostedPage> { [.secondFactor] }

    static let knownBrowserLifetime: TimeInterval = 30 * 86_400

    func applies(to run: JourneyRun) -> Bool { run.user != nil && run.flow.mfa.isOn }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        guard let user = run.user, run.claims.secondFactorClearedFor != user.id else { return .next }
        guard let method = try await needed(for: user, run) else {
            run.claims.secondFactorClearedFor = user.id
            return .next
        }
        guard run.authorization.prompt != .silent else { return .fail(.noSession) }
        // A grant without pages cannot ask for it: Entra's AADSTS50076 (`basic_action`).
        guard run.pagesAllowed else { return .fail(.multiFactorRequired) }
        var secret: String?
        if method == .totp, !(try await secondFactors.hasAuthenticator(userID: user.id)) {
            // 20 random bytes as base64url text: the HMAC key is that text's bytes (160 bits of
            // entropy, RFC 4226 §4's recommended size).
            secret = Secrets.randomToken(byteCount: 20)
        }
        let pending = PendingSignIn(
            userID: user.id, identityProvider: run.claims.identityProvider ?? user.identityProvider, newUser: run.claims.newUser,
            authTime: run.claims.authTime ?? run.now, method: method)
        try await secondFactors.startChallenge(interactionID: run.record.id, pending: pending, enrolmentSecret: secret, now: run.now)
        return .interact(.redirecting(to: run.url(.secondFactor), status: .seeOther))
    }

    /// The second factor `user` still needs, or nil: none when the kept SSO session was backed
    /// by one, or (`conditional`) the browser passed one for this account before.
    private func needed(for user: UserAccount, _ run: JourneyRun) async throws -> MFAPolicy.Method? {
        let flow = run.flow
        if run.claims.sessionHash != nil, run.claims.sessionHasSecondFactor { return nil }
        if flow.mfa.enforcement == .conditional, let token = run.request.cookies[TransactionCookies.knownBrowser(for: run.tenant)]?.value,
            token.count == 43, try await secondFactors.isKnownBrowser(token: token, userID: user.id, now: run.now)
        {
            return nil
        }
        let methods = flow.mfa.methods
        // An enrolled authenticator is used whenever the flow offers it; mail only when it is
        // offered and the account has an address of its own (a provider's unproven one is not).
        if methods.contains(.totp),
            try await secondFactors.hasAuthenticator(userID: user.id) || !methods.contains(.email) || user.presentableEmail == nil
        {
            return .totp
        }
        guard user.presentableEmail != nil else {
            throw PageError(
                status: .forbidden, title: "Verification not possible",
                message: "This account has no email address to send a verification code to. Contact the application's support.")
        }
        return .email
    }

    private func challenge(_ run: JourneyRun) async throws -> (SecondFactorChallenge, UserAccount) {
        guard let user = run.user, let challenge = try await secondFactors.challenge(interactionID: run.record.id),
            challenge.pending.userID == user.id
        else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in before entering a verification code.")
        }
        return (challenge, user)
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        .interact(try await secondFactorPage(run))
    }

    private func secondFactorPage(_ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let (challenge, user) = try await challenge(run)
        var values: [String: Any] = ["action": run.url(.secondFactor), "account": user.email ?? user.displayName]
        switch challenge.pending.method {
        case .totp:
            values["totp"] = true
            values["title"] = run.text("mfa_codeTitle")
            if let secret = challenge.enrolmentSecret {
                let uri = TOTP(secret: secret).createAuthenticatorURL(
                    label: "\(run.tenant.displayName):\(user.email ?? user.displayName)", issuer: run.tenant.displayName)
                values["title"] = run.text("mfa_enrolTitle")
                values["enrol"] = true
                values["otpauthURI"] = uri
                // A URI too long for the largest code drawn here leaves the key and the link.
                values["qrSVG"] = try? QRCode(text: uri).svg()
                // The key as the URI carries it (base32), in groups of four for typing.
                let base32 = URLComponents(string: uri)?.queryItems?.first { $0.name == "secret" }?.value ?? ""
                values["secret"] = stride(from: 0, to: base32.count, by: 4).map { start in
                    String(base32.dropFirst(start).prefix(4))
                }.joined(separator: " ")
            }
        case .email:
            values["email"] = true
            values["title"] = run.text("mfa_emailTitle")
            values["address"] = user.email ?? ""
            values["codeSent"] = (challenge.codeExpiresAt.map { $0 > run.now }) ?? false
            if let outbox = run.outboxURL { values["outboxURL"] = outbox }
        }
        if let error { values["error"] = error }
        return try run.page(.secondFactor, values, status: status)
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        let (challenge, user) = try await challenge(run)
        if run.form["step"] == "send", challenge.pending.method == .email, let address = user.presentableEmail {
            let code = String(format: "%06d", Int.random(in: 0..<1_000_000))
            let mail = OutboxMessage(
                id: OutboxMessage.newID(), tenantID: run.tenant.id, recipient: address,
                subject: "\(run.tenant.displayName) verification code", body: "Your code is: \(code)\nIt expires in 10 minutes.",
                createdAt: run.now)
            guard
                try await secondFactors.saveEmailCode(
                    interactionID: run.record.id, code: code, now: run.now, expiresAt: run.now.addingTimeInterval(600), mail: mail)
            else {
                return .interact(
                    try await secondFactorPage(
                        run, error: "Please wait a moment before asking for another code (at most five per sign-in).",
                        status: .tooManyRequests))
            }
            run.logger.info("second-factor code sent", metadata: ["oid": "\(user.objectID)"])
            return .interact(.redirecting(to: run.url(.secondFactor), status: .seeOther))
        }
        // A try is taken before the code is looked at, so parallel guesses count as well.
        guard try await secondFactors.takeTry(interactionID: run.record.id, userID: user.id, now: run.now) else {
            run.logger.warning("second-factor tries used up", metadata: ["oid": "\(user.objectID)"])
            return .fail(.tooManySecondFactorTries)
        }
        let code = TextRules.trimmed(run.form["code"] ?? "")
        let accepted: Bool
        switch challenge.pending.method {
        case .totp: accepted = try await verifyAuthenticatorCode(code, challenge: challenge, user: user, now: run.now)
        case .email: accepted = try await secondFactors.emailCodeMatches(interactionID: run.record.id, code: code, now: run.now)
        }
        guard accepted else {
            run.logger.info("second-factor code refused", metadata: ["oid": "\(user.objectID)"])
            return .interact(try await secondFactorPage(run, error: run.text("error_codeMismatch"), status: .badRequest))
        }
        try await secondFactors.succeeded(interactionID: run.record.id, userID: user.id)
        run.logger.info("second factor passed", metadata: ["oid": "\(user.objectID)", "method": "\(challenge.pending.method)"])
        run.claims.secondFactorClearedFor = user.id
        run.claims.secondFactorPassedNow = true
        if run.flow.mfa.enforcement == .conditional {
            let token = Secrets.randomToken()
            try await secondFactors.rememberBrowser(
                token: token, userID: user.id, expiresAt: run.now.addingTimeInterval(Self.knownBrowserLifetime))
            run.cookies.append(
                cookies.cookie(TransactionCookies.knownBrowser(for: run.tenant), value: token, maxAge: Int(Self.knownBrowserLifetime)))
        }
        return .next
    }

    /// RFC 6238 with one step either side (§5.2's network delay allowance); a code's step is
    /// recorded as used, so the same code (or an earlier one) never works twice.
    private func verifyAuthenticatorCode(_ code: String, challenge: SecondFactorChallenge, user: UserAccount, now: Date) async throws
        -> Bool
    {
        guard code.count == 6, code.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
        let enrolling = challenge.enrolmentSecret
        let secret: String
        if let enrolling {
            secret = enrolling
        } else if let enrolled = try await secondFactors.authenticatorSecret(userID: user.id) {
            secret = enrolled
        } else {
            return false
        }
        let totp = TOTP(secret: secret)
        let current = Int64(now.timeIntervalSince1970) / 30
        var matched: Int64?
        for step in (current - 1)...(current + 1) {
            let expected = String(format: "%06d", totp.compute(date: Date(timeIntervalSince1970: TimeInterval(step * 30))))
            if Secrets.constantTimeEquals(expected, code) { matched = step }
        }
        guard let matched else { return false }
        if let enrolling { return try await secondFactors.enrol(userID: user.id, secret: enrolling, step: matched, now: now) }
        return try await secondFactors.useStep(matched, userID: user.id)
    }
}
