import Foundation
import Hummingbird
import IdentityDirectory
import JOSE
import UserJourneys

/// The request context of every Graph route (`/v1.0`, `/beta`, `/oidc/userinfo`): the identity
/// service's, plus what the Graph group's middleware proved about the caller. ``GraphBearer``
/// verifies the token once per request; the route's ``GraphPermission`` admits the caller and
/// names it here (an app with its tenant and permissions, or a signed-in user). A handler reads
/// ``requireApplication()`` or ``requireUser()`` and authenticates nothing itself.
struct GraphRequestContext: ChildRequestContext, IdentityContext {
    var coreContext: CoreRequestContextStorage
    let correlationID: String
    let clientAddress: String
    /// The bearer token's verified claims (``GraphBearer``).
    var token: JWTClaims?
    /// The app-only caller a route's ``GraphPermission/application(anyOf:)`` admitted.
    var application: GraphApplicationCaller?
    /// The signed-in user a route's ``GraphPermission/delegated(scope:)`` admitted.
    var user: GraphCaller?

    init(context: IdentityRequestContext) {
        coreContext = context.coreContext
        correlationID = context.correlationID
        clientAddress = context.clientAddress
    }

    var maxUploadSize: Int { 64 * 1024 }
    var brandingTenant: Tenant? { nil }

    /// The app the route's permission admitted. A route outside a permission group is a wiring
    /// bug, answered as Graph's 403 rather than served to an unproven caller.
    func requireApplication() throws -> GraphApplicationCaller {
        guard let application else { throw GraphError.insufficientPrivileges }
        return application
    }

    /// The signed-in user the route's delegated permission admitted.
    func requireUser() throws -> GraphCaller {
        guard let user else { throw GraphError.insufficientPrivileges }
        return user
    }
}

/// An app calling Graph with an app-only token (client credentials), as the route's permission
/// admitted it.
struct GraphApplicationCaller: Sendable {
    /// The tenant it manages: the token issuer's, so an app manages only its own.
    let tenant: Tenant
    let appID: String
    /// The Graph application permissions the token holds that the directory grants the app now
    /// (lower-cased): what rules comparing privileges read.
    let held: Set<String>
    /// The directory's one door for changes, acting as this app (its changes recorded as
    /// `initiatedBy.app`, with the request's correlation id and address).
    let administration: IdentityAdministration

    /// Whether the app holds one of `roles`.
    func holds(anyOf roles: [String]) -> Bool { roles.contains { held.contains($0.lowercased()) } }
}

/// The Graph groups' authentication: the request's bearer token, verified once, or Graph's
/// 401. Signed by a published key, in its lifetime, issued under one of this service's host
/// names (Graph, like Entra, answers on another name than the one that issued the token), for
/// Graph (`aud` `00000003-…`).
struct GraphBearer: RouterMiddleware {
    typealias Context = GraphRequestContext
    let keys: SigningKeyRing
    let clock: any IdentityClock
    let hosts: HostPolicy

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
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
        var context = context
        context.token = claims
        return try await next(request, context)
    }
}

/// What a Graph route asks of its caller, as Graph's permissions reference states it per
/// operation: an app-only token holding one of the application permissions, or a delegated token
/// (with a scope). A route collection puts each route under one; the middleware admits the caller
/// and names it in the context, or answers Graph's 403 (404 for a delegated token's user who is gone).
struct GraphPermission: RouterMiddleware {
    typealias Context = GraphRequestContext
    enum Requirement: Sendable {
        case application(anyOf: [String])
        case delegated(scope: String?)
    }
    let requirement: Requirement
    let directory: GraphCallers

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token = context.token else { throw GraphError.emptyToken }
        var context = context
        switch requirement {
        case .application(let roles): context.application = try await directory.application(token, anyOf: roles, context: context)
        case .delegated(let scope): context.user = try await directory.user(token, requiring: scope)
        }
        return try await next(request, context)
    }
}

/// Who a verified Graph token speaks for, from the directory: what ``GraphPermission`` asks.
struct GraphCallers: Sendable {
    let users: any UserDirectory
    let tenants: any TenantDirectory
    let administration: IdentityAdministration

    /// Permissions for routes: `permit.application(anyOf: …)` in a route collection.
    func application(anyOf roles: [String]) -> GraphPermission { GraphPermission(requirement: .application(anyOf: roles), directory: self) }
    func delegated(scope: String?) -> GraphPermission { GraphPermission(requirement: .delegated(scope: scope), directory: self) }

    /// The signed-in user of a delegated token: 403 without `scope`, 404 for an account that is gone.
    func user(_ claims: JWTClaims, requiring scope: String?) async throws -> GraphCaller {
        let scopes = (claims.string("scp") ?? "").split(separator: " ").map { $0.lowercased() }
        if let scope, !scopes.contains(scope.lowercased()) { throw GraphError.insufficientPrivileges }
        guard let oid = claims.string("oid"), let id = UUID(uuidString: oid), let user = try await users.user(id: id) else {
            throw GraphError.resourceNotFound
        }
        return GraphCaller(
            subject: claims.subject, user: user, tenant: try await tenants.tenant(matching: user.tenantID.uuidString), scopes: scopes)
    }

    /// The app of an app-only token (client credentials) holding one of `roles` (Graph's
    /// application permissions, e.g. `User.ReadWrite.All`), with the tenant it may manage and the
    /// administration acting as it.
    func application(_ claims: JWTClaims, anyOf roles: [String], context: GraphRequestContext) async throws -> GraphApplicationCaller {
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
        let initiator = AuditInitiator(
            actor: .application(appID: appID, displayName: app.displayName), correlationID: context.correlationID,
            ipAddress: context.clientAddress)
        return GraphApplicationCaller(tenant: tenant, appID: appID, held: held, administration: administration.acting(as: initiator))
    }
}
