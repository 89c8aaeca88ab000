import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's `/v1.0/groups` as a B2C tenant has them (SPEC §2.14): security groups (no
/// Microsoft 365 groups, no mail), their members (`$ref` add and remove; users and other
/// groups), a user's `memberOf` and `transitiveMemberOf`, and `checkMemberGroups`. Reading takes
/// `Group.Read.All` (or `GroupMember.Read.All`, or either ReadWrite); writing groups
/// `Group.ReadWrite.All`, members also `GroupMember.ReadWrite.All`.
struct GraphGroups: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let hosts: HostPolicy

    static let readRoles = ["Group.Read.All", "Group.ReadWrite.All", "GroupMember.Read.All", "GroupMember.ReadWrite.All"]
    static let writeRoles = ["Group.ReadWrite.All"]
    static let memberRoles = ["Group.ReadWrite.All", "GroupMember.ReadWrite.All"]
    static let userReadRoles = readRoles + GraphUsers.readRoles
    static let properties = [
        "id", "deletedDateTime", "classification", "createdDateTime", "description", "displayName", "groupTypes", "mail", "mailEnabled",
        "mailNickname", "securityEnabled", "visibility",
    ]

    static func members(_ group: DirectoryGroup) -> [(String, JSONText)] {
        [
            ("id", .string(group.objectID)), ("deletedDateTime", .null), ("classification", .null),
            ("createdDateTime", .string(ISO8601DateFormatter().string(from: group.createdAt))),
            ("description", group.description.map(JSONText.string) ?? .null), ("displayName", .string(group.displayName)),
            ("groupTypes", .array([])), ("mail", .null), ("mailEnabled", .bool(false)), ("mailNickname", .string(group.mailNickname)),
            ("securityEnabled", .bool(true)), ("visibility", .null),
        ]
    }

    private static func typed(_ group: DirectoryGroup) -> JSONText {
        .object([("@odata.type", .string("#microsoft.graph.group"))] + members(group))
    }

    private static func entity(_ group: DirectoryGroup, status: HTTPResponse.Status = .ok) -> Response {
        .json(.object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#groups/$entity"))] + members(group)), status: status)
    }

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphListQuery(
            request.uri.query, type: "group", properties: Self.properties, filterable: ["displayName", "id", "mailNickname", "securityEnabled"])
        let items = try await server.administration.groups(tenantID: tenant.id).map(Self.members)
        return .json(
            query.page(items, context: "https://graph.microsoft.com/v1.0/$metadata#groups", origin: hosts.origin(of: request), path: "/v1.0/groups"))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return Self.entity(try await group(context, tenant: tenant))
    }

    /// `POST /groups {"displayName", "mailNickname", "mailEnabled": false, "securityEnabled": true,
    /// "description"?, "groupTypes": []?, "members@odata.bind"?: [users]}`.
    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        let known: Set<String> = [
            "@odata.type", "displayName", "mailNickname", "mailEnabled", "securityEnabled", "description", "groupTypes", "members@odata.bind",
        ]
        for key in body.keys where !known.contains(key) {
            throw GraphError.badRequest("Property '\(TextRules.printable(String(key.prefix(64))))' does not exist on type 'microsoft.graph.group'.")
        }
        guard case .string(let name)? = body["displayName"], case .string(let nickname)? = body["mailNickname"] else {
            throw GraphError.badRequest("displayName and mailNickname are required.")
        }
        guard body["mailEnabled"].map({ $0 == .bool(false) }) ?? true, body["securityEnabled"].map({ $0 == .bool(true) }) ?? true else {
            throw GraphError.badRequest("Only security groups are supported here: mailEnabled false, securityEnabled true.")
        }
        if let types = body["groupTypes"], types != .array([]) {
            throw GraphError.badRequest("Only security groups are supported here: groupTypes must be empty (no Unified groups).")
        }
        var description: String?
        switch body["description"] {
        case .string(let text)?: description = text
        case nil, .null?: description = nil
        default: throw GraphError.badRequest("description must be a string.")
        }
        var initial: [UserAccount] = []
        if let binds = body["members@odata.bind"] {
            guard case .array(let references) = binds, references.count <= 20 else {
                throw GraphError.badRequest("members@odata.bind is a list of at most 20 user references.")
            }
            for reference in references {
                guard case .string(let text) = reference, let id = GraphDirectoryRoles.referencedID(text), let user = try await user(id, tenant: tenant)
                else { throw GraphError.badRequest("members@odata.bind must name users of this tenant (…/directoryObjects/{id}).") }
                initial.append(user)
            }
        }
        let group = DirectoryGroup(
            id: UUID(), tenantID: tenant.id, displayName: name, description: description, mailNickname: nickname,
            createdAt: Date(timeIntervalSince1970: TimeInterval(server.clock.now.epochSeconds)))
        try await administration.createGroup(group)
        for user in initial { try await administration.addMember(.user(user.id), to: group) }
        return Self.entity(group, status: .created)
    }

    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var group = try await self.group(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        var modified: [String] = []
        for (key, value) in body.sorted(by: { $0.key < $1.key }) {
            switch (key, value) {
            case ("displayName", .string(let name)): group.displayName = name
            case ("mailNickname", .string(let nickname)): group.mailNickname = nickname
            case ("description", .string(let text)): group.description = text
            case ("description", .null): group.description = nil
            case ("@odata.type", _): continue
            default: throw GraphError.badRequest("Property '\(TextRules.printable(String(key.prefix(64))))' cannot be changed here.")
            }
            modified.append(key)
        }
        guard !modified.isEmpty else { return Response(status: .noContent) }
        try await administration.updateGroup(group, modified: modified)
        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        _ = try await administration.deleteGroup(try await group(context, tenant: tenant))
        return Response(status: .noContent)
    }

    // MARK: Members

    @Sendable func listMembers(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let group = try await group(context, tenant: tenant)
        var value: [JSONText] = []
        for member in try await server.administration.members(of: group) {
            if let json = try await directoryObject(member.id, tenant: tenant) { value.append(json) }
        }
        return .json(.object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#directoryObjects")), ("value", .array(value))]))
    }

    /// `POST /groups/{id}/members/$ref {"@odata.id": "…/directoryObjects/{id}"}`: a user or a
    /// group of this tenant; a cycle is refused.
    @Sendable func addMember(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let group = try await group(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let reference)? = body["@odata.id"], let id = GraphDirectoryRoles.referencedID(reference, collections: ["directoryobjects", "users", "groups"]) else {
            throw GraphError.badRequest("The @odata.id must name a user or group of this tenant (…/directoryObjects/{id}).")
        }
        let member: GroupMember
        if let user = try await user(id, tenant: tenant) {
            member = .user(user.id)
        } else if let uuid = UUID(uuidString: id), let child = try await server.administration.group(tenantID: tenant.id, id: uuid) {
            member = .group(child.id)
        } else {
            throw GraphError(status: .notFound, code: "Request_ResourceNotFound", message: "Resource '\(id)' does not exist.")
        }
        try await administration.addMember(member, to: group)
        return Response(status: .noContent)
    }

    @Sendable func removeMember(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let group = try await group(context, tenant: tenant)
        guard let id = UUID(uuidString: context.parameters.get("member") ?? ""), try await administration.removeMember(id, from: group) else {
            throw GraphError.resourceNotFound
        }
        return Response(status: .noContent)
    }

    // MARK: Memberships of a user or group

    /// `GET /users/{id}/memberOf` (direct) and `transitiveMemberOf`; also under `/groups/{id}`.
    func memberships(transitive: Bool, ofGroup: Bool) -> @Sendable (Request, GraphRequestContext) async throws -> Response {
        { request, context in
            let tenant = try context.requireApplication().tenant
            let id = try await subject(context, tenant: tenant, group: ofGroup)
            let groups =
                transitive
                ? Array(try await server.administration.transitiveGroups(of: id)) : try await server.administration.directGroups(of: id)
            var value: [JSONText] = []
            for groupID in groups.sorted(by: { $0.uuidString < $1.uuidString }) {
                if let group = try await server.administration.group(tenantID: tenant.id, id: groupID) { value.append(Self.typed(group)) }
            }
            return .json(.object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#directoryObjects")), ("value", .array(value))]))
        }
    }

    /// `POST …/checkMemberGroups {"groupIds": [...]}`: those of the ids the user (or group) is
    /// in, directly or through nesting.
    func checkMemberGroups(ofGroup: Bool) -> @Sendable (Request, GraphRequestContext) async throws -> Response {
        { request, context in
            let tenant = try context.requireApplication().tenant
            let id = try await subject(context, tenant: tenant, group: ofGroup)
            let body = try await GraphBody.object(request, context: context)
            guard case .array(let items)? = body["groupIds"], items.count <= 20 else {
                throw GraphError.badRequest("groupIds must be a list of at most 20 group ids.")
            }
            let asked = try items.map { item -> String in
                guard case .string(let text) = item, UUID(uuidString: text) != nil else { throw GraphError.badRequest("groupIds must be group ids.") }
                return text.lowercased()
            }
            let held = Set(try await server.administration.transitiveGroups(of: id).map { $0.uuidString.lowercased() })
            return .json(
                .object([
                    ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#Collection(Edm.String)")),
                    ("value", .array(asked.filter(held.contains).map(JSONText.string))),
                ]))
        }
    }

    /// `POST …/getMemberObjects {"securityEnabledOnly"}`: every group the user (or group) is in,
    /// through nesting, and a user's directory roles — where Entra's groups overage claim sends
    /// an app for the groups its token could not hold.
    func memberObjects(ofGroup: Bool) -> @Sendable (Request, GraphRequestContext) async throws -> Response {
        { request, context in
            let tenant = try context.requireApplication().tenant
            let id = try await subject(context, tenant: tenant, group: ofGroup)
            var ids = try await server.administration.transitiveGroups(of: id).map { $0.uuidString.lowercased() }.sorted()
            if !ofGroup, let user = try await server.users.user(id: id), try await server.administration.roles(of: user).contains(.admin) {
                ids.append(GraphDirectoryRoles.roleID(of: tenant))
            }
            return .json(
                .object([
                    ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#Collection(Edm.String)")),
                    ("value", .array(ids.map(JSONText.string))),
                ]))
        }
    }

    // MARK: Lookups

    private func group(_ context: GraphRequestContext, tenant: Tenant) async throws -> DirectoryGroup {
        guard let id = UUID(uuidString: context.parameters.get("id") ?? ""), let group = try await server.administration.group(tenantID: tenant.id, id: id)
        else { throw GraphError.resourceNotFound }
        return group
    }

    /// The member whose memberships are asked: a user of the tenant (by id or sign-in name, as
    /// `/users/{id}` takes), or a group.
    private func subject(_ context: GraphRequestContext, tenant: Tenant, group: Bool) async throws -> UUID {
        if group { return try await self.group(context, tenant: tenant).id }
        guard let user = try await user(context.parameters.get("id") ?? "", tenant: tenant) else { throw GraphError.resourceNotFound }
        return user.id
    }

    private func user(_ id: String, tenant: Tenant) async throws -> UserAccount? {
        guard let uuid = UUID(uuidString: id), let user = try await server.users.user(id: uuid), user.tenantID == tenant.id else { return nil }
        return user
    }

    private func directoryObject(_ id: UUID, tenant: Tenant) async throws -> JSONText? {
        if let user = try await user(id.uuidString, tenant: tenant) {
            return .object([
                ("@odata.type", .string("#microsoft.graph.user")), ("id", .string(user.objectID)), ("displayName", .string(user.displayName)),
                ("userPrincipalName", .string(GraphUserJSON.userPrincipalName(user, tenant: tenant))),
            ])
        }
        return try await server.administration.group(tenantID: tenant.id, id: id).map(Self.typed)
    }
}

extension GraphGroups {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("groups", use: list)
            .get("groups/:id", use: get)
            .get("groups/:id/members", use: listMembers)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("groups", use: create)
            .patch("groups/:id", use: update)
            .delete("groups/:id", use: delete)
        collection.group().add(middleware: permit.application(anyOf: Self.memberRoles))
            .post("groups/:id/members/$ref", use: addMember)
            .delete("groups/:id/members/:member/$ref", use: removeMember)
        // A group's or a user's memberships, on the same rules for both.
        collection.group().add(middleware: permit.application(anyOf: Self.userReadRoles))
            .get("groups/:id/memberOf", use: memberships(transitive: false, ofGroup: true))
            .get("groups/:id/transitiveMemberOf", use: memberships(transitive: true, ofGroup: true))
            .post("groups/:id/checkMemberGroups", use: checkMemberGroups(ofGroup: true))
            .post("groups/:id/getMemberObjects", use: memberObjects(ofGroup: true))
            .get("users/:id/memberOf", use: memberships(transitive: false, ofGroup: false))
            .get("users/:id/transitiveMemberOf", use: memberships(transitive: true, ofGroup: false))
            .post("users/:id/checkMemberGroups", use: checkMemberGroups(ofGroup: false))
            .post("users/:id/getMemberObjects", use: memberObjects(ofGroup: false))
        return collection
    }
}
