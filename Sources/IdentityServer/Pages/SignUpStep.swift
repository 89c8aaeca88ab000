import Foundation
import Hummingbird

/// The sign-up page. With email verification (B2C's default for local accounts, SPEC §2.11) it
/// runs in three steps on one page, as B2C's does: "Send verification code" → the code from the
/// mail → "Verify code" → the password and attributes → "Create". The element ids are B2C's
/// (`email_ver_but_send`, `email_ver_input`, `email_ver_but_verify`, `continue`), so scripts
/// written against B2C's page find them. Without JavaScript each button posts the form with a
/// `step`, and the transaction keeps which address is pending or proven.
extension PageStep {
    private var offersSignUp: Bool { userFlow.type == .signUp || userFlow.type == .signUpOrSignIn }

    private func requireSignUp() throws {
        guard offersSignUp else { throw PageError(status: .notFound, title: "Not found", message: "This flow does not offer sign-up.") }
    }

    func signUpPage(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        try requireSignUp()
        var values: [String: Any] = ["title": text("signup_title"), "action": flow.pageURL("signup", record: record)]
        let current = try await flow.interaction(record.id)
        if !userFlow.emailVerification {
            values["stepDetails"] = true
            values["email"] = form["email"] ?? record.request.loginHint ?? ""
        } else if let verified = current.verifiedEmail {
            values["stepDetails"] = true
            values["verified"] = true
            values["email"] = spelling(of: verified)?.display ?? verified
        } else if let pending = current.pendingEmail {
            values["stepCode"] = true
            values["email"] = pending
            if service.configuration.developmentMailbox { values["outboxURL"] = "\(record.request.origin)/dev/outbox" }
        } else {
            values["stepEmail"] = true
            values["email"] = form["email"] ?? record.request.loginHint ?? ""
        }
        values["attributes"] = attributeFields(userFlow.signUpAttributes) { form[$0.rawValue] }
        if userFlow.type == .signUpOrSignIn { values["signInURL"] = flow.pageURL("signin", record: record) }
        if let error { values["error"] = error }
        return try page("signup", values, status: status)
    }

    /// The posted address when it is the proven one (keeping the user's spelling, e.g. case).
    private func spelling(of canonical: String) -> EmailAddress? {
        guard let posted = form["email"].flatMap(EmailAddress.init), posted.canonical == canonical else { return nil }
        return posted
    }

    /// The posted values of `list`, validated: the display name (nil when not in `list`; never
    /// empty when it is) and the other attributes over `existing` (an empty value removes one).
    /// An attribute left unchecked posts nothing: a boolean's box says "false" by its absence.
    func postedAttributes(_ list: [FlowAttribute], over existing: [String: String]) -> Result<
        (displayName: String?, attributes: [String: String]), AttributeProblem
    > {
        var attributes = existing
        var displayName: String?
        for attribute in list {
            switch attribute {
            case .builtIn(let builtIn):
                let value: String
                switch builtIn.validate(form[builtIn.rawValue] ?? "") {
                case .success(let valid): value = valid
                case .failure(let problem): return .failure(problem)
                }
                if builtIn == .displayName {
                    guard !value.isEmpty else { return .failure(AttributeProblem(message: text("error_displayName"))) }
                    displayName = value
                } else {
                    attributes[builtIn.rawValue] = value.isEmpty ? nil : value
                }
            case .custom(let name):
                // An attribute the tenant no longer declares is neither shown nor read.
                guard let declared = tenant.customAttribute(named: name) else { continue }
                let raw = form[attribute.rawValue] ?? (declared.type == .boolean ? "false" : "")
                switch declared.validate(raw) {
                case .success(let value): attributes[attribute.rawValue] = value
                case .failure(let problem): return .failure(problem)
                }
            }
        }
        return .success((displayName, attributes))
    }

    /// The page's fields for `list` with their current values: text inputs for built-in and
    /// string attributes, a number input for an int, a checkbox for a boolean.
    func attributeFields(_ list: [FlowAttribute], value: (FlowAttribute) -> String?) -> [[String: Any]] {
        list.compactMap { attribute in
            let current = value(attribute) ?? ""
            switch attribute {
            case .builtIn(let builtIn):
                return [
                    "name": builtIn.rawValue, "label": text("attribute_\(builtIn.rawValue)"), "value": current,
                    "autocomplete": builtIn.autocomplete,
                    "required": builtIn == .displayName, "inputType": "text",
                ]
            case .custom(let name):
                guard let declared = tenant.customAttribute(named: name) else { return nil }
                var field: [String: Any] = [
                    "name": attribute.rawValue, "label": declared.label, "value": current, "autocomplete": "off", "required": false,
                ]
                switch declared.type {
                case .string: field["inputType"] = "text"
                case .int: field["inputType"] = "number"
                case .boolean:
                    field["checkbox"] = true
                    field["checked"] = declared.validate(current) == .success("true")
                }
                return field
            }
        }
    }

    func signUp() async throws -> Response {
        try requireSignUp()
        guard userFlow.emailVerification else { return try await createAccount(provenEmail: nil) }
        let again = flow.pageURL("signup", record: record)
        switch form["step"] {
        case "send":
            // A re-send goes to the pending address; a first send to the one typed.
            let pending = try await flow.interaction(record.id).pendingEmail
            let typed = form["email"] ?? pending ?? ""
            guard let email = EmailAddress(typed) else {
                return try await signUpPage(error: text("error_email"), status: .badRequest)
            }
            try await service.interactions.setPendingEmail(interactionID: record.id, email: email.canonical)
            // Sent whether or not an account has the address: the page must not tell anyone that
            // it exists (the security issue's L-6). Only the mailbox's owner, who gets the code,
            // learns it, at "Create".
            guard try await takingTheSameTime({ try await sendCode(to: email.display, for: email.canonical, account: nil) }) else {
                return try await signUpPage(error: text("error_throttled"), status: .tooManyRequests)
            }
            return .redirecting(to: again, status: .seeOther)
        case "restart":
            try await service.interactions.setPendingEmail(interactionID: record.id, email: nil)
            return .redirecting(to: again, status: .seeOther)
        case "verify":
            guard let email = (try await flow.interaction(record.id)).pendingEmail else {
                return try await signUpPage(error: "Enter your email address first.", status: .badRequest)
            }
            switch try await service.interactions.checkVerificationCode(
                interactionID: record.id, tenantID: tenant.id, email: email, code: form["code"] ?? "",
                limits: service.configuration.codeLimits, now: service.now)
            {
            case .proves(account: nil): break
            case .throttled: return try await signUpPage(error: text("error_tooManyCodes"), status: .tooManyRequests)
            case .proves, .refused: return try await signUpPage(error: text("error_codeMismatch"), status: .badRequest)
            }
            try await service.interactions.setVerifiedEmail(interactionID: record.id, email: email, userID: nil)
            return .redirecting(to: again, status: .seeOther)
        default:
            guard let proven = (try await flow.interaction(record.id)).verifiedEmail else {
                return try await signUpPage(error: "Verify your email address first.", status: .badRequest)
            }
            return try await createAccount(provenEmail: proven)
        }
    }

    /// Creates the account from the details form. `provenEmail` is the canonical address a code
    /// proved in this transaction; the account gets exactly that address, whatever was posted.
    private func createAccount(provenEmail: String?) async throws -> Response {
        let password = form["newPassword"] ?? ""
        let email: EmailAddress
        if let provenEmail {
            // The form shows the proven address read-only; a posted variant of it keeps the user's
            // spelling (case), anything else is ignored.
            guard let proven = EmailAddress(provenEmail) else {
                return try await signUpPage(error: text("error_email"), status: .badRequest)
            }
            email = spelling(of: provenEmail) ?? proven
        } else {
            guard let typed = EmailAddress(form["email"] ?? "") else {
                return try await signUpPage(error: text("error_email"), status: .badRequest)
            }
            email = typed
        }
        if let problem = PasswordPolicy.problem(with: password) { return try await signUpPage(error: problem, status: .badRequest) }
        guard password == form["reenterPassword"] else {
            return try await signUpPage(
                error: text("error_passwordMismatch"),
                status: .badRequest)
        }
        let posted: (displayName: String?, attributes: [String: String])
        switch postedAttributes(userFlow.signUpAttributes, over: [:]) {
        case .success(let values): posted = values
        case .failure(let problem): return try await signUpPage(error: problem.message, status: .badRequest)
        }
        var attributes = posted.attributes
        var displayName = posted.displayName ?? String(email.display.split(separator: "@").first ?? "")
        let exists = text("error_exists")
        if try await service.users.user(tenantID: tenant.id, provider: .local, signInName: email.canonical) != nil {
            return try await signUpPage(error: exists, status: .conflict)
        }
        // B2C's "Before creating the user" connector: it sees what was collected and may change
        // it, refuse it, or block the sign-up; the account is made only after it agrees.
        let subject = ConnectorSubject(
            email: email.display, identities: [("emailAddress", tenant.name, email.display)], displayName: displayName, objectID: nil,
            attributes: attributes)
        switch try await runConnector(
            userFlow.connectors.beforeCreatingUser, step: .postAttributeCollection, subject: subject,
            form: { try await signUpPage(error: $0, status: .badRequest) })
        {
        case .respond(let response): return response
        case .proceed(let overrides):
            for (key, value) in overrides {
                if key == UserAttribute.displayName.rawValue { displayName = value } else { attributes[key] = value }
            }
        }
        // Hash first: the account is written in one insert, so a failure leaves nothing behind.
        let hash = try await service.hasher.hash(password)
        let user = UserAccount(
            tenantID: tenant.id, identityProvider: .local, signInName: email.canonical, email: email.display, displayName: displayName,
            attributes: attributes, passwordHash: hash, createdAt: service.now, emailVerified: provenEmail != nil)
        do {
            try await service.users.create(user)
        } catch UserDirectoryError.duplicate {
            return try await signUpPage(error: exists, status: .conflict)
        }
        context.logger.info("account created", metadata: ["oid": "\(user.objectID)", "email_verified": "\(user.emailVerified)"])
        return try await flow.complete(
            record, user: user, identityProvider: .local, newUser: true, authTime: service.now, request: request, context: context)
    }

    /// Runs a "send code" step in at least ``sendCodeFloor``. Why: finding an account and writing
    /// its message still cost a fraction of a millisecond more than finding none, which a patient
    /// attacker can average out (the security issue's L-6); a floor well above the step's own
    /// cost leaves nothing to measure.
    func takingTheSameTime<T>(_ body: () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        let result = try await body()
        try await Task.sleep(until: started + Self.sendCodeFloor, clock: .continuous)
        return result
    }

    static let sendCodeFloor: Duration = .milliseconds(40)

    /// Sends a 6-digit code for the canonical address `email` to `recipient` through the outbox,
    /// bound to this transaction and to `account` (a reset) or to no account (sign-up). The code
    /// is never logged: logs travel further than the outbox does. With no `recipient` (a reset
    /// for a name without an account) a code is saved that nobody gets: the same work in the same
    /// single transaction, so the time taken does not tell whether the account exists (L-6).
    /// `false`: the address has been sent its share of codes lately (``CodeLimits``); nothing sent.
    func sendCode(to recipient: String?, for email: String, account: UserAccount?) async throws -> Bool {
        let now = service.now
        let code = String(format: "%06d", Int.random(in: 0..<1_000_000))
        let mail = recipient.map { recipient in
            OutboxMessage(
                id: OutboxMessage.newID(), tenantID: tenant.id, recipient: recipient,
                subject: "\(tenant.displayName) account email verification code",
                body: "Your code is: \(code)\nIt expires in 10 minutes.", createdAt: now)
        }
        guard
            try await service.interactions.saveVerificationCode(
                interactionID: record.id, tenantID: tenant.id, email: email, userID: account?.id, code: code,
                expiresAt: now.addingTimeInterval(600), mail: mail, limits: service.configuration.codeLimits, now: now)
        else {
            context.logger.warning("verification codes throttled for an address (AADB2C90229)")
            return false
        }
        if recipient != nil {
            context.logger.info("verification code sent", metadata: ["oid": "\(account?.objectID ?? "none (sign-up)")"])
        }
        return true
    }
}
