import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// The admin console at `/admin` (SPEC §2.13), server-rendered, for the default tenant.
///
/// An admin signs in through the tenant's own default flow, as any app's user does: the console
/// is an app registration of the tenant (a public client with PKCE, registered on first use for
/// the origin it is reached on), and its sign-in is the authorization-code flow, the code
/// redeemed here. Only an enabled account holding the `admin` directory role gets a console
/// session. Every change goes through ``IdentityAdministration`` as that admin, so the audit
/// log names them; every form carries the session's CSRF token and is refused from another site.
struct AdminConsole: Sendable {
    let server: IdentityServer
    let sessions: ConsoleSessions
    let pages: ConsolePages

    static let sessionCookie = "todo_console"
    static let signInCookie = "todo_console_signin"

    /// A signed-in admin.
    struct Admin: Sendable {
        let user: UserAccount
        let tenant: Tenant
        let session: ConsoleSessions.Session
        /// The directory's door, with this admin as the initiator of every change.
        let administration: IdentityAdministration
    }

    /// The console's client id in `tenant`: derived from the tenant's id, so every instance agrees.
    static func clientID(of tenant: Tenant) -> UUID { nameBasedID("todo-admin-console:\(tenant.guid)") }

    /// A UUID every instance derives alike from `name` (``Foundation/UUID/init(nameBased:)``).
    static func nameBasedID(_ name: String) -> UUID { UUID(nameBased: name) }

    // MARK: Signing in

    /// The admin of the request's console cookie: a live session of an enabled account of the
    /// default tenant that still holds the `admin` role; nil otherwise.
    func admin(_ request: Request, context: IdentityRequestContext) async throws -> Admin? {
        guard let token = request.cookies[Self.sessionCookie]?.value, !token.isEmpty,
            let session = try await sessions.session(token: token, now: server.clock.now),
            let tenant = try await server.tenants.defaultTenant(), tenant.id == session.tenantID,
            let user = try await server.users.user(id: session.userID), user.tenantID == tenant.id, user.accountEnabled,
            try await server.administration.roles(of: user).contains(.admin)
        else { return nil }
        let initiator = AuditInitiator(
            actor: .user(id: user.id, userPrincipalName: user.presentableEmail, displayName: user.displayName),
            correlationID: context.correlationID, ipAddress: context.clientAddress)
        return Admin(user: user, tenant: tenant, session: session, administration: server.administration.acting(as: initiator))
    }

    /// Sends the browser to the tenant's default flow, with PKCE and a state kept in a cookie.
    func startSignIn(_ request: Request) async throws -> Response {
        guard let tenant = try await server.tenants.defaultTenant() else {
            return pages.message("No tenant", "This server has no tenant to administer yet.", admin: nil, status: .serviceUnavailable)
        }
        let origin = server.service.hosts.origin(of: request)
        guard try await registerConsole(in: tenant), server.service.hosts.knownOrigins.contains(origin) else {
            return pages.message(
                "Not here", "Open the console on this server's own address: \(server.service.hosts.knownOrigins.first ?? "")/admin.",
                admin: nil, status: .badRequest)
        }
        let redirect = Self.redirectURI(origin: origin)
        let (state, verifier, nonce) = (Secrets.randomToken(byteCount: 24), Secrets.randomToken(byteCount: 32), Secrets.randomToken(byteCount: 16))
        let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
        let query = FormEncoding.encode([
            ("client_id", Self.clientID(of: tenant).uuidString.lowercased()), ("response_type", "code"), ("redirect_uri", redirect),
            ("scope", "openid"), ("state", state), ("nonce", nonce), ("code_challenge", challenge), ("code_challenge_method", "S256"),
            // A console session needs a sign-in now, not the browser's single sign-on (a shared
            // machine, a session days old): the code's auth_time is checked at redemption.
            ("response_mode", "query"), ("prompt", "login"),
        ])
        let authorize = "\(server.service.hosts.origin(of: request))/\(tenant.name)/\(tenant.defaultPolicy)/oauth2/v2.0/authorize?\(query)"
        var response = Response(status: .seeOther, headers: [.location: authorize, .cacheControl: "no-store"])
        // Lax: the flow's redirect back to the console is a top-level navigation from this site.
        response.setCookie(
            Cookie(
                name: Self.signInCookie, value: "\(state).\(verifier)", maxAge: 600, path: "/admin", secure: secure(request),
                httpOnly: true, sameSite: .lax))
        return response
    }

    /// `GET /admin/signin?code&state`: the flow's answer. The state must be the one this browser
    /// was given; the code must be the console's, for its redirect URI and its PKCE verifier.
    @Sendable func signedIn(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let query = RequestParameters(query: request.uri.query)
        let parts = (request.cookies[Self.signInCookie]?.value ?? "").split(separator: ".", maxSplits: 1).map(String.init)
        // Whatever the answer, this sign-in's state is spent.
        func refused(_ title: String, _ text: String, _ status: HTTPResponse.Status) -> Response {
            var response = pages.message(title, text, admin: nil, status: status)
            response.setCookie(Cookie(name: Self.signInCookie, value: "", maxAge: 0, path: "/admin", secure: secure(request), httpOnly: true))
            return response
        }
        guard parts.count == 2, let state = query.nonEmpty("state"), Self.same(state, parts[0]) else {
            return refused("Sign-in not recognised", "This sign-in was not started here. Open /admin to sign in.", .badRequest)
        }
        if let error = query.nonEmpty("error") {
            return refused("Sign-in failed", String(TextRules.printable(query["error_description"] ?? error).prefix(300)), .forbidden)
        }
        guard let code = query.nonEmpty("code"), let tenant = try await server.tenants.defaultTenant(),
            let user = try await redeem(code, verifier: parts[1], tenant: tenant, request: request)
        else {
            return refused("Sign-in failed", "The sign-in could not be completed. Open /admin to try again.", .badRequest)
        }
        guard user.accountEnabled, try await server.administration.roles(of: user).contains(.admin) else {
            context.logger.warning("console sign-in refused: not an administrator", metadata: ["oid": "\(user.objectID)"])
            return refused("Not an administrator", "This account does not hold the admin role of this tenant.", .forbidden)
        }
        // A new session replaces the browser's previous one.
        if let previous = request.cookies[Self.sessionCookie]?.value, !previous.isEmpty { try await sessions.end(token: previous) }
        let token = try await sessions.start(for: user, now: server.clock.now)
        var response = Response(status: .seeOther, headers: [.location: "/admin/users", .cacheControl: "no-store"])
        response.setCookie(
            Cookie(
                name: Self.sessionCookie, value: token, maxAge: Int(ConsoleSessions.lifetime), path: "/admin", secure: secure(request),
                httpOnly: true, sameSite: .strict))
        response.setCookie(Cookie(name: Self.signInCookie, value: "", maxAge: 0, path: "/admin", secure: secure(request), httpOnly: true))
        return response
    }

    /// `POST /admin/signout`: ends the session (a form with the CSRF token, as every post).
    @Sendable func signOut(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { _, _ in
            if let token = request.cookies[Self.sessionCookie]?.value { try await sessions.end(token: token) }
            var response = pages.message("Signed out", "You are signed out of the console.", admin: nil, status: .ok)
            response.setCookie(Cookie(name: Self.sessionCookie, value: "", maxAge: 0, path: "/admin", secure: secure(request), httpOnly: true))
            return response
        }
    }

    /// The user the code was issued for, when it is the console's code for this request's redirect
    /// URI and `verifier`; nil otherwise (the code is spent either way).
    private func redeem(_ code: String, verifier: String, tenant: Tenant, request: Request) async throws -> UserAccount? {
        let clientID = Self.clientID(of: tenant).uuidString.lowercased()
        guard code.count <= 512,
            case .redeemed(let grant) = try await server.grants.redeemCode(
                code, clientID: clientID, policy: tenant.defaultPolicy, face: .b2c, now: server.clock.now),
            grant.tenantID == tenant.id, grant.redirectURI == Self.redirectURI(origin: server.service.hosts.origin(of: request)),
            let challenge = grant.codeChallenge, Self.same(Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8)))), challenge),
            grant.authTime >= server.clock.now.addingTimeInterval(-Self.freshSignIn)
        else { return nil }
        return try await server.users.user(id: grant.userID)
    }

    static func redirectURI(origin: String) -> String { "\(origin)/admin/signin" }

    /// How recent the sign-in behind a console session must be.
    static let freshSignIn: TimeInterval = 300

    /// The console's app registration in `tenant`, its redirect URIs exactly this server's own
    /// origins (``HostPolicy/knownOrigins``, from the configuration, never from a request):
    /// made, or brought up to date, on first use. True when it is.
    func registerConsole(in tenant: Tenant) async throws -> Bool {
        // Each origin's sign-in and "Run user flow" answers.
        let redirects = server.service.hosts.knownOrigins.flatMap { [Self.redirectURI(origin: $0), "\($0)/admin/run"] }
        let clientID = Self.clientID(of: tenant)
        var app =
            try await server.tenants.application(tenantID: tenant.id, clientID: clientID.uuidString.lowercased())
            ?? AppRegistration(
                clientID: clientID, tenantID: tenant.id, displayName: "TodoB2C admin console", kind: .public, redirectURIs: [],
                requirePKCE: true)
        // "Run user flow" asks for an ID token by form post, as B2C's does for jwt.ms; the
        // console's own sign-in is the code flow with PKCE.
        // The whole shape, whatever a declaration wrote under this client id: a public client
        // with PKCE, no API permissions, no password grant.
        let shaped = app.redirectURIs == redirects && app.allowImplicit && app.kind == .public && app.requirePKCE
            && app.apiPermissions.isEmpty && !app.allowPublicClientFlows && app.userFlow == nil
        guard !shaped else { return true }
        app.redirectURIs = redirects
        app.allowImplicit = true
        app.kind = .public
        app.requirePKCE = true
        app.apiPermissions = []
        app.allowPublicClientFlows = false
        app.userFlow = nil
        try await server.tenants.removeSecrets(clientID: clientID)
        try await server.tenants.save(app, now: server.clock.now)
        return true
    }

    // MARK: Every page and form

    /// A page for a signed-in admin, or the way to sign in.
    func page(_ request: Request, context: IdentityRequestContext, _ body: (Admin) async throws -> Response) async throws -> Response {
        guard let admin = try await admin(request, context: context) else { return try await startSignIn(request) }
        return try await body(admin)
    }

    /// A form post of a signed-in admin: refused unless it carries the session's CSRF token and
    /// comes from this site (`Sec-Fetch-Site`, `Origin`, when the browser sends them).
    func posting(
        _ request: Request, context: IdentityRequestContext, upTo limit: Int? = nil,
        _ body: (Admin, RequestParameters) async throws -> Response
    ) async throws -> Response {
        guard let admin = try await admin(request, context: context) else {
            return pages.message("Sign in first", "Your console session has ended. Open /admin to sign in again.", admin: nil, status: .unauthorized)
        }
        let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased()
        let origin = request.headers[HTTPField.Name("Origin")!]
        let crossSite = (site != nil && site != "same-origin") || (origin != nil && origin != server.service.hosts.origin(of: request))
        let form: RequestParameters
        do {
            form = try await FormBody.read(request, context: context, upTo: limit)
        } catch {
            let most = limit ?? context.maxUploadSize
            return pages.message("Not taken", "The console takes form posts of at most \(most / 1024) KiB.", admin: admin, status: .badRequest)
        }
        guard !crossSite, let sent = form["csrf"], Self.same(sent, admin.session.csrf) else {
            context.logger.warning("console post refused: cross-site or without the session's token")
            return pages.message("Refused", "This form did not come from your console session.", admin: admin, status: .forbidden)
        }
        return try await body(admin, form)
    }

    private func secure(_ request: Request) -> Bool { server.service.hosts.origin(of: request).hasPrefix("https:") }

    /// Constant-time equality of two secrets.
    static func same(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
