import Foundation
import Hummingbird
import HummingbirdOTP
import TodoModels
import WireCoding

/// The second factor of a sign-in (SPEC §2.11): after the first factor, a flow with MFA stops
/// at `pages/mfa` until an authenticator code (enrolling one on first use) or a mailed code is
/// proven; then the sign-in finishes as it would have.
extension InteractionFlow {
    /// The browser cookie of `conditional` MFA: a random token the store knows per account.
    static func knownBrowserCookie(for tenant: Tenant) -> String { "x-ms-cpim-mfa-\(tenant.guid)" }

    static let knownBrowserLifetime: TimeInterval = 30 * 86_400

    /// The second factor this sign-in still needs, or nil: none when the flow has no MFA, the
    /// kept SSO session was backed by one, or (`conditional`) the browser passed one for this
    /// account before.
    func secondFactorNeeded(
        flow: UserFlow, user: UserAccount, session: SessionUse, request: Request, tenant: Tenant, record: InteractionRecord
    ) async throws -> MFAPolicy.Method? {
        guard flow.mfa.isOn, record.secondFactorUserID != user.id else { return nil }
        if case .existing(let id) = session,
            let held = try await service.interactions.session(idHash: Secrets.sha256Hex(id), now: service.now), held.secondFactor
        {
            return nil
        }
        if flow.mfa.enforcement == .conditional, let token = request.cookies[Self.knownBrowserCookie(for: tenant)]?.value,
            token.count == 43, try await service.secondFactors.isKnownBrowser(token: token, userID: user.id, now: service.now)
        {
            return nil
        }
        let methods = flow.mfa.methods
        // An enrolled authenticator is used whenever the flow offers it; mail only when it is
        // offered and the account has an address of its own (a provider's unproven one is not).
        if methods.contains(.totp),
            try await service.secondFactors.hasAuthenticator(userID: user.id) || !methods.contains(.email)
                || user.presentableEmail == nil
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

    /// The gate every path passes once it knows who the user is, before anything is done for
    /// them (a profile saved, a password set, a consent page, a code): nil to go on; else the
    /// response asking for the second factor, which then continues with `next`. Under
    /// `prompt=none` the app gets AADB2C90077 instead of a page.
    func secondFactorGate(
        _ record: InteractionRecord, user: UserAccount, identityProvider: IdentityProviderKind, newUser: Bool, authTime: Date,
        session: SessionUse, next: AfterSecondFactor, request: Request, context: some IdentityContext
    ) async throws -> Response? {
        let (tenant, userFlow) = try await tenantAndFlow(of: record)
        guard
            let method = try await secondFactorNeeded(
                flow: userFlow, user: user, session: session, request: request, tenant: tenant, record: record)
        else { return nil }
        if record.request.prompt == .silent { return try await fail(record, with: .noSession, context: context) }
        return try await requireSecondFactor(
            method, record: record, user: user, identityProvider: identityProvider, newUser: newUser, authTime: authTime, next: next)
    }

    /// Whether the pending user of `record` may use a page that needs the flow's second factor
    /// behind it: passed in this transaction, or backed by the browser's session or cookie.
    func secondFactorSatisfied(record: InteractionRecord, user: UserAccount, userFlow: UserFlow, request: Request, tenant: Tenant)
        async throws -> Bool
    {
        let held = try await sessions(from: request, tenant: tenant).first { $0.user.id == user.id }
        let session: SessionUse = held.map { .existing(id: $0.id) } ?? .start
        return try await secondFactorNeeded(flow: userFlow, user: user, session: session, request: request, tenant: tenant, record: record)
            == nil
    }

    /// Stops the sign-in for `method`: the challenge remembers how to finish it, and an account
    /// without an authenticator is offered a new secret to enrol.
    func requireSecondFactor(
        _ method: MFAPolicy.Method, record: InteractionRecord, user: UserAccount, identityProvider: IdentityProviderKind,
        newUser: Bool, authTime: Date, next: AfterSecondFactor = .complete
    ) async throws -> Response {
        var secret: String?
        if method == .totp, !(try await service.secondFactors.hasAuthenticator(userID: user.id)) {
            // 20 random bytes as base64url text: the HMAC key is that text's bytes (160 bits of
            // entropy, RFC 4226 §4's recommended size).
            secret = Secrets.randomToken(byteCount: 20)
        }
        let pending = PendingSignIn(
            userID: user.id, identityProvider: identityProvider, newUser: newUser, authTime: authTime, method: method, next: next)
        try await service.secondFactors.startChallenge(
            interactionID: record.id, pending: pending, enrolmentSecret: secret, now: service.now)
        return .redirecting(to: pageURL("mfa", record: record), status: .seeOther)
    }
}

extension PageStep {
    private func challenge() async throws -> (SecondFactorChallenge, UserAccount) {
        guard let challenge = try await service.secondFactors.challenge(interactionID: record.id),
            let user = try await service.users.user(id: challenge.pending.userID)
        else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in before entering a verification code.")
        }
        return (challenge, user)
    }

    func secondFactorPage(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        // The page may show an enrolment secret: only to the browser that started the sign-in.
        try flow.requireStartingBrowser(request, record: record)
        let (challenge, user) = try await challenge()
        var values: [String: Any] = ["action": flow.pageURL("mfa", record: record), "account": user.email ?? user.displayName]
        switch challenge.pending.method {
        case .totp:
            values["totp"] = true
            values["title"] = text("mfa_codeTitle")
            if let secret = challenge.enrolmentSecret {
                let uri = TOTP(secret: secret).createAuthenticatorURL(
                    label: "\(tenant.displayName):\(user.email ?? user.displayName)", issuer: tenant.displayName)
                values["title"] = text("mfa_enrolTitle")
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
            values["title"] = text("mfa_emailTitle")
            values["address"] = user.email ?? ""
            values["codeSent"] = (challenge.codeExpiresAt.map { $0 > service.now }) ?? false
            if service.configuration.developmentMailbox { values["outboxURL"] = "\(record.request.origin)/dev/outbox" }
        }
        if let error { values["error"] = error }
        return try page("mfa", values, status: status)
    }

    func secondFactor() async throws -> Response {
        let (challenge, user) = try await challenge()
        let again = flow.pageURL("mfa", record: record)
        if form["step"] == "send", challenge.pending.method == .email, let address = user.presentableEmail {
            let code = String(format: "%06d", Int.random(in: 0..<1_000_000))
            let mail = OutboxMessage(
                id: OutboxMessage.newID(), tenantID: tenant.id, recipient: address, subject: "\(tenant.displayName) verification code",
                body: "Your code is: \(code)\nIt expires in 10 minutes.", createdAt: service.now)
            guard
                try await service.secondFactors.saveEmailCode(
                    interactionID: record.id, code: code, now: service.now, expiresAt: service.now.addingTimeInterval(600), mail: mail)
            else {
                return try await secondFactorPage(
                    error: "Please wait a moment before asking for another code (at most five per sign-in).", status: .tooManyRequests)
            }
            context.logger.info("second-factor code sent", metadata: ["oid": "\(user.objectID)"])
            return .redirecting(to: again, status: .seeOther)
        }
        // A try is taken before the code is looked at, so parallel guesses count as well.
        guard try await service.secondFactors.takeTry(interactionID: record.id, userID: user.id, now: service.now) else {
            context.logger.warning("second-factor tries used up", metadata: ["oid": "\(user.objectID)"])
            return try await flow.fail(record, with: .tooManySecondFactorTries, context: context)
        }
        let code = TextRules.trimmed(form["code"] ?? "")
        let accepted: Bool
        switch challenge.pending.method {
        case .totp: accepted = try await verifyAuthenticatorCode(code, challenge: challenge, user: user)
        case .email: accepted = try await service.secondFactors.emailCodeMatches(interactionID: record.id, code: code, now: service.now)
        }
        guard accepted else {
            context.logger.info("second-factor code refused", metadata: ["oid": "\(user.objectID)"])
            return try await secondFactorPage(
                error: text("error_codeMismatch"),
                status: .badRequest)
        }
        try await service.secondFactors.succeeded(interactionID: record.id, userID: user.id)
        context.logger.info("second factor passed", metadata: ["oid": "\(user.objectID)", "method": "\(challenge.pending.method)"])
        let pending = challenge.pending
        var response: Response
        switch pending.next ?? .complete {
        case .complete:
            response = try await flow.complete(
                record, user: user, identityProvider: pending.identityProvider, newUser: pending.newUser, authTime: pending.authTime,
                secondFactorPassed: true, request: request, context: context)
        case .profile, .changePassword, .reset:
            // The page after the factor; it checks the transaction's proof before it acts.
            try await service.interactions.setSecondFactorPassed(interactionID: record.id, userID: user.id)
            let page: String
            switch pending.next {
            case .profile: page = "profile"
            case .changePassword: page = "changepassword"
            default: page = "reset"
            }
            if pending.next != .reset { try await service.interactions.setPendingUser(interactionID: record.id, userID: user.id) }
            response = .redirecting(to: flow.pageURL(page, record: record), status: .seeOther)
        }
        if userFlow.mfa.enforcement == .conditional {
            let token = Secrets.randomToken()
            try await service.secondFactors.rememberBrowser(
                token: token, userID: user.id, expiresAt: service.now.addingTimeInterval(InteractionFlow.knownBrowserLifetime))
            response.setCookie(
                flow.cookie(
                    InteractionFlow.knownBrowserCookie(for: tenant), value: token, maxAge: Int(InteractionFlow.knownBrowserLifetime)))
        }
        return response
    }

    /// RFC 6238 with one step either side (§5.2's network delay allowance); a code's step is
    /// recorded as used, so the same code (or an earlier one) never works twice.
    private func verifyAuthenticatorCode(_ code: String, challenge: SecondFactorChallenge, user: UserAccount) async throws -> Bool {
        guard code.count == 6, code.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
        let enrolling = challenge.enrolmentSecret
        let secret: String
        if let enrolling {
            secret = enrolling
        } else if let enrolled = try await service.secondFactors.authenticatorSecret(userID: user.id) {
            secret = enrolled
        } else {
            return false
        }
        let totp = TOTP(secret: secret)
        let current = Int64(service.now.timeIntervalSince1970) / 30
        var matched: Int64?
        for step in (current - 1)...(current + 1) {
            let expected = String(format: "%06d", totp.compute(date: Date(timeIntervalSince1970: TimeInterval(step * 30))))
            if Secrets.constantTimeEquals(expected, code) { matched = step }
        }
        guard let matched else { return false }
        if let enrolling {
            return try await service.secondFactors.enrol(userID: user.id, secret: enrolling, step: matched, now: service.now)
        }
        return try await service.secondFactors.useStep(matched, userID: user.id)
    }
}
