import Foundation

/// Where tokens come from: an Azure AD B2C tenant (one user flow per policy) or any OpenID
/// Connect issuer. The one place that parses authority URLs.
///
/// B2C authorities come in three shapes, all accepted (https://learn.microsoft.com/azure/active-directory-b2c/b2clogin):
/// - path: `https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi`
/// - `tfp`: `https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_susi`
/// - query: `https://contoso.b2clogin.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize?p=B2C_1_susi`
///
/// A B2C authority without a policy (`https://host/contoso.onmicrosoft.com/`, the tutorials'
/// `authority` setting) is allowed; each call then names its policy.
///
/// ```swift
/// let authority = try Authority("http://127.0.0.1:5080/todob2c.onmicrosoft.com/B2C_1_susi")
/// ```
public struct Authority: Sendable, Hashable, CustomStringConvertible {
    /// What kind of provider the authority names.
    public enum Kind: Sendable, Hashable {
        /// An Azure AD B2C tenant (by name or GUID), with the user flow when known.
        case b2c(tenant: String, policy: String?)
        /// A plain OpenID Connect issuer: discovery at `{issuer}/.well-known/openid-configuration`.
        case issuer
    }

    /// `scheme://host[:port]`, without a trailing slash.
    public let origin: String
    public let kind: Kind
    /// For `.issuer`: the issuer URL as given (no trailing slash).
    let issuerURL: String?

    /// Parses an authority URL in any of the forms above.
    ///
    /// - Throws: ``IdentityError/invalidConfiguration(_:)`` for anything that is not an absolute
    ///   `https` URL (plain `http` is allowed for loopback hosts only, so tokens never cross a
    ///   network in clear).
    public init(_ string: String) throws {
        guard let components = URLComponents(string: string.trimmingCharacters(in: .whitespaces)),
            let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty
        else { throw IdentityError.invalidConfiguration("'\(string)' is not an absolute authority URL") }
        guard scheme == "https" || (scheme == "http" && Self.isLoopback(host)) else {
            throw IdentityError.invalidConfiguration("the authority '\(string)' must use https (http is allowed for loopback hosts only)")
        }
        let port = components.port.map { ":\($0)" } ?? ""
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        origin = "\(scheme)://\(bracketed)\(port)"
        var segments = components.path.split(separator: "/").map(String.init)
        let queryPolicy = components.queryItems?.first { $0.name.lowercased() == "p" }?.value
        if segments.first?.lowercased() == "tfp" || segments.first?.lowercased() == "te" { segments.removeFirst() }
        let isB2C =
            queryPolicy != nil || segments.contains(where: Self.isPolicy) || host.lowercased().hasSuffix(".b2clogin.com")
            || segments.first.map { $0.lowercased().hasSuffix(".onmicrosoft.com") } == true
        if isB2C, let tenant = segments.first {
            let policy = queryPolicy ?? (segments.count > 1 && Self.isPolicy(segments[1]) ? segments[1] : nil)
            kind = .b2c(tenant: tenant, policy: policy)
            issuerURL = nil
        } else if isB2C {
            throw IdentityError.invalidConfiguration("the B2C authority '\(string)' names no tenant")
        } else {
            kind = .issuer
            let path = segments.isEmpty ? "" : "/" + segments.joined(separator: "/")
            issuerURL = origin + path
        }
    }

    /// A B2C authority from its parts.
    public init(b2cHost origin: String, tenant: String, policy: String?) throws {
        try self.init("\(origin)/\(tenant)/\(policy ?? "")")
    }

    /// The user flow, for B2C authorities that name one.
    public var policy: String? {
        if case .b2c(_, let policy) = kind { return policy }
        return nil
    }

    /// The same tenant with another user flow (profile edit, password reset, …). Issuers are
    /// returned unchanged.
    public func with(policy: String?) -> Authority {
        guard case .b2c(let tenant, _) = kind, let policy else { return self }
        return Authority(origin: origin, kind: .b2c(tenant: tenant, policy: policy), issuerURL: nil)
    }

    /// The tenant without its user flow: the Entra face's URLs (External ID's native
    /// authentication lives there). Issuers are returned unchanged.
    public var tenantOnly: Authority {
        guard case .b2c(let tenant, _) = kind else { return self }
        return Authority(origin: origin, kind: .b2c(tenant: tenant, policy: nil), issuerURL: nil)
    }

    private init(origin: String, kind: Kind, issuerURL: String?) {
        self.origin = origin
        self.kind = kind
        self.issuerURL = issuerURL
    }

    /// The canonical URL: `{origin}/{tenant}/{policy}` or the issuer.
    public var url: String {
        switch kind {
        case .b2c(let tenant, let policy): "\(origin)/\(tenant)" + (policy.map { "/\($0)" } ?? "")
        case .issuer: issuerURL ?? origin
        }
    }

    public var description: String { url }

    /// Where the OpenID configuration lives.
    ///
    /// - Throws: ``IdentityError/invalidConfiguration(_:)`` for a B2C authority without a policy
    ///   (B2C publishes one document per user flow).
    public func discoveryURL() throws -> URL {
        let text: String
        switch kind {
        case .b2c(let tenant, let policy):
            // Without a user flow: the tenant's Entra face (External ID's URLs, which native
            // authentication uses), whose discovery has no policy segment.
            text = policy.map { "\(origin)/\(tenant)/\($0)/v2.0/.well-known/openid-configuration" }
                ?? "\(origin)/\(tenant)/v2.0/.well-known/openid-configuration"
        case .issuer:
            text = "\(issuerURL ?? origin)/.well-known/openid-configuration"
        }
        guard let url = URL(string: text) else { throw IdentityError.invalidConfiguration("bad discovery URL \(text)") }
        return url
    }

    /// The host part used to key cached accounts (MSAL's "environment").
    public var environment: String {
        URLComponents(string: origin)?.host.map { host in URLComponents(string: origin)?.port.map { "\(host):\($0)" } ?? host } ?? origin
    }

    /// B2C's built-in (`B2C_1_`) and custom (`B2C_1A_`) policy names.
    static func isPolicy(_ segment: String) -> Bool { segment.lowercased().hasPrefix("b2c_1") }

    /// `localhost`, `::1` or an IPv4 literal in 127.0.0.0/8 — not a name that merely starts
    /// with "127." (`127.evil.example`).
    public static func isLoopback(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if bare == "localhost" || bare == "::1" { return true }
        let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { $0.count <= 3 && UInt8($0) != nil }
    }
}
