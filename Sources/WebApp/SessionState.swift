import Foundation
import HTTPTypes
import Hummingbird
import IdentityClientCore
import TaskClientCore
import WireCoding

/// One request's view of its browser session: the cookie, the stored record, and the SDK
/// client and Task API client that work with its tokens.
final class SessionState {
    let app: WebApp
    private(set) var id: String
    private(set) var session: WebSession
    /// Set when the cookie must be (re)sent: a new or rotated session.
    private var sendCookie: Bool

    private init(app: WebApp, id: String, session: WebSession, sendCookie: Bool) {
        self.app = app
        self.id = id
        self.session = session
        self.sendCookie = sendCookie
    }

    /// The session named by the request's cookie, if it exists and has not expired.
    static func load(_ request: Request, app: WebApp) async throws -> SessionState? {
        guard let id = request.cookies[WebApp.cookieName]?.value, !id.isEmpty, id.count <= 100,
            let session = try await app.sessions.load(id: id, now: Date())
        else { return nil }
        return SessionState(app: app, id: id, session: session, sendCookie: false)
    }

    /// The request's session, or a new anonymous one (short-lived, counted per client address);
    /// nil when `clientAddress` has started too many this hour.
    static func loadOrCreate(_ request: Request, app: WebApp, clientAddress: String) async throws -> SessionState? {
        if let existing = try await load(request, app: app) { return existing }
        let id = Secrets.randomToken()
        let now = Date()
        let session = WebSession.fresh(lifetime: app.configuration.anonymousSessionLifetime, now: now)
        guard
            try await app.sessions.createAnonymous(
                id: id, session, clientAddress: clientAddress, limitPerHour: app.configuration.anonymousSessionsPerAddressPerHour, now: now)
        else { return nil }
        return SessionState(app: app, id: id, session: session, sendCookie: true)
    }

    var signedIn: Bool { !session.tokens.entries.isEmpty }

    func update(_ change: @Sendable (inout WebSession) throws -> Void) async throws {
        session = try await app.sessions.modify(id: id) { session in
            try change(&session)
            return session
        }
    }

    /// The notice for this page, removed so it shows once.
    func takeNotice() async throws -> String? {
        guard let notice = session.notice else { return nil }
        try await update { $0.notice = nil }
        return notice
    }

    /// Moves the record to a new id (and a new CSRF token) and drops the old one.
    func rotate() async throws {
        let newID = Secrets.randomToken()
        // The stored record, not this copy: the SDK wrote the tokens through its own store.
        var moved = try await app.sessions.load(id: id, now: Date()) ?? session
        moved.csrfToken = Secrets.randomToken()
        // Signed in: the session now lives its full lifetime, and no longer counts against the
        // address that started it.
        moved.expiresAt = Date().addingTimeInterval(app.configuration.sessionLifetime)
        try await app.sessions.save(id: newID, moved)
        try await app.sessions.delete(id: id)
        id = newID
        session = moved
        sendCookie = true
    }

    func checkCSRF(_ token: String?) -> Bool {
        guard let token else { return false }
        return Secrets.constantTimeEquals(token, session.csrfToken)
    }

    /// This request's view of the session's tokens, shared by every client made for it.
    private lazy var tokens = TokenSnapshot(session.tokens)

    func client(redirectURI: String) -> ConfidentialClientApplication {
        app.client.with(tokenStore: SessionTokenStore(sessions: app.sessions, id: id, snapshot: tokens), redirectURI: redirectURI)
    }

    func account() async throws -> Account? {
        guard signedIn else { return nil }
        return try await client(redirectURI: "").currentAccount()
    }

    /// The Task API with this session's access token, refreshed silently when due.
    func tasks(account: Account) -> TaskClient {
        let client = client(redirectURI: "")
        let scopes = app.configuration.apiScopes
        return TaskClient(baseURL: app.configuration.apiBaseURL, transport: app.transport) { force in
            try await client.acquireTokenSilently(scopes: scopes, account: account, forceRefresh: force).accessToken
        }
    }

    func withCookie(_ response: Response) -> Response {
        guard sendCookie else { return response }
        var response = response
        let lifetime = max(0, Int(session.expiresAt.timeIntervalSinceNow))
        response.setCookie(Self.cookie(value: id, maxAge: lifetime, secure: app.configuration.secure))
        return response
    }

    static func expiredCookie(secure: Bool) -> Cookie { cookie(value: "", maxAge: 0, secure: secure) }

    /// The session cookie: script-proof (HttpOnly) and sent on top-level navigations only (Lax),
    /// so the identity service's redirect back brings it and other sites' forms do not.
    private static func cookie(value: String, maxAge: Int, secure: Bool) -> Cookie {
        Cookie(name: WebApp.cookieName, value: value, maxAge: maxAge, path: "/", secure: secure, httpOnly: true, sameSite: .lax)
    }
}
