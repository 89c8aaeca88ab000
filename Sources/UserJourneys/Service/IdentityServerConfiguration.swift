import Foundation
import IdentityDirectory
import ServerSupport
import Storage

/// Settings of the identity service. Defaults are the embedded development setup.
public struct IdentityServerConfiguration: Sendable {
    /// `http` or `https`; the scheme of every URL the service writes.
    public var scheme: String
    /// Used when a request's `Host` is missing or malformed.
    public var defaultAuthority: String
    /// bcrypt cost for new hashes; older hashes with a lower cost are upgraded at sign-in.
    public var passwordHashCost: UInt8
    /// The one default of ``passwordHashCost`` (OWASP: at least 10), which `serve`'s setting shows and uses.
    public static let defaultPasswordHashCost: UInt8 = 10
    public var lockout: LockoutPolicy
    /// RFC 6749 §4.1.2 recommends at most 10 minutes.
    public var codeLifetime: TimeInterval
    /// How long the SSO cookie lets a user skip the password.
    public var sessionLifetime: TimeInterval
    /// How long a user may take on the hosted pages.
    public var interactionLifetime: TimeInterval
    public var signingKeyBits: Int
    /// Show `/dev/outbox` and log verification codes (no mail leaves this machine). Only for a
    /// server on loopback: the outbox holds password-reset codes.
    public var developmentMailbox: Bool
    /// Host names the service answers to. URLs and issuers are built from the request's `Host`
    /// only when it is one of these, and the dev outbox answers only to them, which also defeats
    /// DNS rebinding against a loopback server.
    public var allowedHosts: Set<String>
    /// Serve the simulated Facebook (`/facebook.com/dialog/oauth`), which signs anyone in as any
    /// federated user by email alone. Off unless asked for; `todo-server serve` refuses to turn
    /// it on for a server reachable beyond loopback (the security issue's M-2).
    public var simulatedFacebook: Bool
    /// The port this service listens on: a `Host` naming another port is not trusted for URLs
    /// (the security issue's L-11). nil (tests on ephemeral ports) accepts any.
    public var listenPort: Int?
    /// Sign-ins one client address may start per hour: far above what people do, low enough
    /// that stored transactions stay bounded (the security issue's L-4).
    public var transactionsPerAddressPerHour = 600
    /// How long a just-rotated refresh token may be presented again and get the same successor
    /// (a client racing itself; Okta and Auth0 keep such an interval). 0 turns it off: every
    /// reuse revokes the family (RFC 9700 §4.14.2).
    public var refreshTokenReuseInterval: TimeInterval = Self.defaultRefreshTokenReuseInterval
    /// The one default of ``refreshTokenReuseInterval``, which `serve`'s setting shows and uses.
    public static let defaultRefreshTokenReuseInterval: TimeInterval = 5
    /// `scheme://host[:port]` clients reach the service at, behind a load balancer or in a
    /// container (Keycloak's `hostname`): every issuer and URL the service writes uses it,
    /// whatever `Host` a request came with, so instances reached under different names agree.
    /// nil: URLs follow the request's (allowed) `Host`, as B2C's do.
    public var publicOrigin: String?
    /// Load balancers whose `X-Forwarded-For` names the client, for per-source limits.
    public var trustedProxies: [String] = []
    /// How long a request's PostgreSQL statement may go unanswered (``StatementDeadline``).
    public var statementDeadline: Duration = StatementDeadline.request
    /// Verification codes sent and wrong codes tried per address (sign-up and reset).
    public var codeLimits = CodeLimits.default
    /// How long the sign-in and audit logs keep a record: B2C keeps its audit logs 7 days
    /// (`serve --log-retention-days`).
    public var logRetention: TimeInterval = 7 * 86_400
    /// A CA certificate (PEM) trusted besides the system's when a custom policy's REST profile
    /// presents a client certificate (`AuthenticationType` `ClientCertificate`): `serve` sets the
    /// development CA under `--tls`, or `--authority-ca`, so a service on this machine can be called.
    public var outboundCACertificatePath: String?

    public init(
        scheme: String = "http", defaultAuthority: String = "127.0.0.1:5080", passwordHashCost: UInt8 = defaultPasswordHashCost,
        lockout: LockoutPolicy = .default, codeLifetime: TimeInterval = 600, sessionLifetime: TimeInterval = 86_400,
        interactionLifetime: TimeInterval = 3600, signingKeyBits: Int = 2048, developmentMailbox: Bool = true,
        allowedHosts: Set<String> = ["localhost", "127.0.0.1", "::1"], simulatedFacebook: Bool = false, listenPort: Int? = nil
    ) {
        self.scheme = scheme
        self.defaultAuthority = defaultAuthority
        self.passwordHashCost = passwordHashCost
        self.lockout = lockout
        self.codeLifetime = codeLifetime
        self.sessionLifetime = sessionLifetime
        self.interactionLifetime = interactionLifetime
        self.signingKeyBits = signingKeyBits
        self.developmentMailbox = developmentMailbox
        self.allowedHosts = Set(allowedHosts.map { $0.lowercased() })
        self.simulatedFacebook = simulatedFacebook
        self.listenPort = listenPort
    }

    package var secureCookies: Bool { scheme == "https" }

    /// Whether the simulated Facebook is served: asked for, and on a server nothing but this
    /// machine reaches — no trusted balancer, no public origin elsewhere (the second outside
    /// attack's F-2: behind a balancer anyone could sign in as any federated user). Its pages
    /// also answer loopback `Host`s only (``SimulatedFacebook``).
    package var servesSimulatedFacebook: Bool {
        simulatedFacebook && trustedProxies.isEmpty
            && (publicOrigin.map { URLComponents(string: $0)?.host.map(Loopback.isHost) ?? false } ?? true)
    }

}
