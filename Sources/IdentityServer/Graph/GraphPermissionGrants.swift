import Crypto
import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's `/v1.0/oauth2PermissionGrants` (SPEC §2.14): delegated scopes an app may get on an
/// API, granted for everyone (`consentType: AllPrincipals`, admin consent). One grant per app
/// and API, its `scope` the space-separated scope names; reading takes `Application.Read.All`,
/// writing `DelegatedPermissionGrant.ReadWrite.All`.
struct GraphPermissionGrants: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let hosts: HostPolicy

    static let readRoles = ["Application.Read.All", "Application.ReadWrite.All", "DelegatedPermissionGrant.ReadWrite.All"]
    static let writeRoles = ["DelegatedPermissionGrant.ReadWrite.All"]
    typealias Principal = GraphServicePrincipals.Principal

    struct Grant {
        var app: AppRegistration
        var resource: String
        var scopes: [String]
    }

    static func grantID(client: String, resource: String) -> String {
        Base64URL.encode(Data(SHA256.hash(data: Data("grant|\(client)|\(resource)".utf8)).prefix(32)))
    }

    private func grants(_ tenant: Tenant) async throws -> [Grant] {
        try await GraphApplications.applications(tenant, server: server).flatMap { app in
            app.apiPermissions.filter { !$0.scopes.isEmpty }.map { Grant(app: app, resource: $0.resource, scopes: $0.scopes) }
        }
    }

    private func resourcePrincipalID(_ resource: String, tenant: Tenant) -> String {
        resource == APIPermission.graphResource
            ? Principal.graph.id(in: tenant) : UUID(nameBased: "todo-service-principal:\(tenant.guid):\(resource)").uuidString.lowercased()
    }

    private func members(_ grant: Grant, tenant: Tenant) -> [(String, JSONText)] {
        let client = Principal.app(grant.app).id(in: tenant)
        let resource = resourcePrincipalID(grant.resource, tenant: tenant)
        return [
            ("id", .string(Self.grantID(client: client, resource: resource))), ("clientId", .string(client)),
            ("consentType", .string("AllPrincipals")), ("principalId", .null), ("resourceId", .string(resource)),
            ("scope", .string(grant.scopes.joined(separator: " "))),
        ]
    }

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphListQuery(
            request.uri.query, type: "oAuth2PermissionGrant", properties: ["id", "clientId", "consentType", "principalId", "resourceId", "scope"],
            filterable: ["clientId", "resourceId", "consentType"])
        let items = try await grants(tenant).map { members($0, tenant: tenant) }
        return .json(
            query.page(
                items, context: "https://graph.microsoft.com/v1.0/$metadata#oauth2PermissionGrants", origin: hosts.origin(of: request),
                path: "/v1.0/oauth2PermissionGrants"))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let grant = try await self.grant(context, tenant: tenant)
        return Self.entity(members(grant, tenant: tenant), status: .ok)
    }

    /// `POST {"clientId", "consentType": "AllPrincipals", "resourceId", "scope"}`.
    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        guard case .string("AllPrincipals")? = body["consentType"] else {
            throw GraphError.badRequest("consentType must be AllPrincipals: this service keeps admin consent only.")
        }
        let apps = try await GraphApplications.applications(tenant, server: server)
        guard case .string(let clientID)? = body["clientId"], let app = apps.first(where: { Principal.app($0).id(in: tenant) == clientID.lowercased() })
        else { throw GraphError.badRequest("clientId must be the id of one of this tenant's service principals.") }
        guard case .string(let resourceID)? = body["resourceId"],
            let resource = ([APIPermission.graphResource] + apps.map(\.clientIDString)).first(where: {
                resourcePrincipalID($0, tenant: tenant) == resourceID.lowercased()
            })
        else { throw GraphError.badRequest("resourceId must be the id of Microsoft Graph's or an API's service principal.") }
        guard app.permission(on: resource)?.scopes.isEmpty ?? true else {
            throw GraphError(status: .conflict, code: "Request_MultipleObjectsWithSameKeyValue", message: "Permission entry already exists.")
        }
        let scopes = try Self.scopes(body)
        try await set(scopes, on: resource, of: app, administration)
        return Self.entity(members(Grant(app: app, resource: resource, scopes: try await current(app, resource, tenant)), tenant: tenant), status: .created)
    }

    /// `PATCH {"scope"}`: replaces the granted scopes.
    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let grant = try await self.grant(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        guard body.keys.allSatisfy({ $0 == "scope" || $0 == "@odata.type" }) else { throw GraphError.badRequest("Only scope can be changed.") }
        try await set(try Self.scopes(body), on: grant.resource, of: grant.app, administration)
        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let grant = try await self.grant(context, tenant: tenant)
        try await set([], on: grant.resource, of: grant.app, administration)
        return Response(status: .noContent)
    }

    private func set(_ scopes: [String], on resource: String, of app: AppRegistration, _ administration: IdentityAdministration) async throws {
        try await administration.setGrantedScopes(scopes, on: resource, of: app)
    }

    private func current(_ app: AppRegistration, _ resource: String, _ tenant: Tenant) async throws -> [String] {
        try await server.administration.applications(tenantID: tenant.id).first { $0.clientID == app.clientID }?.permission(on: resource)?.scopes ?? []
    }

    private func grant(_ context: GraphRequestContext, tenant: Tenant) async throws -> Grant {
        let id = context.parameters.get("id") ?? ""
        guard let grant = try await grants(tenant).first(where: { GraphServicePrincipals.member("id", of: .object(members($0, tenant: tenant))) == id })
        else {
            throw GraphError.resourceNotFound
        }
        return grant
    }

    private static func scopes(_ body: [String: JSONValue]) throws -> [String] {
        guard case .string(let text)? = body["scope"] else { throw GraphError.badRequest("scope must be the space-separated scope names.") }
        let scopes = text.split(separator: " ").map(String.init)
        guard !scopes.isEmpty, scopes.count <= 100 else { throw GraphError.badRequest("scope names 1 to 100 scopes.") }
        return scopes
    }

    private static func entity(_ members: [(String, JSONText)], status: HTTPResponse.Status) -> Response {
        .json(.object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#oauth2PermissionGrants/$entity"))] + members), status: status)
    }
}

extension GraphPermissionGrants {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("oauth2PermissionGrants", use: list)
            .get("oauth2PermissionGrants/:id", use: get)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("oauth2PermissionGrants", use: create)
            .patch("oauth2PermissionGrants/:id", use: update)
            .delete("oauth2PermissionGrants/:id", use: delete)
        return collection
    }
}
