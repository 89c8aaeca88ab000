import Foundation
import Hummingbird
import IdentityDirectory
import WireCoding

/// The cookies that bind a sign-in to the browser that started it: B2C's CSRF cookie
/// (`x-ms-cpim-csrf`), whose hash the transaction keeps, and the names of the per-tenant SSO and
/// "known browser" cookies.
package enum TransactionCookies {
    package static let csrf = "x-ms-cpim-csrf"

    /// B2C names its SSO cookie per tenant; `:` is not allowed in a cookie name, so `-` here.
    package static func singleSignOn(for tenant: Tenant) -> String { "x-ms-cpim-sso-\(tenant.guid)" }

    /// The browser cookie of `conditional` MFA: a random token the store knows per account.
    static func knownBrowser(for tenant: Tenant) -> String { "x-ms-cpim-mfa-\(tenant.guid)" }

    /// The browser's CSRF token: reused when the browser already has a well-formed one (so two
    /// tabs signing in at once do not invalidate each other), else a new random one.
    package static func csrfToken(from request: Request) -> (token: String, isNew: Bool) {
        if let existing = request.cookies[csrf]?.value, existing.count == 43, Base64URL.decode(existing) != nil {
            return (existing, false)
        }
        return (Secrets.randomToken(), true)
    }

    /// Double-submit check: the form's token equals the cookie, and the cookie is the one the
    /// transaction was started with (OWASP CSRF Prevention Cheat Sheet). Both comparisons are
    /// constant-time.
    static func checkCSRF(request: Request, form: RequestParameters, record: InteractionRecord) -> Bool {
        guard let cookie = request.cookies[csrf]?.value, let submitted = form["csrf_token"] else { return false }
        return Secrets.constantTimeEquals(cookie, submitted) && Secrets.constantTimeEquals(Secrets.sha256Hex(cookie), record.csrfHash)
    }

    /// The browser finishing a step must be the one that started the sign-in (its CSRF cookie is
    /// the transaction's), or an attacker could send a victim a callback link that signs the
    /// victim in as the attacker, or read a page meant for another browser (as B2C binds its
    /// pages to `x-ms-cpim-trans`; the second outside attack's F-9).
    static func requireStartingBrowser(_ request: Request, record: InteractionRecord) throws {
        guard let cookie = request.cookies[csrf]?.value, Secrets.constantTimeEquals(Secrets.sha256Hex(cookie), record.csrfHash)
        else {
            throw PageError(
                status: .forbidden, title: "Request blocked",
                message: "This sign-in was started in another browser. Start again from the application.")
        }
    }
}

/// The browser's single-sign-on sessions at the identity service: read from its SSO cookie
/// (the ids; the store keeps their hashes), started when a sign-in finishes, and written back
/// current first.
struct SingleSignOnSessions: Sendable {
    let interactions: any InteractionStore
    let users: any UserDirectory
    let cookies: BrowserCookies
    let lifetime: TimeInterval
    let clock: any IdentityClock

    /// A session this browser holds for a tenant, with its cookie id and user.
    struct Held: Sendable {
        let id: String
        let session: SSOSession
        let user: UserAccount
    }

    /// The valid sessions this browser holds for `tenant`, current first, one per user.
    func held(in request: Request, tenant: Tenant) async throws -> [Held] {
        var held: [Held] = []
        for id in SSOCookieValue.ids(request.cookies[TransactionCookies.singleSignOn(for: tenant)]?.value) {
            guard let session = try await interactions.session(idHash: Secrets.sha256Hex(id), now: clock.now),
                session.tenantID == tenant.id, !held.contains(where: { $0.session.userID == session.userID }),
                let user = try await users.user(id: session.userID), user.accountEnabled, !user.forcePasswordChange
            else { continue }
            held.append(Held(id: id, session: session, user: user))
        }
        return held
    }

    /// The sessions this browser holds that `authorization` may use without a password: none
    /// under `prompt=login`, none older than `max_age`, and only from identity providers the
    /// flow offers. SSO, the account picker and its choice all ask this one question.
    func usable(for authorization: AuthorizationRequest, flow: UserFlow, request: Request, tenant: Tenant) async throws -> [Held] {
        guard authorization.prompt != .login else { return [] }
        let now = clock.now
        return try await held(in: request, tenant: tenant).filter { held in
            let tooOld = authorization.maxAge.map { now.timeIntervalSince(held.session.authTime) > TimeInterval($0) } ?? false
            return !tooOld && flow.identityProviders.contains(held.session.identityProvider)
        }
    }

    /// The session single sign-on answers with: the browser's current one, never another
    /// account it also holds (if the current one has ended, the person signs in again). On the
    /// Entra face a `login_hint` picks the session of that account instead, as Entra does, and
    /// none if the browser holds no session for it.
    func singleSignOn(among usable: [Held], authorization: AuthorizationRequest, request: Request, tenant: Tenant) -> Held? {
        if authorization.protocolFace.dialect.singleSignOnFollowsLoginHint, let hint = authorization.loginHint {
            let wanted = EmailAddress.canonical(hint) ?? hint.lowercased()
            return usable.first { $0.user.signInName == wanted || $0.user.email.flatMap(EmailAddress.canonical) == wanted }
        }
        let current = SSOCookieValue.ids(request.cookies[TransactionCookies.singleSignOn(for: tenant)]?.value).first
        return usable.first { $0.id == current }
    }

    /// Saves a new session for `user` and returns its id (the cookie's value).
    func start(
        user: UserAccount, identityProvider: IdentityProviderKind, authTime: Date, secondFactor: Bool, tenant: Tenant
    ) async throws -> String {
        let id = Secrets.randomToken()
        let now = clock.now
        let session = SSOSession(
            tenantID: tenant.id, userID: user.id, identityProvider: identityProvider, authTime: authTime,
            expiresAt: now.addingTimeInterval(lifetime), secondFactor: secondFactor)
        try await interactions.saveSession(idHash: Secrets.sha256Hex(id), session: session, now: now)
        return id
    }

    /// The id of the session `hash` names, when the browser still holds it and the store still
    /// has it, unexpired, for `user` (a session ended meanwhile, by a password reset or a
    /// revocation, continues nothing).
    func live(_ hash: String, for user: UserAccount, in request: Request, tenant: Tenant) async throws -> String? {
        guard let id = id(hashed: hash, in: request, tenant: tenant),
            let session = try await interactions.session(idHash: hash, now: clock.now), session.tenantID == tenant.id,
            session.userID == user.id
        else { return nil }
        return id
    }

    /// The id in the browser's SSO cookie whose hash is `hash`, if it holds it.
    func id(hashed hash: String, in request: Request, tenant: Tenant) -> String? {
        SSOCookieValue.ids(request.cookies[TransactionCookies.singleSignOn(for: tenant)]?.value).first {
            Secrets.constantTimeEquals(Secrets.sha256Hex($0), hash)
        }
    }

    /// The SSO cookie with `current` first and the browser's other sessions after it: the
    /// first is the one single sign-on uses; all of them are the account picker's
    /// (`prompt=select_account`, SPEC §2.9).
    func cookie(current: String, request: Request, tenant: Tenant) -> Cookie {
        let name = TransactionCookies.singleSignOn(for: tenant)
        let others = SSOCookieValue.ids(request.cookies[name]?.value).filter { $0 != current }
        return cookies.cookie(name, value: SSOCookieValue.value([current] + others))
    }
}

/// The SSO cookie's value: the browser's session ids (each 43 base64url characters, so `.`
/// never occurs in one), current first, at most ``maximumSessions``.
package enum SSOCookieValue {
    static let maximumSessions = 5

    package static func ids(_ value: String?) -> [String] {
        guard let value, !value.isEmpty else { return [] }
        return value.split(separator: ".").prefix(maximumSessions).map(String.init).filter { $0.count == 43 && Base64URL.decode($0) != nil }
    }

    static func value(_ ids: [String]) -> String { ids.prefix(maximumSessions).joined(separator: ".") }
}

/// A failure shown to the person in the browser as a page, never sent to a redirect URI
/// (unregistered clients and redirect URIs, expired transactions).
package struct PageError: Error {
    package var status: HTTPResponse.Status
    package var title: String
    package var message: String
    package var code: String?

    package init(status: HTTPResponse.Status, title: String, message: String, code: String? = nil) {
        self.status = status
        self.title = title
        self.message = message
        self.code = code
    }

    package init(_ error: ProtocolFailure, face: ProtocolFace = .b2c) {
        let (code, message) = face.dialect.pageText(error)
        self.init(
            status: error.status == .badRequest ? .badRequest : error.status, title: "Sorry, something went wrong",
            message: message, code: code)
    }
}

/// The identity service's cookies: HttpOnly, SameSite=Lax, whole-site, and Secure under HTTPS.
package struct BrowserCookies: Sendable {
    let secure: Bool

    package func cookie(_ name: String, value: String, maxAge: Int? = nil) -> Cookie {
        Cookie(name: name, value: value, maxAge: maxAge, path: "/", secure: secure, httpOnly: true, sameSite: .lax)
    }

    package func expired(_ name: String) -> Cookie { cookie(name, value: "", maxAge: 0) }

    package init(secure: Bool) {
        self.secure = secure
    }
}
