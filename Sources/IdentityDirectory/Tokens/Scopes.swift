import Foundation

/// The resource an access token is for.
package struct TokenResource: Equatable, Sendable {
    /// `aud` of the access token.
    package var audience: String
    /// Short scope names for `scp`; empty for the client-id-as-scope trick.
    package var scopeNames: [String]

    package init(audience: String, scopeNames: [String]) {
        self.audience = audience
        self.scopeNames = scopeNames
    }
}

/// What a `scope` parameter asks for, after B2C's rules (https://learn.microsoft.com/azure/active-directory-b2c/access-tokens#scopes).
package struct GrantedScopes: Equatable, Sendable {
    package var openID = false
    package var offlineAccess = false
    package var resource: TokenResource?
    /// The scope strings granted, as requested, echoed in the token response's `scope`.
    package var granted: [String] = []

    /// Whether the access token is Microsoft Graph's, which carries only what Graph grants.
    package var isForMicrosoftGraph: Bool { resource?.audience == APIPermission.graphResource }

    /// OpenID Connect's claim scopes: accepted and ignored (B2C's tokens carry the flow's claims).
    static let grantNothing: Set<String> = ["profile", "email", "phone", "address"]

    /// Applies the rules: `openid` → ID token, `offline_access` → refresh token, the client id
    /// or one API's scopes → access token, `profile`/`email` accepted and ignored (MSAL adds
    /// them to every request), more than one resource refused (AADB2C90146), unknown scopes dropped
    /// if something else was granted (B2C's partial grant), refused otherwise.
    ///
    /// An API's scopes are granted only as far as the client holds them in its API permissions
    /// (``AppRegistration/apiPermissions``; the client id as a scope, B2C's "own API" trick,
    /// needs none). Scopes of an API the client holds nothing of are refused (AADB2C90205);
    /// some held and some not is B2C's partial grant: `scp` carries the held ones
    /// (https://learn.microsoft.com/azure/active-directory-b2c/access-tokens#scopes). With `appOnly` (client credentials) `.default` stands for
    /// the application roles instead.
    package static func resolve(
        _ requested: [String], client: AppRegistration, tenantApps: [AppRegistration], appOnly: Bool = false
    ) throws -> GrantedScopes {
        var result = GrantedScopes()
        var unknown: [String] = []
        var resourceScopes: [(audience: String, name: String?, original: String)] = []
        for scope in requested where !scope.isEmpty {
            switch scope.lowercased() {
            case "openid": result.openID = true
            case "offline_access": result.offlineAccess = true
            case let name where Self.grantNothing.contains(name): continue
            case client.clientIDString:
                resourceScopes.append((client.clientIDString, nil, scope))
            case "user.read", "https://graph.microsoft.com/user.read":
                resourceScopes.append((APIPermission.graphResource, "User.Read", scope))
            case "https://graph.microsoft.com/.default":
                resourceScopes.append((APIPermission.graphResource, "", scope))
            default:
                if let match = apiScope(scope, in: tenantApps) {
                    resourceScopes.append((match.audience, match.name, scope))
                } else {
                    unknown.append(scope)
                }
            }
        }
        let audiences = Set(resourceScopes.map(\.audience))
        if audiences.count > 1 {
            throw ProtocolFailure.multipleResources(resourceScopes.map(\.original).joined(separator: " "))
        }
        if let audience = audiences.first {
            var names: [String] = []
            var held: [(audience: String, name: String?, original: String)] = []
            for entry in resourceScopes {
                let granted = grantedNames(entry, client: client, appOnly: appOnly)
                guard let granted else { continue }
                held.append(entry)
                for name in granted where !names.contains(name) { names.append(name) }
            }
            guard !held.isEmpty else { throw ProtocolFailure.insufficientPermissions }
            resourceScopes = held
            result.resource = TokenResource(audience: audience, scopeNames: names)
        }
        if result.resource == nil && !result.openID {
            if let first = unknown.first {
                throw first.contains("/") ? ProtocolFailure.scopeNotSupported(first) : ProtocolFailure.scopeNeedsResource(first)
            }
            if result.offlineAccess { throw ProtocolFailure.codeScopeRule }
        }
        result.granted = resourceScopes.map(\.original)
        if result.openID { result.granted.append("openid") }
        if result.offlineAccess { result.granted.append("offline_access") }
        return result
    }

    /// The `scp` names one requested scope grants, or nil when the client holds none of it.
    private static func grantedNames(
        _ entry: (audience: String, name: String?, original: String), client: AppRegistration, appOnly: Bool
    ) -> [String]? {
        // The client id as a scope: the app's own API, no permission needed, no `scp`.
        guard let name = entry.name else { return entry.audience == client.clientIDString ? [] : nil }
        guard let permission = client.permission(on: entry.audience) else { return nil }
        if name.isEmpty {
            // `.default`: everything granted on that API (roles for an app-only token).
            if appOnly { return permission.roles.isEmpty ? nil : [] }
            return permission.scopes.isEmpty ? nil : permission.scopes
        }
        if appOnly { return nil }
        return permission.scopes.first { $0.lowercased() == name.lowercased() }.map { [$0] }
    }

    /// `https://contoso.onmicrosoft.com/tasks/tasks.read` → the app whose Application ID URI is
    /// the prefix and which exposes `tasks.read`.
    private static func apiScope(_ scope: String, in apps: [AppRegistration]) -> (audience: String, name: String)? {
        guard let slash = scope.lastIndex(of: "/") else { return nil }
        let prefix = scope[..<slash].lowercased()
        let name = String(scope[scope.index(after: slash)...])
        for app in apps {
            guard let uri = app.appIDURI?.lowercased(), uri == prefix || uri + "/" == prefix else { continue }
            if name == ".default" { return (app.clientIDString, "") }
            if let exposed = app.exposedScopes.first(where: { $0.lowercased() == name.lowercased() }) {
                return (app.clientIDString, exposed)
            }
        }
        return nil
    }

    /// RFC 6749 §6: a refresh asks for nothing beyond the original grant. On a B2C policy the
    /// grant is the scopes the user signed in with, and no more: B2C's refresh tokens are bound
    /// to the sign-in's resource (a ROPC sign-in for `openid offline_access` was redeemed for a
    /// Graph token in the second outside attack). On the Entra face the grant is what the user
    /// signed in with plus the API permissions the app held then (its admin consent), so, as
    /// with Entra's refresh tokens (https://learn.microsoft.com/entra/identity-platform/refresh-tokens), a refresh may move to another
    /// API the app was consented for (the token endpoint checks the user's consent too), but
    /// never to one it was not, nor to one granted only later. Either way a permission withdrawn
    /// since is gone too, and `openid` only if it was asked for.
    package static func checkRefresh(
        _ requested: [String], family: RefreshTokenFamily, client: AppRegistration, tenantApps: [AppRegistration]
    ) throws {
        let original = Set(family.scopes.map { $0.lowercased() })
        var bounded = client
        bounded.apiPermissions = client.apiPermissions.compactMap { current in
            guard let consented = (family.consented ?? []).first(where: { $0.resource == current.resource }) else { return nil }
            let scopes = current.scopes.filter { scope in consented.scopes.contains { $0.lowercased() == scope.lowercased() } }
            return APIPermission(resource: current.resource, scopes: scopes)
        }
        for scope in requested.isEmpty ? family.scopes : requested {
            switch scope.lowercased() {
            case let name where name == "offline_access" || Self.grantNothing.contains(name): continue
            case "openid":
                guard original.contains("openid") else { throw ProtocolFailure.scopeBeyondGrant(scope) }
            default:
                // B2C families, and families from before consent was recorded, repeat their own
                // scopes only.
                if !family.face.asksConsent || family.consented == nil, !original.contains(scope.lowercased()) {
                    throw ProtocolFailure.scopeBeyondGrant(scope)
                }
                do {
                    _ = try resolve([scope], client: family.consented == nil ? client : bounded, tenantApps: tenantApps)
                } catch {
                    throw ProtocolFailure.scopeBeyondGrant(scope)
                }
            }
        }
    }
}

extension Array where Element == String {
    /// Splits a space-delimited OAuth `scope` value (RFC 6749 §3.3).
    package static func scopes(_ value: String?) -> [String] {
        (value ?? "").split(whereSeparator: { $0 == " " || $0 == "+" }).map(String.init)
    }
}
