import Foundation
import Hummingbird
import IdentityDirectory
import JOSE
import UserJourneys
import WireCoding

/// A Graph bearer token this service issued, checked: signed by a published key, in its
/// lifetime, issued under one of this service's host names (Graph, like Entra, answers on
/// another name than the one that issued the token), for Graph (`aud` `00000003-…`), and naming a user who exists.
struct GraphCaller: Sendable {
    /// The token's `sub`: B2C's is the object id, Entra's the app's pairwise one; either way the
    /// same as in that app's ID token, which is what UserInfo must answer (OIDC Core §5.3.2).
    let subject: String?
    let user: UserAccount
    let tenant: Tenant?
    let scopes: [String]

    struct Authenticator: Sendable {
        let keys: SigningKeyRing
        let users: any UserDirectory
        let tenants: any TenantDirectory
        let clock: any IdentityClock
        let hosts: HostPolicy

        /// The verified claims of the request's Graph token, or Graph's 401.
        private func graphClaims(of request: Request) async throws -> JWTClaims {
            guard let header = request.headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer " else {
                throw GraphError.emptyToken
            }
            let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            // Only keys still published verify: a withdrawn key (keys revoke) is no longer ours.
            let published = try await keys.publishedKeys()
            let hosts = self.hosts
            let policy = ClaimPolicy(issuers: .matching { hosts.isOwnIssuer($0) }, leeway: 300)
            guard let claims = JSONWebToken.verify(token, keys: published, policy: policy, now: clock.now) else {
                throw GraphError.invalidToken
            }
            guard claims.audience == [APIPermission.graphResource] else { throw GraphError.insufficientPrivileges }
            return claims
        }

        /// The signed-in user of a delegated token, or Graph's error: 401 for a missing or bad
        /// token, 403 without `scope`, 404 for an account that is gone.
        func caller(of request: Request, requiring scope: String?) async throws -> GraphCaller {
            let claims = try await graphClaims(of: request)
            let scopes = (claims.string("scp") ?? "").split(separator: " ").map { $0.lowercased() }
            if let scope, !scopes.contains(scope.lowercased()) { throw GraphError.insufficientPrivileges }
            guard let oid = claims.string("oid"), let id = UUID(uuidString: oid), let user = try await users.user(id: id) else {
                throw GraphError.resourceNotFound
            }
            return GraphCaller(
                subject: claims.subject, user: user, tenant: try await tenants.tenant(matching: user.tenantID.uuidString),
                scopes: scopes)
        }

        /// The tenant an app-only token (client credentials) may manage, when the token carries
        /// one of `roles` (Graph's application permissions, e.g. `User.ReadWrite.All`). The
        /// tenant is the issuer's (`{base}/{tenant GUID}/v2.0`), so an app manages only its own.
        func application(of request: Request, anyOf roles: [String]) async throws -> Tenant {
            try await applicationCaller(of: request, anyOf: roles).tenant
        }

        /// The tenant, and the directory's one door for changes this app makes (its changes
        /// recorded as `initiatedBy.app`, with the request's correlation id and address).
        func administration(
            _ administration: IdentityAdministration, of request: Request, context: IdentityRequestContext, anyOf roles: [String]
        ) async throws -> (Tenant, IdentityAdministration) {
            let (tenant, administration, _) = try await administrator(administration, of: request, context: context, anyOf: roles)
            return (tenant, administration)
        }

        /// ``administration(_:of:context:anyOf:)`` and the Graph application permissions the
        /// caller's token holds (lower-cased), for rules that compare privileges.
        func administrator(
            _ administration: IdentityAdministration, of request: Request, context: IdentityRequestContext, anyOf roles: [String]
        ) async throws -> (Tenant, IdentityAdministration, held: Set<String>) {
            let (tenant, appID, held) = try await applicationCaller(of: request, anyOf: roles)
            let app = try await tenants.application(tenantID: tenant.id, clientID: appID)
            let initiator = AuditInitiator(
                actor: .application(appID: appID, displayName: app?.displayName), correlationID: context.correlationID,
                ipAddress: context.clientAddress)
            return (tenant, administration.acting(as: initiator), held)
        }

        private func applicationCaller(of request: Request, anyOf roles: [String]) async throws -> (
            tenant: Tenant, appID: String, held: Set<String>
        ) {
            let claims = try await graphClaims(of: request)
            // An app-only token is what the client-credentials grant mints: no delegated `scp`,
            // Entra's `idtyp: app`, and the app itself as the subject (`sub` = `oid` = `azp`).
            let appID = (claims.string("azp") ?? "").lowercased()
            guard claims["scp"] == nil, claims.string("idtyp") == "app", !appID.isEmpty,
                claims.subject?.lowercased() == appID, claims.string("oid")?.lowercased() == appID,
                claims.string("appid").map({ $0.lowercased() == appID }) ?? true
            else { throw GraphError.insufficientPrivileges }
            guard let issuer = claims.issuer.flatMap(URLComponents.init(string:)),
                let guid = issuer.path.split(separator: "/").first, let tenant = try await tenants.tenant(matching: String(guid))
            else { throw GraphError.invalidToken }
            // The roles count only as the directory grants them to a confidential app of this
            // tenant now, as Graph checks the service principal's app role assignments: a token's
            // `roles` alone prove nothing a signed token could not say.
            guard let app = try await tenants.application(tenantID: tenant.id, clientID: appID), app.kind == .confidential else {
                throw GraphError.insufficientPrivileges
            }
            let granted = Set((app.permission(on: APIPermission.graphResource)?.roles ?? []).map { $0.lowercased() })
            let held = Set((claims.strings("roles") ?? []).map { $0.lowercased() }).intersection(granted)
            guard roles.contains(where: { held.contains($0.lowercased()) }) else { throw GraphError.insufficientPrivileges }
            return (tenant, appID, held)
        }
    }
}

/// Microsoft Graph's `GET /v1.0/me`, for the MSAL tutorial: answers with Graph's shape for a
/// token this service issued for `User.Read` (https://learn.microsoft.com/graph/api/user-get?view=graph-rest-1.0).
struct GraphMe: Sendable {
    let authenticator: GraphCaller.Authenticator

    /// Errors are Graph's, written by the route's ``GraphErrorMiddleware``.
    @Sendable func handle(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let caller = try await authenticator.caller(of: request, requiring: "User.Read")
        let user = caller.user
        let principal = user.presentableEmail ?? "\(user.objectID)@\(caller.tenant?.name ?? "localhost")"
        func value(_ attribute: UserAttribute) -> JSONText { user.value(of: attribute).map(JSONText.string) ?? .null }
        let body = JSONText.object([
            ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#users/$entity")),
            ("businessPhones", .array([])),
            ("displayName", .string(user.displayName)),
            ("givenName", value(.givenName)),
            ("jobTitle", value(.jobTitle)),
            ("mail", user.presentableEmail.map(JSONText.string) ?? .null),
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

/// `GET|POST {base}/oidc/userinfo`: the Microsoft identity platform's UserInfo endpoint
/// (OpenID Connect Core §5.3), which Entra serves from Graph: a Graph token in, the user's
/// claims out, `sub` the same pairwise value as in the app's ID token (SPEC §2.9).
struct UserInfo: Sendable {
    let authenticator: GraphCaller.Authenticator

    @Sendable func handle(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let caller = try await authenticator.caller(of: request, requiring: nil)
        let user = caller.user
        guard let subject = caller.subject else { throw GraphError.invalidToken }
        var body = JSONObjectBuilder()
        body.set("sub", subject)
        body.set("name", user.displayName)
        body.set("family_name", user.value(of: .surname))
        body.set("given_name", user.value(of: .givenName))
        if user.emailVerified { body.set("email", user.email) }
        return .json(body.object)
    }
}
