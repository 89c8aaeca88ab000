import Foundation

/// Settings of the identity service. Defaults are the embedded development setup.
public struct IdentityServerConfiguration: Sendable {
    /// `http` or `https`; the scheme of every URL the service writes.
    public var scheme: String
    /// Used when a request's `Host` is missing or malformed.
    public var defaultAuthority: String
    /// bcrypt cost for new hashes; older hashes with a lower cost are upgraded at sign-in.
    public var passwordHashCost: UInt8
    public var lockout: LockoutPolicy
    /// RFC 6749 §4.1.2 recommends at most 10 minutes.
    public var codeLifetime: TimeInterval
    /// How long the SSO cookie lets a user skip the password.
    public var sessionLifetime: TimeInterval
    /// How long a user may take on the hosted pages.
    public var interactionLifetime: TimeInterval
    public var signingKeyBits: Int
    /// Show `/dev/outbox` and log verification codes (no mail leaves this machine).
    public var developmentMailbox: Bool

    public init(
        scheme: String = "http", defaultAuthority: String = "127.0.0.1:5080", passwordHashCost: UInt8 = 10,
        lockout: LockoutPolicy = .default, codeLifetime: TimeInterval = 600, sessionLifetime: TimeInterval = 86_400,
        interactionLifetime: TimeInterval = 3600, signingKeyBits: Int = 2048, developmentMailbox: Bool = true
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
    }

    var secureCookies: Bool { scheme == "https" }
}
