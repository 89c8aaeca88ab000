import Foundation
import Logging
import Synchronization
import WireCoding

/// `prompt` values B2C understands (https://learn.microsoft.com/azure/active-directory-b2c/error-codes).
public enum Prompt: String, Sendable, Codable {
    case login
    case none
    case consent
    case selectAccount = "select_account"
    /// Straight to the sign-up page.
    case create
}

/// The options of one interactive sign-in.
public struct InteractiveParameters: Sendable {
    /// API scopes; `openid` and `offline_access` are always added.
    public var scopes: [String]
    /// The user flow, when it is not the authority's (sign-up, profile edit, password reset).
    public var policy: String?
    public var prompt: Prompt?
    public var loginHint: String?
    /// `facebook.com` goes straight to Facebook in B2C.
    public var domainHint: String?
    public var extraQueryParameters: [String: String]
    /// Sent as `client-request-id`; generated when nil.
    public var correlationID: UUID?

    public init(
        scopes: [String], policy: String? = nil, prompt: Prompt? = nil, loginHint: String? = nil, domainHint: String? = nil,
        extraQueryParameters: [String: String] = [:], correlationID: UUID? = nil
    ) {
        self.scopes = scopes
        self.policy = policy
        self.prompt = prompt
        self.loginHint = loginHint
        self.domainHint = domainHint
        self.extraQueryParameters = extraQueryParameters
        self.correlationID = correlationID
    }
}

/// An authorization request in flight: the URL to open and the secrets to check the response
/// with. A web app keeps it in the user's server-side session between the redirect out and the
/// redirect back; it must never reach the browser.
public struct AuthorizationRequest: Sendable, Codable, Hashable {
    public var url: URL
    public var state: String
    public var nonce: String
    public var codeVerifier: String
    public var redirectURI: String
    /// The authority with its user flow.
    public var authority: String
    public var scopes: [String]
    public var correlationID: String
}

/// What every client application is configured with.
public struct ClientConfiguration: Sendable {
    /// The application (client) id registered at the identity service.
    public var clientID: String
    public var authority: Authority
    /// The registered redirect URI: `http://127.0.0.1` (any port) for loopback, a custom scheme
    /// (`msauth.<bundle id>://auth`) on iOS, the web app's reply URL for confidential clients.
    public var redirectURI: String
    public var tokenStore: any TokenStore
    public var transport: any HTTPTransport
    public var logger: Logger
    /// Now; tests inject a clock to expire tokens without waiting.
    public var clock: @Sendable () -> Date

    public init(
        clientID: String, authority: Authority, redirectURI: String = "http://127.0.0.1", tokenStore: any TokenStore = InMemoryTokenStore(),
        transport: any HTTPTransport, logger: Logger = Logger(label: "IdentityClient"),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.clientID = clientID
        self.authority = authority
        self.redirectURI = redirectURI
        self.tokenStore = tokenStore
        self.transport = transport
        self.logger = logger
        self.clock = clock
    }
}

/// A native app's client (no secret): sign in through the browser with PKCE, or with a
/// password for scripts; get tokens silently afterwards. The SDK's MSAL-like entry point.
///
/// ```swift
/// let app = PublicClientApplication(configuration: ClientConfiguration(
///     clientID: settings.clientID, authority: try Authority(settings.authority + "B2C_1_susi")))
/// let result = try await app.acquireTokenInteractively(
///     InteractiveParameters(scopes: [settings.clientID]), authenticator: LoopbackWebAuthenticator())
/// ```
public struct PublicClientApplication: Sendable {
    public let configuration: ClientConfiguration
    let broker: TokenBroker

    public init(configuration: ClientConfiguration) {
        self.configuration = configuration
        broker = TokenBroker(configuration: configuration, clientSecret: nil)
    }

    /// Signs in through the identity service's pages: authorization code + PKCE (S256) + state +
    /// nonce, then the code is redeemed and the tokens stored. The account becomes current.
    ///
    /// - Throws: ``IdentityError/userCanceled`` (Cancel), ``IdentityError/passwordResetRequested``
    ///   ("Forgot your password?": run the reset policy next), ``IdentityError/stateMismatch``,
    ///   ``IdentityError/nonceMismatch``, ``IdentityError/server(error:description:code:correlationID:)``.
    public func acquireTokenInteractively(
        _ parameters: InteractiveParameters, authenticator: any WebAuthenticator
    ) async throws -> AuthenticationResult {
        let broker = self.broker
        let slot = Slot<AuthorizationRequest>()
        let response = try await authenticator.authenticate(redirectURI: configuration.redirectURI) { redirectURI, mode in
            slot.keep(try await broker.authorizationRequest(parameters, redirectURI: redirectURI, responseMode: mode)).url
        }
        guard let request = slot.value else { throw IdentityError.invalidConfiguration("the authenticator never started") }
        return try await broker.redeem(request, response: response)
    }

    /// A cached access token while it has more than five minutes left; otherwise one refresh
    /// request (shared by concurrent callers), whose rotated refresh token is stored before this
    /// returns.
    ///
    /// - Throws: ``IdentityError/interactionRequired(reason:code:correlationID:)`` when the
    ///   refresh token is missing, expired or revoked.
    public func acquireTokenSilently(scopes: [String], account: Account, forceRefresh: Bool = false) async throws -> AuthenticationResult {
        try await broker.acquireTokenSilent(scopes: scopes, account: account, forceRefresh: forceRefresh)
    }

    /// Resource owner password credentials (B2C's ROPC user flow), for scripts and tests only:
    /// the app sees the password.
    public func acquireToken(username: String, password: String, scopes: [String], policy: String? = nil) async throws
        -> AuthenticationResult
    {
        try await broker.acquireToken(username: username, password: password, scopes: scopes, policy: policy)
    }

    /// Every account with cached tokens for this client.
    public func accounts() async throws -> [Account] { try await broker.accounts() }

    /// The account by home account id, username (case-insensitive) or object id.
    public func account(matching identifier: String) async throws -> Account? {
        try await accounts().first {
            $0.homeAccountID == identifier || $0.username?.lowercased() == identifier.lowercased() || $0.objectID == identifier
        }
    }

    /// The account last signed in or switched to.
    public func currentAccount() async throws -> Account? { try await broker.currentAccount() }

    /// Makes `account` the current one.
    public func setCurrentAccount(_ account: Account) async throws { try await broker.setCurrent(account) }

    /// Signs the account out: its tokens are forgotten; with an authenticator, the identity
    /// service's session cookie is ended too (`end_session_endpoint`), so the next interactive
    /// sign-in asks for the password again.
    public func signOut(_ account: Account, browser authenticator: (any WebAuthenticator)? = nil) async throws {
        let idToken = try await broker.remove(account)
        guard let authenticator else { return }
        let broker = self.broker
        let state = Secrets.randomToken(byteCount: 16)
        let slot = Slot<URL>()
        _ = try? await authenticator.authenticate(redirectURI: configuration.redirectURI) { redirectURI, _ in
            slot.keep(try await broker.endSessionURL(account: account, idToken: idToken, postLogoutRedirectURI: redirectURI, state: state))
        }
        if slot.value == nil { throw IdentityError.invalidConfiguration("the sign-out page could not be opened") }
    }

    /// The identity service's OpenID configuration for a user flow (cached).
    public func openIDConfiguration(policy: String? = nil) async throws -> OpenIDConfiguration {
        try await broker.configuration(configuration.authority.with(policy: policy))
    }
}

/// A server-side web app's client: it holds a secret, so the token endpoint authenticates it.
/// Make one per user session with that session's token store (``with(tokenStore:)`` shares the
/// discovery cache), like MSAL's confidential clients.
public struct ConfidentialClientApplication: Sendable {
    public let configuration: ClientConfiguration
    let broker: TokenBroker

    /// - Parameter clientSecret: sent with HTTP Basic authentication (client_secret_basic, RFC 6749 §2.3.1).
    public init(configuration: ClientConfiguration, clientSecret: String) {
        self.configuration = configuration
        broker = TokenBroker(configuration: configuration, clientSecret: clientSecret)
    }

    private init(configuration: ClientConfiguration, broker: TokenBroker) {
        self.configuration = configuration
        self.broker = broker
    }

    /// The same client over another token store (one user's session), optionally with another
    /// of its registered redirect URIs.
    public func with(tokenStore: any TokenStore, redirectURI: String? = nil) -> ConfidentialClientApplication {
        var configuration = self.configuration
        configuration.tokenStore = tokenStore
        if let redirectURI { configuration.redirectURI = redirectURI }
        return ConfidentialClientApplication(
            configuration: configuration,
            broker: TokenBroker(configuration: configuration, clientSecret: broker.clientSecret, discovery: broker.discovery))
    }

    /// Step one of the code flow: where to send the browser, and what to keep in the session.
    public func authorizationRequest(_ parameters: InteractiveParameters, responseMode: ResponseMode = .query) async throws
        -> AuthorizationRequest
    {
        try await broker.authorizationRequest(parameters, redirectURI: configuration.redirectURI, responseMode: responseMode)
    }

    /// Step two: checks the redirect's `state`, redeems the code with the PKCE verifier and the
    /// secret, checks the ID token's `nonce`, and stores the tokens.
    public func acquireToken(for request: AuthorizationRequest, response parameters: [String: String]) async throws -> AuthenticationResult
    {
        try await broker.redeem(request, response: parameters)
    }

    /// See ``PublicClientApplication/acquireTokenSilently(scopes:account:forceRefresh:)``.
    public func acquireTokenSilently(scopes: [String], account: Account, forceRefresh: Bool = false) async throws -> AuthenticationResult {
        try await broker.acquireTokenSilent(scopes: scopes, account: account, forceRefresh: forceRefresh)
    }

    /// The account of this store, if signed in.
    public func currentAccount() async throws -> Account? { try await broker.currentAccount() }

    /// Forgets the account's tokens and returns the identity service's sign-out URL to redirect
    /// the browser to.
    public func signOut(_ account: Account, postLogoutRedirectURI: String?) async throws -> URL {
        let idToken = try await broker.remove(account)
        return try await broker.endSessionURL(
            account: account, idToken: idToken, postLogoutRedirectURI: postLogoutRedirectURI, state: nil)
    }
}

/// Carries a value built inside an authenticator's `start` callback out to the caller.
final class Slot<Value: Sendable>: Sendable {
    private let stored = Mutex<Value?>(nil)

    var value: Value? { stored.withLock { $0 } }

    func keep(_ value: Value) -> Value {
        stored.withLock { $0 = value }
        return value
    }
}
