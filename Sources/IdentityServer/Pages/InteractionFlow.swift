import Foundation
import Hummingbird
import Logging
import WireCoding

/// What the hosted pages share: the browser's CSRF and SSO cookies, loading a transaction, and
/// finishing a transaction by sending the app its code (or error).
struct InteractionFlow: Sendable {
    let service: IdentityService

    static let csrfCookie = "x-ms-cpim-csrf"

    /// The native-client redirect URI of the ADAL era (RFC 8252's predecessor, "out of band").
    static let outOfBand = "urn:ietf:wg:oauth:2.0:oob"

    /// B2C names its SSO cookie per tenant; `:` is not allowed in a cookie name, so `-` here.
    static func ssoCookie(for tenant: Tenant) -> String { "x-ms-cpim-sso-\(tenant.guid)" }

    // MARK: Cookies

    /// The browser's CSRF token: reused when the browser already has a well-formed one (so two
    /// tabs signing in at once do not invalidate each other), else a new random one.
    func csrfToken(from request: Request) -> (token: String, isNew: Bool) {
        if let existing = request.cookies[Self.csrfCookie]?.value, existing.count == 43,
            Base64URL.decode(existing) != nil
        {
            return (existing, false)
        }
        return (Secrets.randomToken(), true)
    }

    var cookies: BrowserCookies { BrowserCookies(secure: service.configuration.secureCookies) }

    func cookie(_ name: String, value: String, maxAge: Int? = nil) -> Cookie { cookies.cookie(name, value: value, maxAge: maxAge) }

    func expiredCookie(_ name: String) -> Cookie { cookies.expired(name) }

    /// Double-submit check: the form's token equals the cookie, and the cookie is the one the
    /// transaction was started with (OWASP CSRF Prevention Cheat Sheet). Both comparisons are
    /// constant-time.
    func checkCSRF(request: Request, form: RequestParameters, record: InteractionRecord) -> Bool {
        guard let cookie = request.cookies[Self.csrfCookie]?.value, let submitted = form["csrf_token"] else { return false }
        return Secrets.constantTimeEquals(cookie, submitted)
            && Secrets.constantTimeEquals(Secrets.sha256Hex(cookie), record.csrfHash)
    }

    // MARK: Transactions

    /// A live transaction for `tx`, or an error page.
    func interaction(_ id: String?) async throws -> InteractionRecord {
        guard let id, !id.isEmpty, id.count <= 64, let record = try await service.interactions.interaction(id: id),
            record.expiresAt > service.now
        else {
            throw PageError(
                status: .badRequest, title: "Session expired",
                message: "This sign-in page has expired or is not valid. Return to the application and start again.")
        }
        if record.completedAt != nil {
            throw PageError(
                status: .badRequest, title: "Already completed",
                message: "This sign-in has already been completed. Return to the application.")
        }
        return record
    }

    /// URL of a hosted page of the transaction.
    func pageURL(_ page: String, record: InteractionRecord, extra: [(String, String)] = []) -> String {
        let route = PolicyRoute(tenantSegment: record.request.tenantSegment, policy: record.request.policy, placement: .path)
        return route.url(origin: record.request.origin, for: .page(page)) + "?" + FormEncoding.encode([("tx", record.id)] + extra)
    }

    func tenantAndFlow(of record: InteractionRecord) async throws -> (Tenant, UserFlow) {
        guard let tenant = try await service.tenants.tenant(matching: record.request.tenantID.uuidString),
            let flow = try await service.tenants.userFlow(tenantID: tenant.id, name: record.request.policy)
        else { throw PageError(status: .notFound, title: "Not found", message: "The user flow no longer exists.") }
        return (tenant, service.offered(flow))
    }

    // MARK: Results

    /// Ends the transaction with an error sent to the app (cancel, forgot password, …), in the
    /// form of the transaction's face.
    func fail(_ record: InteractionRecord, with error: B2CError, context: some IdentityContext) async throws -> Response {
        _ = try await service.interactions.completeInteraction(id: record.id, now: service.now)
        context.logger.info("interaction ended with error", metadata: ["code": "\(error.code)"])
        return RedirectResponder.error(
            error, redirectURI: record.request.redirectURI, mode: record.request.responseMode, state: record.request.state,
            correlationID: context.correlationID, now: service.now, face: record.request.protocolFace, origin: record.request.origin)
    }

    /// Which SSO session a finished sign-in leaves the browser with.
    enum SessionUse {
        /// The person just authenticated: a new session.
        case start
        /// An SSO session the browser already holds (its cookie id): kept, and made current.
        case existing(id: String)
    }

    /// The user is known: on the Entra face, first asks for consent to scopes the user has not
    /// granted this app (or all of them again under `prompt=consent`; SPEC §2.9); then
    /// ``finish(_:user:identityProvider:newUser:authTime:session:request:context:)``.
    func complete(
        _ record: InteractionRecord, user: UserAccount, identityProvider: IdentityProviderKind, newUser: Bool,
        authTime: Date, session: SessionUse = .start, secondFactorPassed: Bool = false, request: Request,
        context: some IdentityContext
    ) async throws -> Response {
        let authorization = record.request
        // Every way a sign-in ends comes through here (password, SSO, federation, reset,
        // profile edit, picker): a disabled account gets nothing from any of them, and a flow
        // with MFA gets its second factor first (SPEC §2.11).
        guard user.accountEnabled else { return try await fail(record, with: .accountDisabled, context: context) }
        if !secondFactorPassed,
            let ask = try await secondFactorGate(
                record, user: user, identityProvider: identityProvider, newUser: newUser, authTime: authTime, session: session,
                next: .complete, request: request, context: context)
        {
            return ask
        }
        let secondFactorPassed = secondFactorPassed || record.secondFactorUserID == user.id
        guard authorization.protocolFace == .entra else {
            return try await finish(
                record, user: user, identityProvider: identityProvider, newUser: newUser, authTime: authTime, session: session,
                secondFactor: secondFactorPassed, request: request, context: context)
        }
        let tenant = try await tenantAndFlow(of: record).0
        guard let client = try await service.tenants.application(tenantID: tenant.id, clientID: authorization.clientID) else {
            throw PageError(status: .badRequest, title: "Unknown application", message: "The application is no longer registered.")
        }
        let apps = try await service.tenants.applications(tenantID: tenant.id)
        let requested = try GrantedScopes.resolve(authorization.scopes, client: client, tenantApps: apps).consentKeys
        let granted = try await service.consents.granted(userID: user.id, clientID: client.clientIDString)
        guard authorization.prompt == .consent || !requested.isSubset(of: granted) else {
            return try await finish(
                record, user: user, identityProvider: identityProvider, newUser: newUser, authTime: authTime, session: session,
                secondFactor: secondFactorPassed, request: request, context: context)
        }
        if authorization.prompt == .silent {
            return try await fail(
                record, with: .consentRequired(clientID: client.clientIDString, name: client.displayName), context: context)
        }
        // The person has authenticated: the session starts now, and the consent page finishes
        // the transaction for the user it remembers.
        let sessionID = try await sessionID(
            for: session, user: user, identityProvider: identityProvider, authTime: authTime, secondFactor: secondFactorPassed,
            tenant: tenant)
        try await service.interactions.setPendingUser(interactionID: record.id, userID: user.id)
        // The consent page finishes with this session only: never one the browser got elsewhere.
        try await service.interactions.setConsentSession(interactionID: record.id, idHash: Secrets.sha256Hex(sessionID))
        var response = Response.redirecting(to: pageURL("consent", record: record))
        response.setCookie(ssoCookie(current: sessionID, request: request, tenant: tenant))
        return response
    }

    /// Ends the transaction successfully: starts (or keeps) the SSO session and sends the app
    /// its code and/or tokens in the requested response mode.
    func finish(
        _ record: InteractionRecord, user: UserAccount, identityProvider: IdentityProviderKind, newUser: Bool,
        authTime: Date, session: SessionUse, secondFactor: Bool = false, request: Request, context: some IdentityContext
    ) async throws -> Response {
        let now = service.now
        guard user.accountEnabled else { return try await fail(record, with: .accountDisabled, context: context) }
        guard try await service.interactions.completeInteraction(id: record.id, now: now) else {
            throw PageError(status: .badRequest, title: "Already completed", message: "This sign-in has already been completed.")
        }
        let (tenant, flow) = try await tenantAndFlow(of: record)
        let authorization = record.request
        guard let client = try await service.tenants.application(tenantID: tenant.id, clientID: authorization.clientID) else {
            throw PageError(status: .badRequest, title: "Unknown application", message: "The application is no longer registered.")
        }
        // B2C's "Before sending the token" connector: its values go into this sign-in's tokens.
        let overrides: [String: String]
        switch try await tokenClaimOverrides(record, user: user, tenant: tenant, userFlow: flow, context: context) {
        case .success(let values): overrides = values
        case .failure(let failure): return try await fail(record, with: failure.b2cError, context: context)
        }
        var parameters: [(String, String)] = []
        var code: String?
        if authorization.wantsCode {
            let value = Secrets.randomToken()
            let grant = AuthorizationCodeGrant(
                tenantID: tenant.id, clientID: client.clientIDString, userID: user.id, policy: flow.name,
                redirectURI: authorization.redirectURI, scopes: authorization.scopes, nonce: authorization.nonce,
                codeChallenge: authorization.codeChallenge, codeChallengeMethod: authorization.codeChallengeMethod,
                authTime: authTime, newUser: newUser, identityProvider: identityProvider, createdAt: now,
                expiresAt: now.addingTimeInterval(service.configuration.codeLifetime), face: authorization.protocolFace,
                claimOverrides: overrides.isEmpty ? nil : overrides)
            try await service.grants.saveCode(value, grant: grant)
            code = value
            parameters.append(("code", value))
        }
        if authorization.wantsIDToken || authorization.wantsAccessToken {
            let apps = try await service.tenants.applications(tenantID: tenant.id)
            var scopes = try GrantedScopes.resolve(authorization.scopes, client: client, tenantApps: apps)
            if !authorization.wantsAccessToken { scopes.resource = nil }
            if !authorization.wantsIDToken { scopes.openID = false }
            let face = authorization.protocolFace
            let issuance = IssuanceContext(
                tenant: tenant, flow: flow, client: client, user: user,
                issuer: service.issuer(origin: authorization.origin, tenant: tenant, face: face), scopes: scopes,
                nonce: authorization.nonce, authTime: authTime, newUser: newUser, identityProvider: identityProvider, face: face,
                claimOverrides: overrides)
            let tokens = try await service.issuer.issue(issuance, now: now, code: code, hashAccessToken: true)
            if let accessToken = tokens.accessToken {
                parameters += [
                    ("access_token", accessToken), ("token_type", "Bearer"), ("expires_in", String(tokens.accessTokenLifetime)),
                    ("scope", scopes.granted.joined(separator: " ")),
                ]
            }
            if let idToken = tokens.idToken { parameters.append(("id_token", idToken)) }
        }
        if let state = authorization.state { parameters.append(("state", state)) }
        // MSAL reads the account's home tenant from the authorize response's client_info on the
        // Entra face (research/client-sdk.md §C.7).
        if authorization.protocolFace == .entra, code != nil {
            parameters.append(("client_info", TokenIssuer.entraClientInfo(user: user, tenant: tenant)))
        }
        context.logger.info(
            "interaction completed",
            metadata: [
                "oid": "\(user.objectID)", "policy": "\(flow.name)", "client_id": "\(client.clientIDString)", "new_user": "\(newUser)",
            ])

        var response: Response
        if authorization.redirectURI == Self.outOfBand, let code {
            // As B2C does: the browser is sent on to `urn:ietf:wg:oauth:2.0:oob?code=…&state=…`,
            // which the embedded web views of the ADAL-era apps watch for (SPEC §2.8); a desktop
            // browser cannot follow it and stays on the page, which shows the code to a person.
            let target = Self.outOfBand + "?" + FormEncoding.encode(parameters)
            response = .html(
                try service.pages.render(
                    "oob",
                    {
                        let language = PageLanguage.pick(uiLocales: authorization.uiLocales, declared: tenant.languages)
                        let strings = PageLanguage.strings(language, tenant: tenant)
                        return [
                            "title": strings["oob_title"] ?? "", "code": code, "navigateTo": target, "t": strings, "lang": language,
                        ]
                    }(), tenant: tenant))
        } else {
            response = RedirectResponder.respond(
                redirectURI: authorization.redirectURI, mode: authorization.responseMode, parameters: parameters)
        }
        let sessionID = try await sessionID(
            for: session, user: user, identityProvider: identityProvider, authTime: authTime, secondFactor: secondFactor, tenant: tenant)
        response.setCookie(ssoCookie(current: sessionID, request: request, tenant: tenant))
        return response
    }

    // MARK: SSO sessions

    /// The id of the session a finished sign-in uses: a kept one, or a new one saved now.
    private func sessionID(
        for use: SessionUse, user: UserAccount, identityProvider: IdentityProviderKind, authTime: Date, secondFactor: Bool,
        tenant: Tenant
    ) async throws -> String {
        // A kept session stays as it is, except that one a second factor now backs is replaced
        // by a new session that says so.
        if case .existing(let id) = use, !secondFactor { return id }
        let id = Secrets.randomToken()
        let session = SSOSession(
            tenantID: tenant.id, userID: user.id, identityProvider: identityProvider, authTime: authTime,
            expiresAt: service.now.addingTimeInterval(service.configuration.sessionLifetime), secondFactor: secondFactor)
        try await service.interactions.saveSession(idHash: Secrets.sha256Hex(id), session: session, now: service.now)
        return id
    }

    /// The SSO cookie with `current` first and the browser's other sessions after it: the
    /// first is the one single sign-on uses; all of them are the account picker's
    /// (`prompt=select_account`, SPEC §2.9).
    func ssoCookie(current: String, request: Request, tenant: Tenant) -> Cookie {
        let others = SSOCookieValue.ids(request.cookies[Self.ssoCookie(for: tenant)]?.value).filter { $0 != current }
        return cookie(Self.ssoCookie(for: tenant), value: SSOCookieValue.value([current] + others))
    }

    /// A session this browser holds for `tenant`, with its cookie id and user.
    struct HeldSession: Sendable {
        let id: String
        let session: SSOSession
        let user: UserAccount
    }

    /// The valid sessions this browser holds for `tenant`, current first, one per user.
    func sessions(from request: Request, tenant: Tenant) async throws -> [HeldSession] {
        var held: [HeldSession] = []
        for id in SSOCookieValue.ids(request.cookies[Self.ssoCookie(for: tenant)]?.value) {
            guard let session = try await service.interactions.session(idHash: Secrets.sha256Hex(id), now: service.now),
                session.tenantID == tenant.id, !held.contains(where: { $0.session.userID == session.userID }),
                let user = try await service.users.user(id: session.userID), user.accountEnabled, !user.forcePasswordChange
            else { continue }
            held.append(HeldSession(id: id, session: session, user: user))
        }
        return held
    }

    /// The sessions this browser holds that `record`'s request may use without a password: none
    /// under `prompt=login`, none older than `max_age`, and only from identity providers the
    /// flow offers. SSO, the account picker and its choice all ask this one question.
    func usableSessions(for record: InteractionRecord, userFlow: UserFlow, request: Request, tenant: Tenant) async throws
        -> [HeldSession]
    {
        let authorization = record.request
        guard authorization.prompt != .login else { return [] }
        return try await sessions(from: request, tenant: tenant).filter { held in
            let tooOld = authorization.maxAge.map { service.now.timeIntervalSince(held.session.authTime) > TimeInterval($0) } ?? false
            return !tooOld && userFlow.identityProviders.contains(held.session.identityProvider)
        }
    }

    /// The session single sign-on answers with: the browser's current one, never another
    /// account it also holds (if the current one has ended, the person signs in again). On the
    /// Entra face a `login_hint` picks the session of that account instead, as Entra does, and
    /// none if the browser holds no session for it.
    func singleSignOnSession(among usable: [HeldSession], record: InteractionRecord, request: Request, tenant: Tenant) -> HeldSession? {
        if record.request.protocolFace == .entra, let hint = record.request.loginHint {
            let wanted = EmailAddress.canonical(hint) ?? hint.lowercased()
            return usable.first { $0.user.signInName == wanted || $0.user.email.flatMap(EmailAddress.canonical) == wanted }
        }
        let current = SSOCookieValue.ids(request.cookies[Self.ssoCookie(for: tenant)]?.value).first
        return usable.first { $0.id == current }
    }

    /// The SSO session this browser holds for `tenant`, if any and still valid: the current one.
    func session(from request: Request, tenant: Tenant) async throws -> (session: SSOSession, user: UserAccount)? {
        guard let id = SSOCookieValue.ids(request.cookies[Self.ssoCookie(for: tenant)]?.value).first,
            let session = try await service.interactions.session(idHash: Secrets.sha256Hex(id), now: service.now),
            session.tenantID == tenant.id, let user = try await service.users.user(id: session.userID), user.accountEnabled,
            !user.forcePasswordChange
        else { return nil }
        return (session, user)
    }
}

/// The SSO cookie's value: the browser's session ids (each 43 base64url characters, so `.`
/// never occurs in one), current first, at most ``maximumSessions``.
enum SSOCookieValue {
    static let maximumSessions = 5

    static func ids(_ value: String?) -> [String] {
        guard let value, !value.isEmpty else { return [] }
        return value.split(separator: ".").prefix(maximumSessions).map(String.init).filter { $0.count == 43 && Base64URL.decode($0) != nil }
    }

    static func value(_ ids: [String]) -> String { ids.prefix(maximumSessions).joined(separator: ".") }
}

/// A failure shown to the person in the browser as a page, never sent to a redirect URI
/// (unregistered clients and redirect URIs, expired transactions).
struct PageError: Error {
    var status: HTTPResponse.Status
    var title: String
    var message: String
    var code: String?

    init(status: HTTPResponse.Status, title: String, message: String, code: String? = nil) {
        self.status = status
        self.title = title
        self.message = message
        self.code = code
    }

    init(_ error: B2CError, face: ProtocolFace = .b2c) {
        let (code, message) = face == .entra ? ("AADSTS\(error.entra.code)", error.entra.message) : (error.code, error.message)
        self.init(
            status: error.status == .badRequest ? .badRequest : error.status, title: "Sorry, something went wrong",
            message: message, code: code)
    }
}

/// The identity service's cookies: HttpOnly, SameSite=Lax, whole-site, and Secure under HTTPS.
struct BrowserCookies: Sendable {
    let secure: Bool

    func cookie(_ name: String, value: String, maxAge: Int? = nil) -> Cookie {
        Cookie(name: name, value: value, maxAge: maxAge, path: "/", secure: secure, httpOnly: true, sameSite: .lax)
    }

    func expired(_ name: String) -> Cookie { cookie(name, value: "", maxAge: 0) }
}
