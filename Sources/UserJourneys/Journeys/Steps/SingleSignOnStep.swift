import Foundation
import Hummingbird
import WireCoding

/// Single sign-on (B2C's `SM-AAD` session step): a session this browser already holds for the
/// flow answers without a password; on the Entra face `prompt=select_account` shows the account
/// picker over the browser's sessions instead (SPEC §2.9). B2C ignores `select_account` and
/// uses the current session.
struct SingleSignOnStep: OrchestrationStep {
    let sessions: SingleSignOnSessions

    let id = "SingleSignOn"
    var pages: Set<HostedPage> { [.accounts, .signIn] }

    func applies(to run: JourneyRun) -> Bool {
        run.claims.userID == nil && [.signUpOrSignIn, .signIn, .profileEdit].contains(run.flow.type)
    }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        let authorization = run.authorization
        let usable = try await sessions.usable(for: authorization, flow: run.flow, request: run.request, tenant: run.tenant)
        if authorization.prompt == .selectAccount, authorization.protocolFace.dialect.offersAccountPicker, run.flow.type != .profileEdit,
            !usable.isEmpty
        {
            return .interact(.redirecting(to: run.url(.accounts)))
        }
        // `prompt=create` asks for a new account even with a session.
        guard authorization.prompt != .create || run.flow.type == .profileEdit,
            let held = sessions.singleSignOn(among: usable, authorization: authorization, request: run.request, tenant: run.tenant)
        else { return .next }
        use(held, &run)
        return .next
    }

    private func use(_ held: SingleSignOnSessions.Held, _ run: inout JourneyRun) {
        run.claims.authenticated(held.user, by: held.session.identityProvider, at: held.session.authTime)
        run.claims.sessionHash = Secrets.sha256Hex(held.id)
        run.claims.sessionHasSecondFactor = held.session.secondFactor
        run.user = held.user
    }

    /// The browser's sessions this transaction may continue with.
    private func pickable(_ run: JourneyRun) async throws -> [SingleSignOnSessions.Held] {
        guard run.authorization.protocolFace.dialect.offersAccountPicker else { return [] }
        return try await sessions.usable(for: run.authorization, flow: run.flow, request: run.request, tenant: run.tenant)
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        // "Use another account": on to the sign-in page.
        if page == .signIn { return .next }
        guard run.authorization.protocolFace.dialect.offersAccountPicker else {
            throw PageError(status: .notFound, title: "Not found", message: "This sign-in has no account picker.")
        }
        let action = run.url(.accounts)
        let accounts = try await pickable(run).map { held -> [String: Any] in
            ["oid": held.user.objectID, "name": held.user.displayName, "email": held.user.email ?? "", "action": action]
        }
        return .interact(
            try run.page(.accounts, ["title": run.text("accounts_title"), "accounts": accounts, "otherURL": run.url(.signIn)]))
    }

    /// Continues as the chosen account: its session becomes the browser's current one.
    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard page == .accounts, let oid = run.form["account"],
            let held = try await pickable(run).first(where: { $0.user.objectID == oid.lowercased() })
        else {
            throw PageError(status: .badRequest, title: "Account not available", message: "Pick one of the accounts shown, or sign in.")
        }
        use(held, &run)
        return .next
    }
}
