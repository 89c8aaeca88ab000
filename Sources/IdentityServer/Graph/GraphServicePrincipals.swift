import Crypto
import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's `/v1.0/servicePrincipals` and `/v1.0/oauth2PermissionGrants` (SPEC §2.14): admin
/// consent as Entra records it. Every app registration has its service principal here (B2C's
/// portal makes one with each app; `POST /servicePrincipals {"appId"}` answers it), and so does
/// Microsoft Graph, whose `appRoles` and `oauth2PermissionScopes` are the permissions this
/// service serves under Graph's own ids. An app-role assignment to an app's principal grants it
/// a Graph application permission (`AppRoleAssignment.ReadWrite.All`); an `AllPrincipals`
/// permission grant grants it an API's delegated scopes (`DelegatedPermissionGrant.ReadWrite.All`).
struct GraphServicePrincipals: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let hosts: HostPolicy

    static let readRoles = ["Application.Read.All", "Application.ReadWrite.All"]
    static let writeRoles = ["Application.ReadWrite.All"]
    static let assignRoles = ["AppRoleAssignment.ReadWrite.All"]
    static let grantRoles = ["DelegatedPermissionGrant.ReadWrite.All"]
    static let properties = [
        "id", "appId", "displayName", "servicePrincipalType", "accountEnabled", "appRoles", "oauth2PermissionScopes", "servicePrincipalNames",
        "appOwnerOrganizationId", "signInAudience", "tags", "deletedDateTime",
    ]

    /// A service principal: an app of the tenant, or Microsoft Graph.
    enum Principal {
        case app(AppRegistration)
        case graph

        var appID: String {
            switch self {
            case .app(let app): app.clientIDString
            case .graph: APIPermission.graphResource
            }
        }

        func id(in tenant: Tenant) -> String { UUID(nameBased: "todo-service-principal:\(tenant.guid):\(appID)").uuidString.lowercased() }

        var displayName: String {
            switch self {
            case .app(let app): app.displayName
            case .graph: "Microsoft Graph"
            }
        }
    }

    private func principals(_ tenant: Tenant) async throws -> [Principal] {
        [.graph] + (try await GraphApplications.applications(tenant, server: server)).map(Principal.app)
    }

    private func principal(_ key: String?, tenant: Tenant) async throws -> Principal {
        let key = (key?.removingPercentEncoding ?? "").lowercased()
        let all = try await principals(tenant)
        if let appID = GraphApplications.alternateKey(key, name: "appid") {
            guard let found = all.first(where: { $0.appID == appID }) else { throw GraphError.resourceNotFound }
            return found
        }
        guard let found = all.first(where: { $0.id(in: tenant) == key }) else { throw GraphError.resourceNotFound }
        return found
    }

    func members(_ principal: Principal, tenant: Tenant) -> [(String, JSONText)] {
        let roles: [JSONText]
        let scopes: [JSONText]
        var names: [JSONText] = [.string(principal.appID)]
        switch principal {
        case .graph:
            roles = GraphPermissions.appRoles.map { role in
                .object([
                    ("allowedMemberTypes", .array([.string("Application")])), ("description", .string(role.name)),
                    ("displayName", .string(role.name)), ("id", .string(role.id.uuidString.lowercased())), ("isEnabled", .bool(true)),
                    ("origin", .string("Application")), ("value", .string(role.name)),
                ])
            }
            scopes = GraphPermissions.scopes.map { scope in
                .object([
                    ("adminConsentDescription", .string(scope.name)), ("adminConsentDisplayName", .string(scope.name)),
                    ("id", .string(scope.id.uuidString.lowercased())), ("isEnabled", .bool(true)), ("type", .string("User")),
                    ("value", .string(scope.name)),
                ])
            }
            names.append(.string("https://graph.microsoft.com"))
        case .app(let app):
            roles = []
            scopes = app.exposedScopes.map { scope in
                .object([
                    ("adminConsentDescription", .string(scope)), ("adminConsentDisplayName", .string(scope)),
                    ("id", .string(app.scopeID(scope).uuidString.lowercased())), ("isEnabled", .bool(true)), ("type", .string("Admin")),
                    ("value", .string(scope)),
                ])
            }
            if let uri = app.appIDURI { names.append(.string(uri)) }
        }
        return [
            ("id", .string(principal.id(in: tenant))), ("deletedDateTime", .null), ("accountEnabled", .bool(true)),
            ("appId", .string(principal.appID)), ("appDisplayName", .string(principal.displayName)),
            ("displayName", .string(principal.displayName)), ("servicePrincipalType", .string("Application")),
            ("appOwnerOrganizationId", principal.appID == APIPermission.graphResource ? .string("f8cdef31-a31e-4b4a-93e4-5f571e91255a") : .string(tenant.guid)),
            ("signInAudience", .string(GraphApplicationJSON.signInAudience)), ("tags", .array([])),
            ("servicePrincipalNames", .array(names)), ("appRoles", .array(roles)), ("oauth2PermissionScopes", .array(scopes)),
        ]
    }

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphListQuery(
            request.uri.query, type: "servicePrincipal", properties: Self.properties, filterable: ["appId", "displayName", "id", "servicePrincipalNames"])
        let items = try await principals(tenant).map { members($0, tenant: tenant) }
        return .json(
            query.page(
                items, context: "https://graph.microsoft.com/v1.0/$metadata#servicePrincipals", origin: hosts.origin(of: request),
                path: "/v1.0/servicePrincipals"))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphListQuery(request.uri.query, type: "servicePrincipal", properties: Self.properties, filterable: [])
        let principal = try await principal(context.parameters.get("id"), tenant: tenant)
        guard case .object(var chosen) = query.selected(members(principal, tenant: tenant)) else { throw GraphError.resourceNotFound }
        chosen.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#servicePrincipals/$entity")), at: 0)
        return .json(.object(chosen))
    }

    /// `POST /servicePrincipals {"appId"}`: the app's principal (every app has one).
    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let appID)? = body["appId"],
            let app = try await GraphApplications.applications(tenant, server: server).first(where: { $0.clientIDString == appID.lowercased() })
        else {
            throw GraphError.badRequest("The appId of the service principal does not reference a valid application object.")
        }
        var chosen = members(.app(app), tenant: tenant)
        chosen.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#servicePrincipals/$entity")), at: 0)
        return .json(.object(chosen), status: .created)
    }

    // MARK: App-role assignments (application permissions granted)

    /// An assignment's id: derived from who holds which role where, so every instance agrees.
    static func assignmentID(principal: String, resource: String, role: UUID) -> String {
        Base64URL.encode(Data(SHA256.hash(data: Data("\(principal)|\(resource)|\(role.uuidString.lowercased())".utf8)).prefix(32)))
    }

    private func assignments(of app: AppRegistration, tenant: Tenant) -> [JSONText] {
        let principal = Principal.app(app).id(in: tenant)
        let resource = Principal.graph.id(in: tenant)
        return (app.permission(on: APIPermission.graphResource)?.roles ?? []).compactMap { role in
            guard let roleID = GraphPermissions.appRoleID(role) else { return nil }
            return .object([
                ("id", .string(Self.assignmentID(principal: principal, resource: resource, role: roleID))), ("deletedDateTime", .null),
                ("appRoleId", .string(roleID.uuidString.lowercased())), ("principalDisplayName", .string(app.displayName)),
                ("principalId", .string(principal)), ("principalType", .string("ServicePrincipal")),
                ("resourceDisplayName", .string("Microsoft Graph")), ("resourceId", .string(resource)),
            ])
        }
    }

    @Sendable func listAssignments(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        guard case .app(let app) = try await principal(context.parameters.get("id"), tenant: tenant) else {
            return .json(.object([("value", .array([]))]))
        }
        return .json(
            .object([
                ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#servicePrincipals('\(Principal.app(app).id(in: tenant))')/appRoleAssignments")),
                ("value", .array(assignments(of: app, tenant: tenant))),
            ]))
    }

    /// `GET …/appRoleAssignedTo`: the assignments of this principal's app roles to others —
    /// Microsoft Graph's are every app's Graph application permissions; an app's own, none.
    @Sendable func listAssignedTo(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let principal = try await principal(context.parameters.get("id"), tenant: tenant)
        var value: [JSONText] = []
        if case .graph = principal {
            for app in try await GraphApplications.applications(tenant, server: server) { value += assignments(of: app, tenant: tenant) }
        }
        return .json(
            .object([
                ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#servicePrincipals('\(principal.id(in: tenant))')/appRoleAssignedTo")),
                ("value", .array(value)),
            ]))
    }

    /// `POST …/appRoleAssignments {"principalId", "resourceId", "appRoleId"}`: the principal
    /// must be the path's, the resource Microsoft Graph's, the role one of its `appRoles`.
    @Sendable func assign(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration, held) = (application.tenant, application.administration, application.held)
        guard case .app(let app) = try await principal(context.parameters.get("id"), tenant: tenant) else {
            throw GraphError.badRequest("Microsoft Graph's own service principal holds no app roles here.")
        }
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let principalID)? = body["principalId"], principalID.lowercased() == Principal.app(app).id(in: tenant) else {
            throw GraphError.badRequest("principalId must be the id of the service principal in the path.")
        }
        guard case .string(let resourceID)? = body["resourceId"], resourceID.lowercased() == Principal.graph.id(in: tenant) else {
            throw GraphError.badRequest("resourceId must be Microsoft Graph's service principal: only its app roles are served here.")
        }
        guard case .string(let roleText)? = body["appRoleId"], let roleID = UUID(uuidString: roleText), let role = GraphPermissions.appRole(id: roleID)
        else { throw GraphError.badRequest("Permission being assigned was not found on application") }
        // As for changing an app (``GraphApplications/refuseEscalation(to:held:)``): an app grants
        // only the permissions it holds, so this one is not every other permission.
        guard held.contains(role.lowercased()) else { throw GraphError.insufficientPrivileges }
        try await administration.assignAppRole(role, on: APIPermission.graphResource, to: app)
        let updated = try await server.administration.applications(tenantID: tenant.id).first { $0.clientID == app.clientID } ?? app
        let id = Self.assignmentID(principal: Principal.app(app).id(in: tenant), resource: Principal.graph.id(in: tenant), role: roleID)
        guard let assignment = assignments(of: updated, tenant: tenant).first(where: { Self.member("id", of: $0) == id }),
            case .object(var members) = assignment
        else { throw GraphError.resourceNotFound }
        members.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#appRoleAssignments/$entity")), at: 0)
        return .json(.object(members), status: .created)
    }

    @Sendable func unassign(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration, held) = (application.tenant, application.administration, application.held)
        guard case .app(let app) = try await principal(context.parameters.get("id"), tenant: tenant) else { throw GraphError.resourceNotFound }
        let id = context.parameters.get("assignment") ?? ""
        let principal = Principal.app(app).id(in: tenant)
        guard let role = (app.permission(on: APIPermission.graphResource)?.roles ?? []).first(where: { role in
            GraphPermissions.appRoleID(role).map { Self.assignmentID(principal: principal, resource: Principal.graph.id(in: tenant), role: $0) } == id
        }) else { throw GraphError.resourceNotFound }
        guard held.contains(role.lowercased()) else { throw GraphError.insufficientPrivileges }
        _ = try await administration.removeAppRole(role, on: APIPermission.graphResource, from: app)
        return Response(status: .noContent)
    }

    static func member(_ name: String, of json: JSONText) -> String? {
        guard case .object(let members) = json, case .string(let value)? = members.first(where: { $0.0 == name })?.1 else { return nil }
        return value
    }
}

extension GraphServicePrincipals {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        let reads = collection.group().add(middleware: permit.application(anyOf: Self.readRoles)).get("servicePrincipals", use: list)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles)).post("servicePrincipals", use: create)
        let assigns = collection.group().add(middleware: permit.application(anyOf: Self.assignRoles))
        for path in ["servicePrincipals/:id", "servicePrincipals{id}"] {
            reads.get(RouterPath(path), use: get)
                .get(RouterPath(path + "/appRoleAssignments"), use: listAssignments)
                .get(RouterPath(path + "/appRoleAssignedTo"), use: listAssignedTo)
            assigns.post(RouterPath(path + "/appRoleAssignments"), use: assign)
                .delete(RouterPath(path + "/appRoleAssignments/:assignment"), use: unassign)
        }
        return collection
    }
}
