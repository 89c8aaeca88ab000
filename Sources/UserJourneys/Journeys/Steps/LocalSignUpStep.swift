import Foundation
import Hummingbird
import IdentityDirectory
import WireCoding

/// The sign-up page (B2C's `LocalAccountSignUpWithLogonEmail`). With email verification (B2C's
/// default for local accounts, SPEC §2.11) it runs in three stages on one page, as B2C's does:
/// "Send verification code" → the code from the mail → "Verify code" → the password and
/// attributes → "Create". The element ids are B2C's (`email_ver_but_send`, `email_ver_input`,
/// `email_ver_but_verify`, `continue`), so scripts written against B2C's page find them.
/// Without JavaScript each button posts the form with a `step`, and the journey's claims keep
/// which address is pending or proven.
struct LocalSignUpStep: OrchestrationStep {
    let users: any UserDirectory
    let hasher: PasswordHasher
    let mailer: VerificationMailer
    let connector: ConnectorCall
    let extensions: PageExtensions

    let id = "LocalAccountSignUpWithLogonEmail"
    var pages: Set<HostedPage> { [.signUp] }

    func applies(to run: JourneyRun) -> Bool { run.claims.userID == nil && run.claims.selection == .signUp }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome { .interact(.redirecting(to: run.url(.signUp))) }

    /// "Already have an account? Sign in" is the first page's, which the engine goes back to.
    /// The flow's OnAttributeCollectionStart extension answers for the proven address before the
    /// details first show (without email verification the address is known only at "Create").
    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        if let proven = run.claims.verifiedEmail, let stop = try await attributeCollectionStart(&run, email: proven) { return stop }
        return .interact(try signUpPage(run))
    }

    private func attributeCollectionStart(_ run: inout JourneyRun, email: String) async throws -> StepOutcome? {
        try await extensions.attributeCollectionStart(&run, identity: email, signUp: SignUpInfo(email: email, displayName: nil, attributes: [:]))
    }

    func signUpPage(_ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok) throws -> Response {
        let form = run.form
        var values: [String: Any] = ["title": run.text("signup_title"), "action": run.url(.signUp)]
        if !run.flow.emailVerification {
            values["stepDetails"] = true
            values["email"] = form["email"] ?? run.authorization.loginHint ?? ""
        } else if let verified = run.claims.verifiedEmail {
            values["stepDetails"] = true
            values["verified"] = true
            values["email"] = spelling(of: verified, run)?.display ?? verified
        } else if let pending = run.claims.pendingEmail {
            values["stepCode"] = true
            values["email"] = pending
            if let outbox = run.outboxURL { values["outboxURL"] = outbox }
        } else {
            values["stepEmail"] = true
            values["email"] = form["email"] ?? run.authorization.loginHint ?? ""
        }
        let prefill = run.claims.verifiedEmail.flatMap { PageExtensions.prefill(run, identity: $0) }
        values["attributes"] = run.attributeFields(run.flow.signUpAttributes) { attribute in
            form[attribute.rawValue] ?? (attribute == .displayName ? prefill?.displayName : prefill?.attributes[attribute.rawValue])
        }
        if run.flow.type == .signUpOrSignIn { values["signInURL"] = run.url(.signIn) }
        if let error { values["error"] = error }
        return try run.page(.signUp, values, status: status)
    }

    /// The posted address when it is the proven one (keeping the user's spelling, e.g. case).
    private func spelling(of canonical: String, _ run: JourneyRun) -> EmailAddress? {
        guard let posted = run.form["email"].flatMap(EmailAddress.init), posted.canonical == canonical else { return nil }
        return posted
    }

    private func again(_ run: JourneyRun, _ error: String, _ status: HTTPResponse.Status) throws -> StepOutcome {
        .interact(try signUpPage(run, error: error, status: status))
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard page == .signUp else { throw JourneyEngine.notThisStep }
        guard run.flow.emailVerification else { return try await createAccount(provenEmail: nil, &run) }
        let reload = StepOutcome.interact(.redirecting(to: run.url(.signUp), status: .seeOther))
        switch run.form["step"] {
        case "send":
            // A re-send goes to the pending address; a first send to the one typed.
            guard let email = EmailAddress(run.form["email"] ?? run.claims.pendingEmail ?? "") else {
                return try again(run, run.text("error_email"), .badRequest)
            }
            run.claims.pendingEmail = email.canonical
            run.claims.verifiedEmail = nil
            // Sent whether or not an account has the address: the page must not tell anyone that
            // it exists (the security issue's L-6). Only the mailbox's owner, who gets the code,
            // learns it, at "Create".
            let current = run
            guard
                try await VerificationMailer.takingTheSameTime({
                    try await mailer.send(to: email.display, for: email.canonical, account: nil, current)
                })
            else { return try again(run, run.text("error_throttled"), .tooManyRequests) }
            return reload
        case "restart":
            run.claims.pendingEmail = nil
            run.claims.verifiedEmail = nil
            return reload
        case "verify":
            guard let email = run.claims.pendingEmail else { return try again(run, "Enter your email address first.", .badRequest) }
            switch try await mailer.check(run.form["code"] ?? "", for: email, run) {
            case .proves(account: nil): break
            case .throttled: return try again(run, run.text("error_tooManyCodes"), .tooManyRequests)
            case .proves, .refused: return try again(run, run.text("error_codeMismatch"), .badRequest)
            }
            run.claims.verifiedEmail = email
            return reload
        default:
            guard let proven = run.claims.verifiedEmail else { return try again(run, "Verify your email address first.", .badRequest) }
            return try await createAccount(provenEmail: proven, &run)
        }
    }

    /// Creates the account from the details form. `provenEmail` is the canonical address a code
    /// proved in this journey; the account gets exactly that address, whatever was posted.
    private func createAccount(provenEmail: String?, _ run: inout JourneyRun) async throws -> StepOutcome {
        let form = run.form
        let password = form["newPassword"] ?? ""
        let email: EmailAddress
        if let provenEmail {
            // The form shows the proven address read-only; a posted variant of it keeps the user's
            // spelling (case), anything else is ignored.
            guard let proven = EmailAddress(provenEmail) else { return try again(run, run.text("error_email"), .badRequest) }
            email = spelling(of: provenEmail, run) ?? proven
        } else {
            guard let typed = EmailAddress(form["email"] ?? "") else { return try again(run, run.text("error_email"), .badRequest) }
            email = typed
        }
        if let problem = run.newPasswordProblem() { return try again(run, problem, .badRequest) }
        let posted: (displayName: String?, attributes: [String: String])
        switch run.postedAttributes(run.flow.signUpAttributes, over: [:]) {
        case .success(let values): posted = values
        case .failure(let problem): return try again(run, problem.message, .badRequest)
        }
        var attributes = posted.attributes
        var displayName = posted.displayName ?? String(email.display.split(separator: "@").first ?? "")
        let exists = run.text("error_exists")
        if try await users.user(tenantID: run.tenant.id, provider: .local, signInName: email.canonical) != nil {
            return try again(run, exists, .conflict)
        }
        // The start extension answers for the address the account gets: a form posted before it
        // answered for that address (the page never shown, or another address since) waits for it.
        if let stop = try await attributeCollectionStart(&run, email: email.canonical) { return stop }
        if provenEmail == nil, let prefill = PageExtensions.prefill(run, identity: email.canonical) {
            // Without verification the form showed no prefill: the start's values fill what is empty.
            if posted.displayName == nil, let name = prefill.displayName { displayName = name }
            attributes.merge(prefill.attributes) { given, _ in given }
        }
        // External ID's OnAttributeCollectionSubmit, then B2C's connector, each on what the
        // one before left.
        switch try await extensions.attributeCollectionSubmit(
            run, signUp: SignUpInfo(email: email.display, displayName: displayName, attributes: attributes))
        {
        case .stop(let outcome): return outcome
        case .refused(let message): return try again(run, message, .badRequest)
        case .proceed(let changed?):
            displayName = changed.displayName ?? displayName
            attributes = changed.applied(to: attributes)
        case .proceed(nil): break
        }
        // B2C's "Before creating the user" connector: it sees what was collected and may change
        // it, refuse it, or block the sign-up; the account is made only after it agrees.
        let subject = ConnectorSubject(
            email: email.display, identities: [("emailAddress", run.tenant.name, email.display)], displayName: displayName,
            objectID: nil, attributes: attributes)
        let current = run
        switch try await connector.run(
            run.flow.connectors.beforeCreatingUser, step: .postAttributeCollection, subject: subject, run,
            form: { try again(current, $0, .badRequest) })
        {
        case .stop(let outcome): return outcome
        case .proceed(let overrides):
            for (key, value) in overrides {
                if key == UserAttribute.displayName.rawValue { displayName = value } else { attributes[key] = value }
            }
        }
        // Hash first: the account is written in one insert, so a failure leaves nothing behind.
        let hash = try await hasher.hash(password)
        let user = UserAccount(
            tenantID: run.tenant.id, identityProvider: .local, signInName: email.canonical, email: email.display,
            displayName: displayName, attributes: attributes, passwordHash: hash, createdAt: run.now,
            emailVerified: provenEmail != nil)
        do {
            try await users.create(user)
        } catch UserDirectoryError.duplicate {
            return try again(run, exists, .conflict)
        }
        run.logger.info("account created", metadata: ["oid": "\(user.objectID)", "email_verified": "\(user.emailVerified)"])
        run.claims.authenticated(user, by: .local, at: run.now, newUser: true)
        run.user = user
        return .next
    }
}
