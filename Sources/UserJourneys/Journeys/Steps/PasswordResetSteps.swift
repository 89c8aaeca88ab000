import Foundation
import Hummingbird
import IdentityDirectory

/// The first half of a password reset (B2C's `LocalAccountDiscoveryUsingEmailAddress`): a code
/// to the address, proven on the same page. The page says the same whether or not an account
/// has the address; only an existing account gets a code, bound to it.
struct EmailVerificationStep: OrchestrationStep {
    let users: any UserDirectory
    let mailer: VerificationMailer

    let id = "LocalAccountDiscoveryUsingEmailAddress"
    var pages: Set<HostedPage> { [.reset] }

    func applies(to run: JourneyRun) -> Bool { run.claims.userID == nil }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome { .interact(.redirecting(to: run.url(.reset))) }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { .interact(try resetPage(run)) }

    private func resetPage(_ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok) throws -> Response {
        var values: [String: Any] = ["title": run.text("reset_title"), "action": run.url(.reset)]
        if let pending = run.claims.pendingEmail {
            values["stepCode"] = true
            values["email"] = pending
            if let outbox = run.outboxURL { values["outboxURL"] = outbox }
        } else {
            values["stepEmail"] = true
            values["email"] = run.form["email"] ?? run.authorization.loginHint ?? ""
        }
        if let error { values["error"] = error }
        return try run.page(.reset, values, status: status)
    }

    private func again(_ run: JourneyRun, _ error: String, _ status: HTTPResponse.Status) throws -> StepOutcome {
        .interact(try resetPage(run, error: error, status: status))
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        let reload = StepOutcome.interact(.redirecting(to: run.url(.reset), status: .seeOther))
        switch run.form["step"] {
        case "send":
            guard let email = EmailAddress(run.form["email"] ?? "") else { return try again(run, run.text("error_email"), .badRequest) }
            run.claims.pendingEmail = email.canonical
            run.claims.verifiedEmail = nil
            // The code is bound to the account and goes to the address the account holds, not to
            // the text typed here.
            let current = run
            let sent = try await VerificationMailer.takingTheSameTime {
                let user = try await users.user(tenantID: current.tenant.id, provider: .local, signInName: email.canonical)
                return try await mailer.send(to: user.map { $0.email ?? email.display }, for: email.canonical, account: user, current)
            }
            // Counted alike with or without an account, so this says nothing about one either.
            guard sent else { return try again(run, run.text("error_throttled"), .tooManyRequests) }
            return reload
        case "restart":
            run.claims.pendingEmail = nil
            return reload
        case "verify":
            guard let email = run.claims.pendingEmail else { return try again(run, "Enter your email address first.", .badRequest) }
            // Only a code bound to an account resets (a code saved before the binding existed
            // binds to nothing and proves nothing here).
            let account: UUID
            switch try await mailer.check(run.form["code"] ?? "", for: email, run) {
            case .proves(let bound?): account = bound
            case .throttled: return try again(run, run.text("error_tooManyCodes"), .tooManyRequests)
            case .proves(nil), .refused:
                return try again(run, "That code is incorrect or has expired. Please try again.", .badRequest)
            }
            guard let user = try await users.user(id: account) else {
                return try again(run, "That code is incorrect or has expired. Please try again.", .badRequest)
            }
            run.claims.verifiedEmail = email
            run.claims.authenticated(user, by: .local, at: run.now)
            run.user = user
            return .next
        default:
            return try again(run, "Please try again.", .badRequest)
        }
    }
}

/// The second half of a password reset (B2C's `LocalAccountWritePasswordUsingObjectId`): the
/// new password for the account the code was bound to, after the flow's second factor.
struct NewPasswordStep: OrchestrationStep {
    let users: any UserDirectory
    let hasher: PasswordHasher

    let id = "LocalAccountWritePasswordUsingObjectId"
    var pages: Set<HostedPage> { [.reset] }
    var actsForUser: Bool { true }

    func applies(to run: JourneyRun) -> Bool { run.flow.type == .passwordReset }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        .interact(.redirecting(to: run.url(.reset), status: .seeOther))
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { .interact(try passwordPage(run)) }

    private func passwordPage(_ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok) throws -> Response {
        var values: [String: Any] = [
            "title": run.text("reset_title"), "action": run.url(.reset), "stepPassword": true, "email": run.claims.verifiedEmail ?? "",
        ]
        if let error { values["error"] = error }
        return try run.page(.reset, values, status: status)
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard run.form["step"] == "change" else { return .interact(try passwordPage(run, error: "Please try again.", status: .badRequest)) }
        // The account the verified code was bound to, and only while it still has the verified
        // address: never a second lookup by the text the user typed.
        guard let email = run.claims.verifiedEmail, let user = run.user, user.tenantID == run.tenant.id,
            user.identityProvider == .local, user.signInName == email
        else { return .interact(try passwordPage(run, error: "Verify your email address first.", status: .badRequest)) }
        let password = run.form["newPassword"] ?? ""
        if let problem = PasswordPolicy.problem(with: password) {
            return .interact(try passwordPage(run, error: problem, status: .badRequest))
        }
        guard password == run.form["reenterPassword"] else {
            return .interact(try passwordPage(run, error: run.text("error_passwordMismatch"), status: .badRequest))
        }
        // Setting the password also unlocks the account and revokes existing refresh tokens
        // (https://github.com/Azure-Samples/active-directory-b2c-dotnetcore-webapp/issues/36).
        try await users.setPassword(id: user.id, hash: try await hasher.hash(password), emailProven: true, forceChange: false, now: run.now)
        run.logger.info("password reset", metadata: ["oid": "\(user.objectID)"])
        run.claims.authTime = run.now
        return .next
    }
}

/// An operator's temporary password (Graph's `forceChangePasswordNextSignIn`) is replaced
/// before anything else is done for the account, after the flow's second factor.
struct ForcedPasswordChangeStep: OrchestrationStep {
    let users: any UserDirectory
    let hasher: PasswordHasher

    let id = "ForcedPasswordChange"
    var pages: Set<HostedPage> { [.changePassword] }
    var actsForUser: Bool { true }

    func applies(to run: JourneyRun) -> Bool { run.user?.forcePasswordChange == true }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        // A grant without pages cannot show the change-password page (B2C: AADB2C90225,
        // Entra: AADSTS50055).
        guard run.pagesAllowed else { return .fail(.passwordChangeRequired) }
        return .interact(.redirecting(to: run.url(.changePassword)))
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { .interact(try changePage(run)) }

    private func changePage(_ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok) throws -> Response {
        var values: [String: Any] = [
            "title": run.text("changepassword_title"), "action": run.url(.changePassword), "email": run.user?.email ?? "",
        ]
        if let error { values["error"] = error }
        return try run.page(.changePassword, values, status: status)
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard let user = run.user, user.forcePasswordChange else { throw JourneyEngine.notThisStep }
        let password = run.form["newPassword"] ?? ""
        if let problem = PasswordPolicy.problem(with: password) {
            return .interact(try changePage(run, error: problem, status: .badRequest))
        }
        guard password == run.form["reenterPassword"] else {
            return .interact(try changePage(run, error: run.text("error_passwordMismatch"), status: .badRequest))
        }
        try await users.setPassword(
            id: user.id, hash: try await hasher.hash(password), emailProven: false, forceChange: false, now: run.now)
        run.logger.info("password changed at sign-in", metadata: ["oid": "\(user.objectID)"])
        run.user?.forcePasswordChange = false
        // The person authenticated again, with the new password.
        run.claims.authTime = run.now
        return .next
    }
}
