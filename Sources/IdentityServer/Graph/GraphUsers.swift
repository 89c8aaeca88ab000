import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Microsoft Graph's users API as B2C tenants are managed with it (SPEC §2.10): list, create,
/// read, update, delete and `revokeSignInSessions`, for app-only tokens holding
/// `User.Read.All` (reads) or `User.ReadWrite.All`. The account rules are the admin commands'
/// (``IdentityServer/createUser(tenantID:_:)``), so both write the same accounts.
struct GraphUsers: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let hosts: HostPolicy

    static let readRoles = ["User.Read.All", "User.ReadWrite.All"]
    static let writeRoles = ["User.ReadWrite.All"]

    // MARK: Routes

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphQuery(request.uri.query, tenant: tenant)
        var matching = try await server.users.users(tenantID: tenant.id)
        if let filter = query.filter { matching = matching.filter { filter.matches($0, tenant: tenant) } }
        if let (property, descending) = query.orderBy {
            func key(_ user: UserAccount) -> String {
                (property == "displayName" ? user.displayName : GraphUserJSON.userPrincipalName(user, tenant: tenant)).lowercased()
            }
            // Ties keep the object id order, so pages never overlap.
            matching.sort { a, b in
                let (x, y) = (key(a), key(b))
                return x == y ? a.objectID < b.objectID : (descending ? x > y : x < y)
            }
        }
        if query.count, request.headers[.init("ConsistencyLevel")!]?.lowercased() != "eventual" {
            throw GraphError.badRequest("$count requires the ConsistencyLevel header set to eventual.")
        }
        let page = matching.dropFirst(query.skip).prefix(query.top)
        var body: [(String, JSONText)] = [("@odata.context", .string(GraphUserJSON.context(select: query.select, collection: true)))]
        if query.count { body.append(("@odata.count", .int(Int64(matching.count)))) }
        body.append(("value", .array(page.map { GraphUserJSON.user($0, tenant: tenant, select: query.select) })))
        if query.skip + page.count < matching.count {
            body.append(("@odata.nextLink", .string(query.nextLink(origin: hosts.origin(of: request), skip: query.skip + page.count))))
        }
        return .json(.object(body))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphQuery(request.uri.query, tenant: tenant)
        let user = try await self.user(context, tenant: tenant)
        var body = GraphUserJSON.members(user, tenant: tenant, select: query.select)
        body.insert(("@odata.context", .string(GraphUserJSON.context(select: query.select, collection: false))), at: 0)
        return .json(.object(body))
    }

    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        let account = try GraphUserDraft.newAccount(from: body, tenant: tenant)
        let user: UserAccount
        user = try await administration.createUser(tenantID: tenant.id, account)

        context.logger.info("user created through Graph", metadata: ["oid": "\(user.objectID)"])
        var members = GraphUserJSON.members(user, tenant: tenant, select: nil)
        members.insert(("@odata.context", .string(GraphUserJSON.context(select: nil, collection: false))), at: 0)
        return .json(.object(members), status: .created)
    }

    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let user = try await self.user(context, tenant: tenant)
        try await refuseUnlessPrivileged(user, context)
        let body = try await GraphBody.object(request, context: context)
        let changes = try GraphUserDraft.changes(from: body, tenant: tenant)
        try await administration.updateUser(user, changes)

        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let user = try await self.user(context, tenant: tenant)
        try await refuseUnlessPrivileged(user, context)
        try await administration.deleteUser(user)
        context.logger.info("user deleted through Graph", metadata: ["oid": "\(user.objectID)"])
        return Response(status: .noContent)
    }

    /// `POST /users/{id}/revokeSignInSessions`: ends SSO and every refresh-token family.
    @Sendable func revokeSignInSessions(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let user = try await self.user(context, tenant: tenant)
        try await refuseUnlessPrivileged(user, context)
        try await administration.revokeSessions(user)
        return .json(
            .object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#Edm.Boolean")), ("value", .bool(true))]))
    }

    /// An admin's account (the console's `admin` role, Graph's Global Administrator) is changed,
    /// deleted or signed out only by an app that may manage roles too: as Entra refuses a
    /// user-management app a privileged account's password, an app holding only
    /// `User.ReadWrite.All` could otherwise set an admin's password and sign in to the console.
    private func refuseUnlessPrivileged(_ user: UserAccount, _ context: GraphRequestContext) async throws {
        guard try await server.administration.roles(of: user).contains(.admin) else { return }
        guard try context.requireApplication().holds(anyOf: GraphDirectoryRoles.writeRoles) else { throw GraphError.insufficientPrivileges }
    }

    /// `{id}`: an object id, or a user principal name (a local account's email), in this tenant.
    private func user(_ context: GraphRequestContext, tenant: Tenant) async throws -> UserAccount {
        let key = context.parameters.get("id")?.removingPercentEncoding ?? ""
        // `{oid}@{tenant}`, the user principal name B2C writes in `identities`, names the object id.
        var lookup = key
        if let at = key.firstIndex(of: "@"), key[key.index(after: at)...].lowercased() == tenant.name.lowercased(),
            UUID(uuidString: String(key[..<at])) != nil
        {
            lookup = String(key[..<at])
        }
        let found: UserAccount?
        do {
            found = try await server.administration.findUser(tenantID: tenant.id, emailOrID: lookup)
        } catch IdentityAdministration.AdministrationError.noSuchUser {
            found = nil
        }
        guard let user = found else {
            throw GraphError(
                status: .notFound, code: "Request_ResourceNotFound",
                message:
                    "Resource '\(TextRules.printable(key))' does not exist or one of its queried reference-property objects are not present."
            )
        }
        return user
    }
}

// MARK: - The user resource

/// A user as Graph writes it (Graph REST v1.0 `user` resource; B2C's `identities`).
enum GraphUserJSON {
    /// What Graph returns without `$select`.
    static let defaultProperties = [
        "businessPhones", "displayName", "givenName", "jobTitle", "mail", "mobilePhone", "officeLocation", "preferredLanguage",
        "surname", "userPrincipalName", "id",
    ]
    /// Every property `$select` may name.
    static let selectable: Set<String> = Set(defaultProperties).union([
        "accountEnabled", "identities", "passwordPolicies", "createdDateTime", "creationType", "city", "country", "postalCode",
        "state", "streetAddress", "otherMails",
    ])

    static func context(select: [String]?, collection: Bool) -> String {
        let base = "https://graph.microsoft.com/v1.0/$metadata#users"
        let selection = select.map { "(\($0.joined(separator: ",")))" } ?? ""
        return base + selection + (collection ? "" : "/$entity")
    }

    static func user(_ user: UserAccount, tenant: Tenant, select: [String]?) -> JSONText {
        .object(members(user, tenant: tenant, select: select))
    }

    /// A selected extension property the account has no value for is left out, as Graph does.
    static func members(_ user: UserAccount, tenant: Tenant, select: [String]?) -> [(String, JSONText)] {
        let extensions = extensionProperties(of: tenant)
        return (select ?? defaultProperties).compactMap { property in
            if let attribute = extensions.first(where: { $0.graphName == property })?.attribute {
                return user.attributes[attribute.claimName].flatMap(attribute.json).map { (property, $0) }
            }
            return (property, value(of: property, user: user, tenant: tenant))
        }
    }

    /// The tenant's own attributes under their Graph names: directory extensions of its
    /// b2c-extensions-app, returned only when `$select` names them (Graph v1.0).
    static func extensionProperties(of tenant: Tenant) -> [(graphName: String, attribute: CustomAttribute)] {
        tenant.userAttributes.map { ($0.graphName(extensionsAppID: tenant.extensionsAppID), $0) }
    }

    /// A local account's user principal name is its email, as `/me` writes it; a federated one's
    /// is `{oid}@{tenant}`, the form B2C gives accounts without one.
    static func userPrincipalName(_ user: UserAccount, tenant: Tenant) -> String {
        user.identityProvider == .local ? (user.email ?? user.signInName) : "\(user.objectID)@\(tenant.name)"
    }

    private static func value(of property: String, user: UserAccount, tenant: Tenant) -> JSONText {
        func attribute(_ attribute: UserAttribute) -> JSONText { user.value(of: attribute).map(JSONText.string) ?? .null }
        switch property {
        case "id": return .string(user.objectID)
        case "displayName": return .string(user.displayName)
        case "givenName": return attribute(.givenName)
        case "surname": return attribute(.surname)
        case "jobTitle": return attribute(.jobTitle)
        case "city": return attribute(.city)
        case "country": return attribute(.country)
        case "postalCode": return attribute(.postalCode)
        case "state": return attribute(.state)
        case "streetAddress": return attribute(.streetAddress)
        case "officeLocation": return attribute(.city)
        case "mail": return user.presentableEmail.map(JSONText.string) ?? .null
        case "otherMails": return .array([])
        case "businessPhones": return .array([])
        case "mobilePhone", "preferredLanguage": return .null
        case "userPrincipalName": return .string(userPrincipalName(user, tenant: tenant))
        case "accountEnabled": return .bool(user.accountEnabled)
        case "passwordPolicies": return user.passwordPolicies.map(JSONText.string) ?? .null
        case "createdDateTime": return .string(ISO8601DateFormatter().string(from: user.createdAt))
        case "creationType": return user.identityProvider == .local ? .string("LocalAccount") : .null
        case "identities": return .array(identities(user, tenant: tenant))
        default: return .null
        }
    }

    /// B2C's identities: the sign-in identity, then the user principal name.
    static func identities(_ user: UserAccount, tenant: Tenant) -> [JSONText] {
        func identity(_ type: String, _ issuer: String, _ id: String) -> JSONText {
            .object([("signInType", .string(type)), ("issuer", .string(issuer)), ("issuerAssignedId", .string(id))])
        }
        let upn = identity("userPrincipalName", tenant.name, "\(user.objectID)@\(tenant.name)")
        if user.identityProvider == .local { return [identity("emailAddress", tenant.name, user.email ?? user.signInName), upn] }
        return [identity("federated", user.identityProvider.rawValue, user.signInName), upn]
    }
}

extension GraphUsers {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("users", use: list)
            .get("users/:id", use: get)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("users", use: create)
            .patch("users/:id", use: update)
            .delete("users/:id", use: delete)
            .post("users/:id/revokeSignInSessions", use: revokeSignInSessions)
        return collection
    }
}
