import Foundation

/// A B2C directory: a name such as `contoso.onmicrosoft.com` and a GUID, both usable in URLs
/// (https://learn.microsoft.com/azure/active-directory-b2c/b2clogin#change-identity-provider-redirect-urls).
public struct Tenant: Sendable, Equatable {
    public var id: UUID
    public var name: String
    public var displayName: String
    /// The flow used by policy-less Microsoft-identity-platform URLs (`/{tenant}/oauth2/v2.0/authorize`).
    public var defaultPolicy: String
    /// A directory of Mustache templates and `style.css` that replace the built-in hosted pages
    /// (B2C's "custom page content").
    public var pageTemplatesPath: String?
    public var isDefault: Bool
    /// The tenant's own user attributes (B2C's custom attributes, SPEC §2.11).
    public var userAttributes: [CustomAttribute]
    /// REST endpoints flows call during sign-up (SPEC §2.11); secrets sealed.
    public var apiConnectors: [APIConnector]
    /// Upstream OpenID Connect providers its flows may offer (SPEC §2.11); secrets sealed.
    public var identityProviders: [UpstreamProvider]
    /// The pages' languages, the first the default (SPEC §2.11); none means English.
    public var languages: [String] = []
    /// Per-language string overrides of the pages (language → string key → text).
    public var localizedStrings: [String: [String: String]] = [:]
    /// External ID's custom authentication extensions its flows may call (SPEC §2.15).
    public var authenticationExtensions: [AuthenticationExtension] = []

    public init(
        id: UUID, name: String, displayName: String, defaultPolicy: String, pageTemplatesPath: String? = nil,
        isDefault: Bool = false, userAttributes: [CustomAttribute] = [], apiConnectors: [APIConnector] = [],
        identityProviders: [UpstreamProvider] = []
    ) {
        self.identityProviders = identityProviders
        self.userAttributes = userAttributes
        self.apiConnectors = apiConnectors
        self.id = id
        self.name = name
        self.displayName = displayName
        self.defaultPolicy = defaultPolicy
        self.pageTemplatesPath = pageTemplatesPath
        self.isDefault = isDefault
    }

    /// The GUID in the lowercase form B2C writes into `iss`, `utid` and `tid`.
    public var guid: String { id.uuidString.lowercased() }
}

public enum ClientKind: String, Sendable, Codable, CaseIterable {
    /// Native and single-page apps: no secret.
    case `public`
    /// Web apps: authenticate with a client secret at the token endpoint.
    case confidential
}

/// An app registration (https://learn.microsoft.com/azure/active-directory-b2c/access-tokens#openid-connect-scopes; SPEC §2.1).
public struct AppRegistration: Sendable, Equatable {
    public var clientID: UUID
    public var tenantID: UUID
    public var displayName: String
    public var kind: ClientKind
    public var redirectURIs: [String]
    /// "Allow public client flows": needed for ROPC (AADB2C90224).
    public var allowPublicClientFlows: Bool
    /// "Access tokens / ID tokens" implicit grant checkboxes.
    public var allowImplicit: Bool
    /// B2C accepts PKCE `plain`; RFC 9700 §2.1.1 advises against it, so it is opt-in per app.
    public var allowPlainPKCE: Bool
    /// B2C requires PKCE of single-page apps only; a registration may require it of its app too
    /// (YAML `pkce: required`, `apps add --require-pkce`; SPEC §2.8).
    public var requirePKCE: Bool
    /// The Application ID URI, e.g. `https://contoso.onmicrosoft.com/tasks`.
    public var appIDURI: String?
    /// Short names of the scopes this app exposes as an API, e.g. `tasks.read`.
    public var exposedScopes: [String]
    /// The APIs this app may call and with which scopes: B2C's "API permissions" with admin
    /// consent granted. Nothing else is ever put in its tokens (AADB2C90205).
    public var apiPermissions: [APIPermission]
    /// External ID's app-bound user flow (SPEC §2.9): a policy-less authorization for this app
    /// runs this flow instead of the tenant's default.
    public var userFlow: String?
    /// The platform of each redirect URI that is not its kind's own (web for a confidential
    /// app, public client for a public one): Graph's `web`/`spa`/`publicClient` split
    /// (AppRegistration+Platforms.swift).
    public var redirectPlatforms: [String: RedirectPlatform] = [:]
    /// The ids of exposed scopes given their own (Graph's `oauth2PermissionScopes[].id`); the
    /// others have one derived from the app and the name.
    public var scopeIDs: [String: UUID] = [:]
    /// The permissions the app asks for (Graph's `requiredResourceAccess`): requested, not
    /// granted; ``apiPermissions`` are the granted ones.
    public var requiredResourceAccess: [RequiredResourceAccess] = []
    /// Graph's `groupMembershipClaims`: `SecurityGroup` or `All` puts a `groups` claim in its
    /// Entra-face tokens.
    public var groupMembershipClaims: String?
    /// External ID's native authentication API (SPEC §2.15) answers this app: Graph's
    /// `nativeAuthenticationApisEnabled: all`. Off unless the registration turns it on.
    public var nativeAuthentication = false

    public init(
        clientID: UUID, tenantID: UUID, displayName: String, kind: ClientKind, redirectURIs: [String],
        allowPublicClientFlows: Bool = false, allowImplicit: Bool = false, allowPlainPKCE: Bool = false, requirePKCE: Bool = false,
        appIDURI: String? = nil, exposedScopes: [String] = [], apiPermissions: [APIPermission] = [], userFlow: String? = nil
    ) {
        self.userFlow = userFlow
        self.requirePKCE = requirePKCE
        self.clientID = clientID
        self.tenantID = tenantID
        self.displayName = displayName
        self.kind = kind
        self.redirectURIs = redirectURIs
        self.allowPublicClientFlows = allowPublicClientFlows
        self.allowImplicit = allowImplicit
        self.allowPlainPKCE = allowPlainPKCE
        self.appIDURI = appIDURI
        self.exposedScopes = exposedScopes
        self.apiPermissions = apiPermissions
    }

    /// The permission this app holds on the API whose client id (`aud`) is `resource`.
    package func permission(on resource: String) -> APIPermission? {
        apiPermissions.first { $0.resource.lowercased() == resource.lowercased() }
    }

    public var clientIDString: String { clientID.uuidString.lowercased() }

    /// Whether `candidate` is a registered redirect URI of this app.
    ///
    /// Exact string match, except that a public client's loopback registration
    /// (`http://localhost`, `http://127.0.0.1`, `http://[::1]`) matches any port, because native
    /// apps get an ephemeral port from the OS (RFC 8252 §7.3). Confidential clients never get
    /// that latitude (RFC 9700 §4.1.1).
    public func isRegisteredRedirect(_ candidate: String) -> Bool {
        if redirectURIs.contains(candidate) { return true }
        guard kind == .public, let requested = LoopbackRedirect(candidate) else { return false }
        return redirectURIs.contains { registered in
            guard let loopback = LoopbackRedirect(registered) else { return false }
            return loopback.host == requested.host && loopback.path == requested.path
                && loopback.query == requested.query
        }
    }
}

/// An `http` redirect to a loopback interface, split so the port can be ignored.
struct LoopbackRedirect: Equatable {
    let host: String
    let path: String
    let query: String?

    init?(_ uri: String) {
        guard let components = URLComponents(string: uri), components.scheme == "http",
            let host = components.host?.lowercased(), ["localhost", "127.0.0.1", "[::1]", "::1"].contains(host),
            components.user == nil, components.password == nil, components.fragment == nil
        else { return nil }
        self.host = host
        self.path = components.path.isEmpty ? "/" : components.path
        self.query = components.query
    }
}

/// A granted permission on one API: delegated scopes (for tokens of a signed-in user) and
/// application roles (for the app's own client-credentials tokens).
public struct APIPermission: Sendable, Codable, Equatable {
    /// The API's client id, the `aud` of its tokens; Microsoft Graph is
    /// `00000003-0000-0000-c000-000000000000`.
    public var resource: String
    /// Delegated scopes by short name (`tasks.read`, `User.Read`).
    public var scopes: [String]
    /// Application permissions, put in `roles` of client-credentials tokens.
    public var roles: [String]

    public init(resource: String, scopes: [String] = [], roles: [String] = []) {
        self.resource = resource.lowercased()
        self.scopes = scopes
        self.roles = roles
    }

    /// Microsoft Graph's application id, the `aud` of Graph tokens.
    public static let graphResource = "00000003-0000-0000-c000-000000000000"
    /// The delegated Graph scopes this service serves.
    static let graphScopes = ["User.Read"]
    /// The Graph application permissions this service serves (`roles` of app-only tokens).
    public static let graphRoles = GraphPermissions.appRoles.map(\.name)

    /// How a permission may name its API (admin command, YAML): Microsoft Graph, or an app by its
    /// Application ID URI or client id; case and a trailing slash do not matter.
    enum APIName: Equatable {
        case graph
        /// An Application ID URI or a client id, compared lower-case without a trailing slash.
        case app(String)

        init(_ text: String) {
            let key = Self.key(text)
            self = key == "https://graph.microsoft.com" || key == "graph" || key == graphResource ? .graph : .app(key)
        }

        /// Whether this names the app with `appIDURI` / `clientID`.
        func names(appIDURI: String?, clientID: String?) -> Bool {
            guard case .app(let key) = self else { return false }
            return appIDURI.map(Self.key) == key || clientID?.lowercased() == key
        }

        private static func key(_ text: String) -> String { text.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "/")) }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            resource: try container.decode(String.self, forKey: .resource),
            scopes: try container.decodeIfPresent([String].self, forKey: .scopes) ?? [],
            roles: try container.decodeIfPresent([String].self, forKey: .roles) ?? [])
    }
}
