import Foundation
import Hummingbird
import IdentityDirectory

/// The first page of a sign-in (B2C's `CombinedSignInAndSignUp` step): the local account's
/// email and password, "Sign up now", and a button per identity provider the flow offers. A
/// `domain_hint` naming a provider, or `prompt=create`, makes the choice without the page. A
/// sign-up flow has no page here: its choice is sign-up, or the hinted provider.
struct IdentityChoiceStep: OrchestrationStep {
    let passwords: PasswordAuthenticator

    let id = "CombinedSignInAndSignUp"
    var pages: Set<HostedPage> { [.signIn, .signUp, .forgotPassword, .social] }

    func applies(to run: JourneyRun) -> Bool {
        run.claims.userID == nil && [.signUpOrSignIn, .signIn, .signUp, .profileEdit].contains(run.flow.type)
    }

    /// Flows whose first step is the sign-in page.
    private func signsIn(_ flow: UserFlow) -> Bool { [.signIn, .signUpOrSignIn, .profileEdit].contains(flow.type) }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        let authorization = run.authorization
        let flow = run.flow
        run.claims.selection = nil
        if flow.type != .profileEdit {
            let onlyFacebook = flow.type != .signUp && !flow.offersLocalAccounts
            if authorization.domainHint == "facebook.com" || onlyFacebook, flow.offersFacebook {
                run.claims.selection = .provider(IdentityProviderKind.facebook.rawValue)
                return .next
            }
            if let upstream = run.tenant.hintedProvider(authorization.domainHint, in: flow) {
                run.claims.selection = .provider(upstream.name)
                return .next
            }
            if flow.type == .signUp || (authorization.prompt == .create && flow.type == .signUpOrSignIn) {
                run.claims.selection = .signUp
                return .next
            }
        }
        return .interact(.redirecting(to: run.url(.signIn)))
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        switch page {
        case .signIn:
            return .interact(try signInPage(run))
        case .signUp:
            guard run.flow.type == .signUpOrSignIn else {
                throw PageError(status: .notFound, title: "Not found", message: "This flow does not offer sign-up.")
            }
            run.claims.selection = .signUp
            return .next
        case .forgotPassword:
            // "Forgot your password?" does not reset in place: B2C returns AADB2C90118 to the app,
            // which starts its reset flow (https://learn.microsoft.com/azure/active-directory-b2c/troubleshoot?pivots=b2c-user-flow#password-reset-error).
            guard run.flow.type.offersForgotPassword else { return .interact(.redirecting(to: run.url(.signIn))) }
            return .fail(.forgotPassword(loginHint: run.authorization.loginHint))
        default:
            let name = RequestParameters(query: run.request.uri.query)["provider"]
            guard let name, name == IdentityProviderKind.facebook.rawValue ? run.flow.offersFacebook : offers(name, run) else {
                throw PageError(status: .badRequest, title: "Not available", message: "This identity provider is not offered here.")
            }
            run.claims.selection = .provider(name)
            return .next
        }
    }

    private func offers(_ name: String, _ run: JourneyRun) -> Bool {
        guard let upstream = run.tenant.upstreamProvider(named: name) else { return false }
        return run.flow.identityProviders.contains(upstream.kind)
    }

    private func signInPage(_ run: JourneyRun, error: String? = nil, email: String? = nil, status: HTTPResponse.Status = .ok) throws
        -> Response
    {
        let flow = run.flow
        guard signsIn(flow) else { throw PageError(status: .notFound, title: "Not found", message: "This flow has no sign-in page.") }
        var values: [String: Any] = [
            "title": run.text("signin_title"), "action": run.url(.signIn),
            "email": email ?? run.authorization.loginHint ?? "", "localAccounts": flow.offersLocalAccounts,
        ]
        if let error { values["error"] = error }
        // B2C hands "forgot password" back to the app (AADB2C90118) to start its reset flow; an
        // Entra app has no such flow to start, so the Entra face does not offer the link.
        if flow.type.offersForgotPassword, run.authorization.protocolFace.dialect.handsPasswordResetToApp {
            values["forgotURL"] = run.url(.forgotPassword)
        }
        if flow.type == .signUpOrSignIn { values["signUpURL"] = run.url(.signUp) }
        var social: [[String: Any]] = []
        if flow.offersFacebook {
            social.append([
                "name": "Facebook", "id": "FacebookExchange",
                "url": run.url(.social, extra: [("provider", IdentityProviderKind.facebook.rawValue)]),
            ])
        }
        for provider in run.tenant.identityProviders where flow.identityProviders.contains(provider.kind) {
            social.append([
                "name": provider.label, "id": "\(provider.name)Exchange", "url": run.url(.social, extra: [("provider", provider.name)]),
            ])
        }
        if !social.isEmpty {
            values["hasSocial"] = true
            values["social"] = social
        }
        return try run.page(.signIn, values, status: status)
    }

    /// The local account's password (B2C's `SelfAsserted-LocalAccountSignin-Email` with its
    /// `login-NonInteractive` validation).
    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard page == .signIn, signsIn(run.flow), run.flow.offersLocalAccounts else {
            throw PageError(status: .badRequest, title: "Not available", message: "This flow has no local-account sign-in.")
        }
        let email = run.form["email"] ?? ""
        let password = run.form["password"] ?? ""
        guard !email.isEmpty, !password.isEmpty else {
            return .interact(
                try signInPage(run, error: "Please enter your email address and password.", email: email, status: .badRequest))
        }
        switch try await passwords.authenticate(
            tenantID: run.tenant.id, email: email, password: password, source: run.clientAddress, now: run.now, logger: run.logger)
        {
        case .invalid:
            return .interact(try signInPage(run, error: run.text("error_credentials"), email: email, status: .badRequest))
        case .locked:
            return .interact(try signInPage(run, error: ProtocolFailure.accountLocked.message, email: email, status: .badRequest))
        case .disabled:
            return .interact(try signInPage(run, error: ProtocolFailure.accountDisabled.message, email: email, status: .forbidden))
        case .success(let user):
            run.claims.authenticated(user, by: .local, at: run.now)
            run.user = user
            return .next
        }
    }
}
