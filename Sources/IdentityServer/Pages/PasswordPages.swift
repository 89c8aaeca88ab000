import Foundation
import Hummingbird

/// The password pages of a transaction: the reset flow (a code to the address, then a new
/// password) and the forced change of an operator's temporary password.
extension PageStep {
    // MARK: Password reset (verify the email with a code, then set a new password)

    func resetPage(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        guard userFlow.type == .passwordReset else {
            throw PageError(status: .notFound, title: "Not found", message: "This flow does not reset passwords.")
        }
        let current = try await flow.interaction(record.id)
        var values: [String: Any] = ["title": text("reset_title"), "action": flow.pageURL("reset", record: record)]
        if let verified = current.verifiedEmail {
            values["stepPassword"] = true
            values["email"] = verified
        } else if let pending = current.pendingEmail {
            values["stepCode"] = true
            values["email"] = pending
            if service.configuration.developmentMailbox { values["outboxURL"] = "\(record.request.origin)/dev/outbox" }
        } else {
            values["stepEmail"] = true
            values["email"] = form["email"] ?? record.request.loginHint ?? ""
        }
        if let error { values["error"] = error }
        return try page("reset", values, status: status)
    }

    func reset() async throws -> Response {
        guard userFlow.type == .passwordReset else {
            throw PageError(status: .notFound, title: "Not found", message: "This flow does not reset passwords.")
        }
        let now = service.now
        switch form["step"] {
        case "send":
            guard let email = EmailAddress(form["email"] ?? "") else {
                return try await resetPage(error: text("error_email"), status: .badRequest)
            }
            try await service.interactions.setPendingEmail(interactionID: record.id, email: email.canonical)
            // The page says the same whether or not the account exists, so it cannot be used to
            // discover accounts; only an existing account gets a code. The code is bound to that
            // account and goes to the address the account holds, not to the text typed here.
            let sent = try await takingTheSameTime {
                let user = try await service.users.user(tenantID: tenant.id, provider: .local, signInName: email.canonical)
                return try await sendCode(to: user.map { $0.email ?? email.display }, for: email.canonical, account: user)
            }
            // Counted alike with or without an account, so this says nothing about one either.
            guard sent else { return try await resetPage(error: text("error_throttled"), status: .tooManyRequests) }
            return .redirecting(to: flow.pageURL("reset", record: record), status: .seeOther)
        case "restart":
            try await service.interactions.setPendingEmail(interactionID: record.id, email: nil)
            return .redirecting(to: flow.pageURL("reset", record: record), status: .seeOther)
        case "verify":
            guard let email = record.pendingEmail else {
                return try await resetPage(error: "Enter your email address first.", status: .badRequest)
            }
            // Only a code bound to an account resets (a code saved before the binding existed
            // binds to nothing and proves nothing here).
            let account: UUID
            switch try await service.interactions.checkVerificationCode(
                interactionID: record.id, tenantID: tenant.id, email: email, code: form["code"] ?? "",
                limits: service.configuration.codeLimits, now: now)
            {
            case .proves(let bound?): account = bound
            case .throttled: return try await resetPage(error: text("error_tooManyCodes"), status: .tooManyRequests)
            case .proves(nil), .refused:
                return try await resetPage(error: "That code is incorrect or has expired. Please try again.", status: .badRequest)
            }
            try await service.interactions.setVerifiedEmail(interactionID: record.id, email: email, userID: account)
            // A flow with MFA asks for the second factor before the new password can be set.
            if let user = try await service.users.user(id: account),
                let ask = try await flow.secondFactorGate(
                    try await flow.interaction(record.id), user: user, identityProvider: .local, newUser: false, authTime: now,
                    session: .start, next: .reset, request: request, context: context)
            {
                return ask
            }
            return .redirecting(to: flow.pageURL("reset", record: record), status: .seeOther)
        case "change":
            // The account the verified code was bound to, and only while it still has the
            // verified address: never a second lookup by the text the user typed.
            guard let email = record.verifiedEmail, let userID = record.pendingUserID,
                let user = try await service.users.user(id: userID),
                user.tenantID == tenant.id, user.identityProvider == .local, user.signInName == email
            else { return try await resetPage(error: "Verify your email address first.", status: .badRequest) }
            guard try await flow.secondFactorSatisfied(record: record, user: user, userFlow: userFlow, request: request, tenant: tenant)
            else { return try await resetPage(error: "Verify it's you with your second factor first.", status: .forbidden) }
            let password = form["newPassword"] ?? ""
            if let problem = PasswordPolicy.problem(with: password) { return try await resetPage(error: problem, status: .badRequest) }
            guard password == form["reenterPassword"] else {
                return try await resetPage(
                    error: text("error_passwordMismatch"),
                    status: .badRequest)
            }
            // Setting the password also unlocks the account and revokes existing refresh
            // tokens (research/b2c-protocol.md §2.3, §5.5).
            try await service.users.setPassword(
                id: user.id, hash: try await service.hasher.hash(password), emailProven: true, forceChange: false, now: now)
            context.logger.info("password reset", metadata: ["oid": "\(user.objectID)"])
            return try await flow.complete(
                record, user: user, identityProvider: .local, newUser: false, authTime: now, request: request, context: context)
        default:
            return try await resetPage(error: "Please try again.", status: .badRequest)
        }
    }

    // MARK: Forced password change

    /// The user who signed in with a password that must be replaced: the transaction's pending
    /// user, who must still be flagged (so the page cannot be used to change a password freely).
    private func userChangingPassword() async throws -> UserAccount {
        guard let id = record.pendingUserID, let user = try await service.users.user(id: id), user.forcePasswordChange,
            user.accountEnabled,
            try await flow.secondFactorSatisfied(record: record, user: user, userFlow: userFlow, request: request, tenant: tenant)
        else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in before changing your password.")
        }
        return user
    }

    func changePasswordPage(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let user = try await userChangingPassword()
        var values: [String: Any] = [
            "title": text("changepassword_title"), "action": flow.pageURL("changepassword", record: record), "email": user.email ?? "",
        ]
        if let error { values["error"] = error }
        return try page("changepassword", values, status: status)
    }

    func changePassword() async throws -> Response {
        let user = try await userChangingPassword()
        let password = form["newPassword"] ?? ""
        if let problem = PasswordPolicy.problem(with: password) { return try await changePasswordPage(error: problem, status: .badRequest) }
        guard password == form["reenterPassword"] else {
            return try await changePasswordPage(
                error: text("error_passwordMismatch"),
                status: .badRequest)
        }
        let now = service.now
        try await service.users.setPassword(
            id: user.id, hash: try await service.hasher.hash(password), emailProven: false, forceChange: false, now: now)
        context.logger.info("password changed at sign-in", metadata: ["oid": "\(user.objectID)"])
        var changed = user
        changed.forcePasswordChange = false
        if userFlow.type == .profileEdit { return .redirecting(to: flow.pageURL("profile", record: record)) }
        return try await flow.complete(
            record, user: changed, identityProvider: .local, newUser: false, authTime: now, request: request, context: context)
    }
}
