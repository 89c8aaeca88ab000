import Foundation
import Hummingbird
import WireCoding

/// Microsoft Graph's `GET /v1.0/me`, for the MSAL tutorial: answers with Graph's shape for a
/// token this service issued for `User.Read` (research/b2c-protocol.md §7).
struct GraphMe: Sendable {
    let keys: SigningKeyRing
    let users: any UserDirectory
    let tenants: any TenantDirectory
    let clock: any IdentityClock
    let hosts: HostPolicy

    /// Errors are Graph's, written by the route's ``GraphErrorMiddleware``.
    @Sendable func handle(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        guard let header = request.headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            throw GraphError.emptyToken
        }
        let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        // Only keys still published verify: a withdrawn key (keys revoke) is no longer ours.
        let published = try await keys.publishedKeys()
        let now = clock.now.epochSeconds
        guard let claims = JSONWebToken.verify(token, keys: published),
            let exp = (claims["exp"] as? NSNumber)?.int64Value, exp > now - 300,
            ((claims["nbf"] as? NSNumber)?.int64Value ?? 0) <= now + 300,
            let issuer = claims["iss"] as? String, issuer.hasPrefix(hosts.origin(of: request) + "/")
        else { throw GraphError.invalidToken }
        let scopes = ((claims["scp"] as? String) ?? "").split(separator: " ").map { $0.lowercased() }
        guard claims["aud"] as? String == APIPermission.graphResource, scopes.contains("user.read") else {
            throw GraphError.insufficientPrivileges
        }
        guard let oid = claims["oid"] as? String, let id = UUID(uuidString: oid), let user = try await users.user(id: id) else {
            throw GraphError.resourceNotFound
        }
        let tenant = try await tenants.tenant(matching: user.tenantID.uuidString)
        let principal = user.email ?? "\(user.objectID)@\(tenant?.name ?? "localhost")"
        func value(_ attribute: UserAttribute) -> JSONText { user.value(of: attribute).map(JSONText.string) ?? .null }
        let body = JSONText.object([
            ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#users/$entity")),
            ("businessPhones", .array([])),
            ("displayName", .string(user.displayName)),
            ("givenName", value(.givenName)),
            ("jobTitle", value(.jobTitle)),
            ("mail", user.email.map(JSONText.string) ?? .null),
            ("mobilePhone", .null),
            ("officeLocation", value(.city)),
            ("preferredLanguage", .null),
            ("surname", value(.surname)),
            ("userPrincipalName", .string(principal)),
            ("id", .string(user.objectID)),
        ])
        return .json(body)
    }
}
