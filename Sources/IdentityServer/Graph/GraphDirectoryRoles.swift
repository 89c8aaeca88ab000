import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's directory roles (`/v1.0/directoryRoles`), as far as this tenant has them: Global
/// Administrator, whose members are the accounts holding the `admin` directory role that opens
/// the admin console (SPEC §2.13). List, get (by id or `roleTemplateId`), list members, add a
/// member (`members/$ref`) and remove one, for app-only tokens holding
/// `RoleManagement.ReadWrite.Directory` (or `RoleManagement.Read.Directory` to read). Changes go
/// through the administration door as the calling app, so the audit log names it.
struct GraphDirectoryRoles: Sendable {
    let permit: GraphCallers
    let server: IdentityServer

    static let readRoles = ["RoleManagement.Read.Directory", "RoleManagement.ReadWrite.Directory"]
    static let writeRoles = ["RoleManagement.ReadWrite.Directory"]
    /// Entra's template id of Global Administrator, the same in every tenant.
    static let globalAdministratorTemplate = "62e90394-69f5-4237-9190-012177145e10"

    /// The role's object id in `tenant`: derived from the tenant's id, so every instance agrees.
    static func roleID(of tenant: Tenant) -> String {
        AdminConsole.nameBasedID("todo-directory-role:admin:\(tenant.guid)").uuidString.lowercased()
    }

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return .json(.object([
            ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#directoryRoles")), ("value", .array([Self.json(tenant)])),
        ]))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        try Self.role(context, tenant: tenant)
        guard case .object(var members) = Self.json(tenant) else { throw GraphError.resourceNotFound }
        members.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#directoryRoles/$entity")), at: 0)
        return .json(.object(members))
    }

    @Sendable func members(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        try Self.role(context, tenant: tenant)
        var value: [JSONText] = []
        for id in try await DirectoryRoles(database: server.database).members(of: .admin, tenantID: tenant.id) {
            guard let user = try await server.users.user(id: id) else { continue }
            value.append(.object([
                ("@odata.type", .string("#microsoft.graph.user")), ("id", .string(user.objectID)), ("displayName", .string(user.displayName)),
                ("userPrincipalName", .string(GraphUserJSON.userPrincipalName(user, tenant: tenant))),
            ]))
        }
        return .json(.object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#directoryObjects")), ("value", .array(value))]))
    }

    /// `POST …/members/$ref` `{"@odata.id": "https://graph.microsoft.com/v1.0/directoryObjects/{id}"}`.
    @Sendable func addMember(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        try Self.role(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let reference)? = body["@odata.id"], let id = Self.referencedID(reference), let user = try await member(id, tenant: tenant)
        else { throw GraphError.badRequest("The @odata.id must name a user of this tenant (…/directoryObjects/{id}).") }
        guard !(try await administration.roles(of: user).contains(.admin)) else {
            throw GraphError.badRequest("One or more added object references already exist for the following modified properties: 'members'.")
        }
        try await administration.assignRole(.admin, to: user)
        return Response(status: .noContent)
    }

    /// `DELETE …/members/{id}/$ref`.
    @Sendable func removeMember(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        try Self.role(context, tenant: tenant)
        guard let user = try await member(context.parameters.get("member") ?? "", tenant: tenant),
            try await administration.roles(of: user).contains(.admin)
        else { throw GraphError.resourceNotFound }
        try await administration.removeRole(.admin, from: user)
        return Response(status: .noContent)
    }

    /// The object id of `https://graph.microsoft.com/v1.0/directoryObjects/{id}` (or `users/{id}`,
    /// on any host this service answers as Graph): nothing else is a reference.
    /// `collections` are the segments a reference may name (lower-case; a group's members may
    /// also be `groups/{id}`).
    static func referencedID(_ reference: String, collections: Set<String> = ["directoryobjects", "users"]) -> String? {
        guard let url = URLComponents(string: reference), ["https", "http"].contains(url.scheme?.lowercased() ?? ""), url.query == nil else { return nil }
        let segments = url.path.split(separator: "/").map(String.init)
        guard segments.count == 3, ["v1.0", "beta"].contains(segments[0].lowercased()),
            collections.contains(segments[1].lowercased()), UUID(uuidString: segments[2]) != nil
        else { return nil }
        return segments[2]
    }

    private func member(_ id: String, tenant: Tenant) async throws -> UserAccount? {
        guard let uuid = UUID(uuidString: id), let user = try await server.users.user(id: uuid), user.tenantID == tenant.id else { return nil }
        return user
    }

    /// The `{id}` must be this tenant's role: its object id, or `roleTemplateId=…` (Graph's alternate key).
    private static func role(_ context: GraphRequestContext, tenant: Tenant) throws {
        let key = (context.parameters.get("id")?.removingPercentEncoding ?? "").lowercased()
        let template = "roletemplateid=\(globalAdministratorTemplate)"
        guard key == roleID(of: tenant) || key == template || key == "(\(template))" || key == "(roletemplateid='\(globalAdministratorTemplate)')"
        else { throw GraphError.resourceNotFound }
    }

    static func json(_ tenant: Tenant) -> JSONText {
        .object([
            ("id", .string(roleID(of: tenant))), ("deletedDateTime", .null),
            ("description", .string("Can manage all aspects of the directory, and sign in to the TodoB2C admin console.")),
            ("displayName", .string("Global Administrator")), ("roleTemplateId", .string(globalAdministratorTemplate)),
        ])
    }
}

extension GraphDirectoryRoles {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("directoryRoles", use: list)
            .get("directoryRoles/:id", use: get)
            .get("directoryRoles/:id/members", use: members)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("directoryRoles/:id/members/$ref", use: addMember)
            .delete("directoryRoles/:id/members/:member/$ref", use: removeMember)
        return collection
    }
}
