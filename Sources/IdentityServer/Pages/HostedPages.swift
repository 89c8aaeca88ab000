import Foundation
import Hummingbird
import Logging

/// The hosted pages of a transaction: `…/{tenant}/{policy}/pages/{name}?tx=…` (SPEC §2.3).
/// GET shows a page; POST (with the CSRF token) acts on it. Each page and method is its own
/// route; ``TransactionLoader`` loads the transaction first, so a handler starts from a
/// ``PageRequestContext``. Errors are pages, written by the group's ``PageErrorMiddleware``.
struct HostedPages: Sendable {
    let service: IdentityService
    var flow: InteractionFlow { InteractionFlow(service: service) }

    func addRoutes(to group: RouterGroup<PolicyRequestContext>) {
        let pages = group.group("pages").add(middleware: TransactionLoader(flow: flow)).group(context: PageRequestContext.self)
        pages.get("signin") { request, context in try step(request, context).signInPage() }
        pages.post("signin") { request, context in try await step(request, context).signIn() }
        pages.get("signup") { request, context in try await step(request, context).signUpPage() }
        pages.post("signup") { request, context in try await step(request, context).signUp() }
        pages.get("forgot") { request, context in try await step(request, context).forgotPassword() }
        pages.post("cancel") { _, context in try await flow.fail(context.record, with: .userCancelled, context: context) }
        pages.get("social") { request, context in
            try await step(request, context).social(provider: RequestParameters(query: request.uri.query)["provider"])
        }
        pages.get("reset") { request, context in try await step(request, context).resetPage() }
        pages.post("reset") { request, context in try await step(request, context).reset() }
        pages.get("profile") { request, context in try await step(request, context).profilePage() }
        pages.post("profile") { request, context in try await step(request, context).saveProfile() }
        pages.get("changepassword") { request, context in try await step(request, context).changePasswordPage() }
        pages.post("changepassword") { request, context in try await step(request, context).changePassword() }
        pages.get("consent") { request, context in try await step(request, context).consentPage() }
        pages.post("consent") { request, context in try await step(request, context).consent() }
        pages.get("accounts") { request, context in try await step(request, context).accountsPage() }
        pages.post("accounts") { request, context in try await step(request, context).chooseAccount() }
        pages.get("federated") { request, context in try await step(request, context).federatedSignUpPage() }
        pages.post("federated") { request, context in try await step(request, context).federatedSignUp() }
        pages.get("mfa") { request, context in try await step(request, context).secondFactorPage() }
        pages.post("mfa") { request, context in try await step(request, context).secondFactor() }
    }

    private func step(_ request: Request, _ context: PageRequestContext) -> PageStep {
        PageStep(
            service: service, flow: flow, record: context.record, tenant: context.tenant, userFlow: context.userFlow, request: request,
            form: context.form, context: context)
    }
}

/// A hosted page's transaction, loaded and checked by ``TransactionLoader``.
struct LoadedTransaction: Sendable {
    let record: InteractionRecord
    /// A POST's form, its CSRF token checked; empty for a GET.
    let form: RequestParameters
}

/// Loads the transaction named by `?tx=`, checks that the page URL names the transaction's own
/// tenant and flow and that the browser is the one that started it (its CSRF cookie, as B2C
/// binds its pages to `x-ms-cpim-trans`: a `?tx=` link alone showed the profile being edited
/// and the address being reset, the second outside attack's F-9), and for a POST reads the form
/// and checks its CSRF token (double submit).
struct TransactionLoader: RouterMiddleware {
    typealias Context = PolicyRequestContext
    let flow: InteractionFlow

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let record = try await flow.interaction(RequestParameters(query: request.uri.query)["tx"])
        // The URL's tenant and flow, already resolved, must be the transaction's own: then they
        // are its tenant and flow, with no second lookup.
        guard context.route.policy != nil, context.tenant.id == record.request.tenantID,
            context.flow.name.lowercased() == record.request.policy.lowercased()
        else {
            throw PageError(status: .badRequest, title: "Not found", message: "This page does not belong to this sign-in.")
        }
        try flow.requireStartingBrowser(request, record: record)
        var form = RequestParameters(pairs: [])
        if request.method == .post {
            form = try await FormBody.read(request, context: context)
            guard flow.checkCSRF(request: request, form: form, record: record) else {
                context.logger.warning("CSRF check failed", metadata: ["path": "\(request.uri.path)"])
                throw PageError(
                    status: .forbidden, title: "Request blocked",
                    message:
                        "The form could not be verified (its security token is missing or wrong). Return to the application and start again."
                )
            }
        }
        var context = context
        context.transaction = LoadedTransaction(record: record, form: form)
        return try await next(request, context)
    }
}

/// The context of a hosted page: the policy context plus its loaded transaction.
struct PageRequestContext: ChildRequestContext, IdentityContext {
    var coreContext: CoreRequestContextStorage
    let correlationID: String
    let clientAddress: String
    let tenant: Tenant
    let record: InteractionRecord
    let userFlow: UserFlow
    let form: RequestParameters

    init(context: PolicyRequestContext) throws {
        guard let transaction = context.transaction else { throw HTTPError(.internalServerError) }
        coreContext = context.coreContext
        correlationID = context.correlationID
        clientAddress = context.clientAddress
        tenant = context.tenant
        record = transaction.record
        userFlow = context.flow
        form = transaction.form
    }

    var maxUploadSize: Int { 64 * 1024 }
    var brandingTenant: Tenant? { tenant }
}

/// One request on one page of one transaction.
struct PageStep {
    let service: IdentityService
    let flow: InteractionFlow
    let record: InteractionRecord
    let tenant: Tenant
    let userFlow: UserFlow
    let request: Request
    let form: RequestParameters
    let context: PageRequestContext

    var csrf: String { request.cookies[InteractionFlow.csrfCookie]?.value ?? "" }

    /// The transaction's page language: `ui_locales` among the tenant's languages (SPEC §2.11).
    var language: String { PageLanguage.pick(uiLocales: record.request.uiLocales, declared: tenant.languages) }

    /// A page string in the transaction's language.
    func text(_ key: String) -> String { PageLanguage.strings(language, tenant: tenant)[key] ?? PageLanguage.english[key] ?? key }

    func page(_ name: String, _ values: [String: Any], status: HTTPResponse.Status = .ok) throws -> Response {
        var values = values
        values["t"] = PageLanguage.strings(language, tenant: tenant)
        values["lang"] = language
        values["csrf"] = csrf
        values["cancelAction"] = flow.pageURL("cancel", record: record)
        return .html(try service.pages.render(name, values, tenant: tenant), status: status)
    }

    // MARK: Sign in

    /// Flows whose first step is the sign-in page.
    private var signsIn: Bool { [.signIn, .signUpOrSignIn, .profileEdit].contains(userFlow.type) }

    func signInPage(error: String? = nil, email: String? = nil, status: HTTPResponse.Status = .ok) throws -> Response {
        guard signsIn else { throw PageError(status: .notFound, title: "Not found", message: "This flow has no sign-in page.") }
        var values: [String: Any] = [
            "title": text("signin_title"), "action": flow.pageURL("signin", record: record),
            "email": email ?? record.request.loginHint ?? "", "localAccounts": userFlow.offersLocalAccounts,
        ]
        if let error { values["error"] = error }
        // B2C hands "forgot password" back to the app (AADB2C90118) to start its reset flow; an
        // Entra app has no such flow to start, so the Entra face does not offer the link.
        if userFlow.type.offersForgotPassword, record.request.protocolFace == .b2c {
            values["forgotURL"] = flow.pageURL("forgot", record: record)
        }
        if userFlow.type == .signUpOrSignIn { values["signUpURL"] = flow.pageURL("signup", record: record) }
        var social: [[String: Any]] = []
        if userFlow.offersFacebook {
            social.append([
                "name": "Facebook", "id": "FacebookExchange",
                "url": flow.pageURL("social", record: record, extra: [("provider", "facebook.com")]),
            ])
        }
        for provider in tenant.identityProviders where userFlow.identityProviders.contains(provider.kind) {
            social.append([
                "name": provider.label, "id": "\(provider.name)Exchange",
                "url": flow.pageURL("social", record: record, extra: [("provider", provider.name)]),
            ])
        }
        if !social.isEmpty {
            values["hasSocial"] = true
            values["social"] = social
        }
        return try page("signin", values, status: status)
    }

    func signIn() async throws -> Response {
        let email = form["email"] ?? ""
        let password = form["password"] ?? ""
        guard signsIn, userFlow.offersLocalAccounts else {
            throw PageError(status: .badRequest, title: "Not available", message: "This flow has no local-account sign-in.")
        }
        guard !email.isEmpty, !password.isEmpty else {
            return try signInPage(error: "Please enter your email address and password.", email: email, status: .badRequest)
        }
        let outcome = try await service.passwords.authenticate(
            tenantID: tenant.id, email: email, password: password, source: context.clientAddress, now: service.now,
            logger: context.logger)
        switch outcome {
        case .invalid:
            return try signInPage(
                error: text("error_credentials"), email: email, status: .badRequest)
        case .locked:
            return try signInPage(error: B2CError.accountLocked.message, email: email, status: .badRequest)
        case .disabled:
            return try signInPage(error: B2CError.accountDisabled.message, email: email, status: .forbidden)
        case .success(let user):
            // The second factor before anything is done for the user (SPEC §2.11).
            let next: AfterSecondFactor =
                user.forcePasswordChange ? .changePassword : (userFlow.type == .profileEdit ? .profile : .complete)
            if let ask = try await flow.secondFactorGate(
                record, user: user, identityProvider: .local, newUser: false, authTime: service.now, session: .start, next: next,
                request: request, context: context)
            {
                return ask
            }
            // An operator's temporary password (Graph forceChangePasswordNextSignIn) is replaced
            // before anything else happens.
            if user.forcePasswordChange {
                try await service.interactions.setPendingUser(interactionID: record.id, userID: user.id)
                return .redirecting(to: flow.pageURL("changepassword", record: record))
            }
            if userFlow.type == .profileEdit {
                try await service.interactions.setPendingUser(interactionID: record.id, userID: user.id)
                return .redirecting(to: flow.pageURL("profile", record: record))
            }
            return try await flow.complete(
                record, user: user, identityProvider: .local, newUser: false, authTime: service.now, request: request, context: context)
        }
    }

    /// "Forgot your password?" in a sign-in or sign-up-or-sign-in flow does not reset in place:
    /// B2C returns AADB2C90118 to the app, which starts the reset flow (research/b2c-protocol.md §5.1).
    func forgotPassword() async throws -> Response {
        guard userFlow.type.offersForgotPassword else { return .redirecting(to: flow.pageURL("signin", record: record)) }
        var error = B2CError.forgotPassword
        error.loginHint = record.request.loginHint
        return try await flow.fail(record, with: error, context: context)
    }

    // MARK: Social

    func social(provider: String?) async throws -> Response {
        if provider == IdentityProviderKind.facebook.rawValue, userFlow.offersFacebook {
            return .redirecting(to: SimulatedFacebook.authorizeURL(record: record))
        }
        guard let name = provider, let upstream = tenant.upstreamProvider(named: name), userFlow.identityProviders.contains(upstream.kind)
        else {
            throw PageError(status: .badRequest, title: "Not available", message: "This identity provider is not offered here.")
        }
        do {
            let url = try await service.upstream.authorizationURL(
                provider: upstream, record: record, callback: UpstreamFederation.callback(for: record, provider: upstream), now: service.now
            )
            return .redirecting(to: url)
        } catch let failure as UpstreamOIDC.Failure {
            context.logger.warning(
                "upstream provider unusable", metadata: ["provider": "\(upstream.name)", "reason": "\(failure.message)"])
            return try await flow.fail(record, with: failure.b2cError, context: context)
        }
    }

    // MARK: Profile edit

    private func pendingUser() async throws -> UserAccount {
        guard let id = record.pendingUserID, let user = try await service.users.user(id: id),
            try await flow.secondFactorSatisfied(record: record, user: user, userFlow: userFlow, request: request, tenant: tenant)
        else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in before editing your profile.")
        }
        // A temporary password is replaced before anything else (forceChangePasswordNextSignIn).
        guard !user.forcePasswordChange else {
            throw PageError(status: .forbidden, title: "Change your password first", message: "Change your password before you continue.")
        }
        return user
    }

    private var editableAttributes: [FlowAttribute] {
        userFlow.signUpAttributes.isEmpty ? [.displayName] : userFlow.signUpAttributes
    }

    func profilePage(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        guard userFlow.type == .profileEdit else {
            throw PageError(status: .notFound, title: "Not found", message: "This flow does not edit profiles.")
        }
        let user = try await pendingUser()
        var values: [String: Any] = [
            "title": text("profile_title"), "action": flow.pageURL("profile", record: record), "email": user.email ?? "",
            "attributes": attributeFields(editableAttributes) { form[$0.rawValue] ?? user.value(of: $0) },
        ]
        if let error { values["error"] = error }
        return try page("profile", values, status: status)
    }

    func saveProfile() async throws -> Response {
        guard userFlow.type == .profileEdit else {
            throw PageError(status: .notFound, title: "Not found", message: "This flow does not edit profiles.")
        }
        var user = try await pendingUser()
        let posted: (displayName: String?, attributes: [String: String])
        switch postedAttributes(editableAttributes, over: user.attributes) {
        case .success(let values): posted = values
        case .failure(let problem): return try await profilePage(error: problem.message, status: .badRequest)
        }
        let attributes = posted.attributes
        let displayName = posted.displayName ?? user.displayName
        try await service.users.updateProfile(id: user.id, displayName: displayName, attributes: attributes, now: service.now)
        user.displayName = displayName
        user.attributes = attributes
        // The user's own session in this browser, if the profile was reached through SSO: kept,
        // with the second factor it was backed by.
        let held = try await flow.sessions(from: request, tenant: tenant).first { $0.user.id == user.id }
        return try await flow.complete(
            record, user: user, identityProvider: held?.session.identityProvider ?? user.identityProvider, newUser: false,
            authTime: held?.session.authTime ?? service.now, session: held.map { .existing(id: $0.id) } ?? .start,
            request: request, context: context)
    }
}
