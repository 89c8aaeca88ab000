import Foundation
import TodoModels

/// An upstream OpenID Connect provider declared by a tenant (SPEC §2.11; B2C's "OpenID Connect
/// identity provider"): its metadata URL, this tenant's client there, the scope asked for, and
/// which of its claims become the account's id, names and email.
public struct UpstreamProvider: Sendable, Codable, Equatable {
    public struct ClaimsMapping: Sendable, Codable, Equatable {
        public var userId: String?
        public var displayName: String?
        public var givenName: String?
        public var surname: String?
        public var email: String?

        public init(
            userId: String? = nil, displayName: String? = nil, givenName: String? = nil, surname: String? = nil, email: String? = nil
        ) {
            self.userId = userId
            self.displayName = displayName
            self.givenName = givenName
            self.surname = surname
            self.email = email
        }
    }

    /// The name flows list and `domain_hint` may give.
    public var name: String
    /// `openIdConnect`, the only type served.
    public var type: String
    public var displayName: String?
    public var metadataUrl: String
    public var clientId: String
    /// Sealed with the data key at rest.
    public var clientSecret: String?
    public var scope: String?
    /// `code` (the code flow with PKCE), the only one a declared provider has; a custom policy's
    /// OpenID Connect profile may have B2C's default `id_token` (posted back, ``answersWithIDToken``).
    public var responseType: String?
    /// Whether the provider answers with an ID token in a form post rather than a code.
    package var answersWithIDToken: Bool { responseType == "id_token" }
    public var claimsMapping: ClaimsMapping?
    /// How the client secret is sent to the provider's token endpoint. Unset: as the provider's
    /// `token_endpoint_auth_methods_supported` allows, `client_secret_post` first — B2C's default
    /// for an OpenID Connect provider (IEF's `token_endpoint_auth_method` metadata).
    public var tokenEndpointAuthMethod: TokenEndpointAuthMethod?
    /// A custom policy's plain OAuth 2.0 provider (no discovery, no ID token); never declared in
    /// YAML, so not among the coded keys. Its `metadataUrl` is its authorization endpoint.
    package var oauth2: UpstreamOAuth2?
    /// A multi-tenant OpenID Connect provider's accepted token issuers (a custom policy's
    /// `ValidTokenIssuerPrefixes`): its metadata names a template issuer (Entra's
    /// `…/{tenantid}/v2.0`) and each token the issuer of its own tenant, which must begin with one
    /// of these. Nil for a provider with one issuer. Not declared in YAML.
    package var validIssuerPrefixes: [String]?

    enum CodingKeys: String, CodingKey {
        case name, type, displayName, metadataUrl, clientId, clientSecret, scope, responseType, claimsMapping, tokenEndpointAuthMethod
    }

    /// The client authentication methods of RFC 6749 §2.3.1 served. B2C's third,
    /// `private_key_jwt`, needs a policy key the provider trusts, which a declaration cannot name
    /// here; it is refused when declared.
    public enum TokenEndpointAuthMethod: String, Sendable, Codable, CaseIterable {
        case clientSecretPost = "client_secret_post"
        case clientSecretBasic = "client_secret_basic"
    }

    public init(
        name: String, displayName: String? = nil, metadataUrl: String, clientId: String, clientSecret: String? = nil, scope: String? = nil,
        claimsMapping: ClaimsMapping? = nil, tokenEndpointAuthMethod: TokenEndpointAuthMethod? = nil
    ) {
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.name = name
        self.type = "openIdConnect"
        self.displayName = displayName
        self.metadataUrl = metadataUrl
        self.clientId = clientId
        self.clientSecret = clientSecret
        self.scope = scope
        self.responseType = "code"
        self.claimsMapping = claimsMapping
    }

    static let wellKnownSuffix = "/.well-known/openid-configuration"

    /// The issuer the metadata must name: the metadata URL without its well-known suffix
    /// (OpenID Connect Discovery 1.0 §4.3: the issuer returned must be the one the URL was
    /// made from). Users of this provider are kept under it, and it is their `idp`.
    package var issuer: String {
        metadataUrl.hasSuffix(Self.wellKnownSuffix) ? String(metadataUrl.dropLast(Self.wellKnownSuffix.count)) : metadataUrl
    }

    package var kind: IdentityProviderKind { .upstream(issuer: issuer) }

    /// Whether `named`, the issuer a multi-tenant provider's metadata gives, is this provider's
    /// template: its own issuer with one path segment standing for any tenant (`{tenantid}`, as
    /// Entra's `common` and `organizations` metadata write it).
    package func isIssuerTemplate(_ named: String) -> Bool {
        guard validIssuerPrefixes != nil, named.contains("{tenantid}") else { return false }
        let (template, own) = (named.split(separator: "/", omittingEmptySubsequences: false), issuer.split(separator: "/", omittingEmptySubsequences: false))
        return template.count == own.count && zip(template, own).allSatisfy { $0 == "{tenantid}" || $0 == $1 }
    }

    /// The issuer a multi-tenant provider's token must carry: the template with its tenant id
    /// (`tid`), and one of the accepted prefixes; nil when the token's issuer is not acceptable.
    package func tenantIssuer(template: String, tenantID: String?, claimed: String?) -> String? {
        guard let prefixes = validIssuerPrefixes, let tenantID, !tenantID.isEmpty, !tenantID.contains("/"), let claimed,
            claimed == template.replacingOccurrences(of: "{tenantid}", with: tenantID),
            prefixes.contains(where: { !$0.isEmpty && claimed.hasPrefix($0) })
        else { return nil }
        return claimed
    }

    /// The method used at `metadata`'s token endpoint: the declared one, else the first of
    /// `client_secret_post` and `client_secret_basic` the provider lists, else B2C's default.
    package func authMethod(at metadata: UpstreamMetadata) -> TokenEndpointAuthMethod {
        if let tokenEndpointAuthMethod { return tokenEndpointAuthMethod }
        guard let supported = metadata.tokenEndpointAuthMethods else { return .clientSecretPost }
        return TokenEndpointAuthMethod.allCases.first { supported.contains($0.rawValue) } ?? .clientSecretPost
    }
    package var label: String { displayName ?? name }
    package var requestedScope: String {
        // A plain OAuth 2.0 provider gets the scope as the profile wrote it (it may know no `openid`).
        if oauth2 != nil { return scope ?? "" }
        let scopes = (scope ?? "openid profile email").split(separator: " ").map(String.init)
        return (scopes.contains("openid") ? scopes : ["openid"] + scopes).joined(separator: " ")
    }

    package static func sealingContext(tenantID: UUID, name: String) -> String {
        "tenants.settings.identityProviders:\(tenantID.uuidString.lowercased()):\(name):clientSecret"
    }

    func problems() -> [String] {
        var problems: [String] = []
        if !CustomAttribute.isValidName(name.replacingOccurrences(of: "-", with: "")) {
            problems.append(
                "identity provider name '\(TextRules.printable(name))' must be letters, digits and hyphens, starting with a letter")
        }
        if ["local", "facebook.com"].contains(name.lowercased()) { problems.append("identity provider name '\(name)' is reserved") }
        if type != "openIdConnect" { problems.append("identity provider '\(name)': type must be openIdConnect") }
        if let responseType, responseType != "code" { problems.append("identity provider '\(name)': responseType must be code") }
        guard OutboundURL.isAllowed(metadataUrl), metadataUrl.hasSuffix(Self.wellKnownSuffix) else {
            problems.append(
                "identity provider '\(name)': metadataUrl must be https (or http on loopback) and end in \(Self.wellKnownSuffix)")
            return problems
        }
        if clientId.isEmpty { problems.append("identity provider '\(name)': clientId is required") }
        return problems
    }
}

extension Tenant {
    /// The upstream provider a `domain_hint` names (its name, or its issuer's host), if `flow`
    /// offers it: the sign-in goes straight there, as B2C's domain hints do.
    package func hintedProvider(_ hint: String?, in flow: UserFlow) -> UpstreamProvider? {
        guard let hint = hint?.lowercased() else { return nil }
        return identityProviders.first { provider in
            flow.identityProviders.contains(provider.kind)
                && (provider.name.lowercased() == hint || URLComponents(string: provider.issuer)?.host?.lowercased() == hint)
        }
    }

    package func upstreamProvider(named name: String) -> UpstreamProvider? {
        identityProviders.first { $0.name.lowercased() == name.lowercased() }
    }

    func upstreamProvider(of kind: IdentityProviderKind) -> UpstreamProvider? {
        identityProviders.first { $0.kind == kind }
    }
}

/// A provider's discovery document, the parts used.
package struct UpstreamMetadata: Sendable, Equatable {
    package var issuer: String
    package var authorizationEndpoint: String
    package var tokenEndpoint: String
    package var jwksURI: String
    /// `token_endpoint_auth_methods_supported`, when the provider lists it.
    var tokenEndpointAuthMethods: [String]? = nil
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §3): its answers carry `iss`.
    package var issuerInResponse = false

    package init(
        issuer: String,
        authorizationEndpoint: String,
        tokenEndpoint: String,
        jwksURI: String,
        tokenEndpointAuthMethods: [String]? = nil,
        issuerInResponse: Bool = false
    ) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.jwksURI = jwksURI
        self.tokenEndpointAuthMethods = tokenEndpointAuthMethods
        self.issuerInResponse = issuerInResponse
    }
}
