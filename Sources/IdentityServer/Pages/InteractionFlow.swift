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

    /// Ends the transaction with an error sent to the app (cancel, forgot password, …).
    func fail(_ record: InteractionRecord, with error: B2CError, context: some IdentityContext) async throws -> Response {
        _ = try await service.interactions.completeInteraction(id: record.id, now: service.now)
        context.logger.info("interaction ended with error", metadata: ["code": "\(error.code)"])
        return RedirectResponder.error(
            error, redirectURI: record.request.redirectURI, mode: record.request.responseMode, state: record.request.state,
            correlationID: context.correlationID, now: service.now)
    }

    /// Ends the transaction successfully: starts (or refreshes) the SSO session and sends the app
    /// its code and/or tokens in the requested response mode.
    func complete(
        _ record: InteractionRecord, user: UserAccount, identityProvider: IdentityProviderKind, newUser: Bool,
        authTime: Date, context: some IdentityContext
    ) async throws -> Response {
        let now = service.now
        guard try await service.interactions.completeInteraction(id: record.id, now: now) else {
            throw PageError(status: .badRequest, title: "Already completed", message: "This sign-in has already been completed.")
        }
        let (tenant, flow) = try await tenantAndFlow(of: record)
        let request = record.request
        guard let client = try await service.tenants.application(tenantID: tenant.id, clientID: request.clientID) else {
            throw PageError(status: .badRequest, title: "Unknown application", message: "The application is no longer registered.")
        }
        var parameters: [(String, String)] = []
        var code: String?
        if request.wantsCode {
            let value = Secrets.randomToken()
            let grant = AuthorizationCodeGrant(
                tenantID: tenant.id, clientID: client.clientIDString, userID: user.id, policy: flow.name,
                redirectURI: request.redirectURI, scopes: request.scopes, nonce: request.nonce,
                codeChallenge: request.codeChallenge, codeChallengeMethod: request.codeChallengeMethod,
                authTime: authTime, newUser: newUser, identityProvider: identityProvider, createdAt: now,
                expiresAt: now.addingTimeInterval(service.configuration.codeLifetime))
            try await service.grants.saveCode(value, grant: grant)
            code = value
            parameters.append(("code", value))
        }
        if request.wantsIDToken || request.wantsAccessToken {
            let apps = try await service.tenants.applications(tenantID: tenant.id)
            var scopes = try GrantedScopes.resolve(request.scopes, client: client, tenantApps: apps)
            if !request.wantsAccessToken { scopes.resource = nil }
            if !request.wantsIDToken { scopes.openID = false }
            let issuance = IssuanceContext(
                tenant: tenant, flow: flow, client: client, user: user,
                issuer: service.issuer(origin: request.origin, tenant: tenant), scopes: scopes, nonce: request.nonce,
                authTime: authTime, newUser: newUser, identityProvider: identityProvider)
            let tokens = try await service.issuer.issue(issuance, now: now, code: code, hashAccessToken: true)
            if let accessToken = tokens.accessToken {
                parameters += [
                    ("access_token", accessToken), ("token_type", "Bearer"), ("expires_in", String(tokens.accessTokenLifetime)),
                    ("scope", scopes.granted.joined(separator: " ")),
                ]
            }
            if let idToken = tokens.idToken { parameters.append(("id_token", idToken)) }
        }
        if let state = request.state { parameters.append(("state", state)) }
        context.logger.info(
            "interaction completed",
            metadata: [
                "oid": "\(user.objectID)", "policy": "\(flow.name)", "client_id": "\(client.clientIDString)", "new_user": "\(newUser)",
            ])

        var response: Response
        if request.redirectURI == Self.outOfBand, let code {
            // As B2C does: the browser is sent on to `urn:ietf:wg:oauth:2.0:oob?code=…&state=…`,
            // which the embedded web views of the ADAL-era apps watch for (SPEC §2.8); a desktop
            // browser cannot follow it and stays on the page, which shows the code to a person.
            let target = Self.outOfBand + "?" + FormEncoding.encode(parameters)
            response = .html(
                try service.pages.render("oob", ["title": "Your sign-in code", "code": code, "navigateTo": target], tenant: tenant))
        } else {
            response = RedirectResponder.respond(redirectURI: request.redirectURI, mode: request.responseMode, parameters: parameters)
        }
        let sessionID = Secrets.randomToken()
        let session = SSOSession(
            tenantID: tenant.id, userID: user.id, identityProvider: identityProvider, authTime: authTime,
            expiresAt: now.addingTimeInterval(service.configuration.sessionLifetime))
        try await service.interactions.saveSession(idHash: Secrets.sha256Hex(sessionID), session: session, now: now)
        response.setCookie(cookie(Self.ssoCookie(for: tenant), value: sessionID))
        return response
    }

    /// The SSO session this browser holds for `tenant`, if any and still valid.
    func session(from request: Request, tenant: Tenant) async throws -> (session: SSOSession, user: UserAccount)? {
        guard let id = request.cookies[Self.ssoCookie(for: tenant)]?.value, !id.isEmpty,
            let session = try await service.interactions.session(idHash: Secrets.sha256Hex(id), now: service.now),
            session.tenantID == tenant.id, let user = try await service.users.user(id: session.userID)
        else { return nil }
        return (session, user)
    }
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

    init(_ error: B2CError) {
        self.init(
            status: error.status == .badRequest ? .badRequest : error.status, title: "Sorry, something went wrong",
            message: error.message, code: error.code)
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
