import Foundation

/// The resource an access token is for.
struct TokenResource: Equatable, Sendable {
    /// `aud` of the access token.
    var audience: String
    /// Short scope names for `scp`; empty for the client-id-as-scope trick.
    var scopeNames: [String]
}

/// What a `scope` parameter asks for, after B2C's rules (research/b2c-protocol.md §3).
struct GrantedScopes: Equatable, Sendable {
    var openID = false
    var offlineAccess = false
    var resource: TokenResource?
    /// The scope strings granted, as requested, echoed in the token response's `scope`.
    var granted: [String] = []

    /// Microsoft Graph's application id, the `aud` of Graph tokens.
    static let graphAudience = "00000003-0000-0000-c000-000000000000"

    /// Applies the rules: `openid` → ID token, `offline_access` → refresh token, the client id
    /// or one app's API scopes → access token, `profile`/`email` accepted and ignored (MSAL adds
    /// them to every request), more than one resource refused (AADB2C90146), unknown scopes dropped
    /// if something else was granted (B2C's partial grant), refused otherwise.
    static func resolve(
        _ requested: [String], client: AppRegistration, tenantApps: [AppRegistration]
    ) throws -> GrantedScopes {
        var result = GrantedScopes()
        var unknown: [String] = []
        var resourceScopes: [(audience: String, name: String?, original: String)] = []
        for scope in requested where !scope.isEmpty {
            switch scope.lowercased() {
            case "openid": result.openID = true
            case "offline_access": result.offlineAccess = true
            case "profile", "email", "phone", "address": continue
            case client.clientIDString:
                resourceScopes.append((client.clientIDString, nil, scope))
            case "user.read", "https://graph.microsoft.com/user.read":
                resourceScopes.append((graphAudience, "User.Read", scope))
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
            throw B2CError.multipleResources(resourceScopes.map(\.original).joined(separator: " "))
        }
        if let audience = audiences.first {
            var names: [String] = []
            for entry in resourceScopes { if let name = entry.name, !names.contains(name) { names.append(name) } }
            result.resource = TokenResource(audience: audience, scopeNames: names)
        }
        if result.resource == nil && !result.openID {
            if let first = unknown.first {
                throw first.contains("/") ? B2CError.scopeNotSupported(first) : B2CError.scopeNeedsResource(first)
            }
            if result.offlineAccess { throw B2CError.codeScopeRule }
        }
        result.granted = resourceScopes.map(\.original)
        if result.openID { result.granted.append("openid") }
        if result.offlineAccess { result.granted.append("offline_access") }
        return result
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
}

extension Array where Element == String {
    /// Splits a space-delimited OAuth `scope` value (RFC 6749 §3.3).
    static func scopes(_ value: String?) -> [String] {
        (value ?? "").split(whereSeparator: { $0 == " " || $0 == "+" }).map(String.init)
    }
}
