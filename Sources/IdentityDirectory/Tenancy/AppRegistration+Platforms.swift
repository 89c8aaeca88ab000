import Foundation

/// Where a redirect URI is registered, as Entra's app registrations split them (Graph
/// `application.web`, `.spa`, `.publicClient`): a web app's server, a single-page app in the
/// browser (authorization code with PKCE only), or a native app.
public enum RedirectPlatform: String, Sendable, Codable, CaseIterable {
    case web
    case spa
    case publicClient
}

/// One entry of Graph's `requiredResourceAccess`: an API by its app id and the permissions
/// asked of it, by id (`Scope` delegated, `Role` application).
public struct RequiredResourceAccess: Sendable, Codable, Equatable {
    public struct Access: Sendable, Codable, Equatable {
        public var id: UUID
        /// `Scope` or `Role`.
        public var type: String

        public init(id: UUID, type: String) {
            self.id = id
            self.type = type
        }
    }

    public var resourceAppId: String
    public var resourceAccess: [Access]

    public init(resourceAppId: String, resourceAccess: [Access]) {
        self.resourceAppId = resourceAppId.lowercased()
        self.resourceAccess = resourceAccess
    }
}

extension AppRegistration {
    /// The platform a redirect URI of this app is on unless said otherwise: its kind's.
    public var defaultPlatform: RedirectPlatform { kind == .confidential ? .web : .publicClient }

    public func platform(of uri: String) -> RedirectPlatform { redirectPlatforms[uri] ?? defaultPlatform }

    /// The app's redirect URIs on `platform`, in registration order.
    public func redirectURIs(on platform: RedirectPlatform) -> [String] { redirectURIs.filter { self.platform(of: $0) == platform } }

    /// Replaces the redirect URIs, platform by platform (each URI on one platform only).
    public mutating func setRedirectURIs(_ byPlatform: [RedirectPlatform: [String]]) {
        var all: [String] = []
        var platforms: [String: RedirectPlatform] = [:]
        for platform in RedirectPlatform.allCases {
            for uri in byPlatform[platform] ?? [] where !all.contains(uri) {
                all.append(uri)
                if platform != defaultPlatform { platforms[uri] = platform }
            }
        }
        redirectURIs = all
        redirectPlatforms = platforms
    }

    /// Changes the kind, keeping every redirect URI on the platform it is on.
    public mutating func setKind(_ newKind: ClientKind) {
        let byPlatform = Dictionary(uniqueKeysWithValues: RedirectPlatform.allCases.map { ($0, redirectURIs(on: $0)) })
        kind = newKind
        setRedirectURIs(byPlatform)
    }

    /// The id of the exposed scope `name`: its own, or one derived from the app and the name
    /// (the same on every instance and after an export re-applied).
    public func scopeID(_ name: String) -> UUID { scopeIDs[name] ?? Self.derivedScopeID(clientID: clientID, name: name) }

    static func derivedScopeID(clientID: UUID, name: String) -> UUID {
        UUID(nameBased: "todo-scope:\(clientID.uuidString.lowercased()):\(name)")
    }

    /// Whether an authorization to `redirect` must use PKCE: the app asks it, or the URI is a
    /// single-page app's (Entra and B2C take only the code flow with PKCE there).
    public func requiresPKCE(for redirect: String) -> Bool { requirePKCE || platform(of: redirect) == .spa }

    /// Whether tokens for this app carry the `groups` claim (Graph `groupMembershipClaims`).
    public var wantsGroupsClaim: Bool {
        guard let claims = groupMembershipClaims?.lowercased() else { return false }
        return claims.split(separator: ",").contains { ["securitygroup", "all"].contains($0.trimmingCharacters(in: .whitespaces)) }
    }
}
