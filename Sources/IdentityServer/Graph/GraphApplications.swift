import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's `/v1.0/applications` (SPEC §2.14): list, create, get, patch and delete app
/// registrations, `addPassword` and `removePassword`, by object id or `(appId='…')`; for
/// app-only tokens holding `Application.ReadWrite.All` (`Application.Read.All` to read).
/// Everything goes through the administration door as the calling app. An app registered here
/// signs users in at once; a secret added here works at the token endpoint at once.
///
/// One rule Entra leaves to its admins: an app cannot change, or add a secret to, an app
/// holding Graph application permissions it does not hold itself — else
/// `Application.ReadWrite.All` would be every other permission (add a secret to a more
/// privileged app, and sign in as it).
struct GraphApplications: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let hosts: HostPolicy

    static let readRoles = ["Application.Read.All", "Application.ReadWrite.All"]
    static let writeRoles = ["Application.ReadWrite.All"]

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphListQuery(
            request.uri.query, type: "application", properties: GraphApplicationJSON.properties, filterable: GraphApplicationJSON.filterable)
        var items: [[(String, JSONText)]] = []
        for app in try await Self.applications(tenant, server: server) {
            items.append(GraphApplicationJSON.members(app, tenant: tenant, credentials: try await server.administration.passwordCredentials(of: app)))
        }
        return .json(
            query.page(
                items, context: "https://graph.microsoft.com/v1.0/$metadata#applications", origin: hosts.origin(of: request),
                path: "/v1.0/applications"))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphListQuery(request.uri.query, type: "application", properties: GraphApplicationJSON.properties, filterable: [])
        let app = try await Self.application(context, tenant: tenant, server: server)
        return try await answer(app, tenant: tenant, select: query, status: .ok)
    }

    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        // Public until it has a web redirect or a secret (``GraphApplicationDraft``).
        var app = AppRegistration(clientID: UUID(), tenantID: tenant.id, displayName: "", kind: .public, redirectURIs: [])
        _ = try GraphApplicationDraft.apply(body, to: &app, creating: true)
        app = try await administration.createApplication(app)
        context.logger.info("application created through Graph", metadata: ["appId": "\(app.clientIDString)"])
        return try await answer(app, tenant: tenant, select: nil, status: .created)
    }

    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration, held) = (application.tenant, application.administration, application.held)
        var app = try await Self.application(context, tenant: tenant, server: server)
        try Self.refuseEscalation(to: app, held: held)
        let body = try await GraphBody.object(request, context: context)
        let modified = try GraphApplicationDraft.apply(body, to: &app, creating: false)
        guard !modified.isEmpty else { return Response(status: .noContent) }
        try await administration.updateApplication(app, modified: modified)
        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration, held) = (application.tenant, application.administration, application.held)
        let app = try await Self.application(context, tenant: tenant, server: server)
        try Self.refuseEscalation(to: app, held: held)
        _ = try await administration.removeApplication(tenantID: tenant.id, clientID: app.clientID)
        return Response(status: .noContent)
    }

    /// `POST …/addPassword` `{"passwordCredential": {"displayName", "endDateTime"}}`: the new
    /// secret, its text shown this once.
    @Sendable func addPassword(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration, held) = (application.tenant, application.administration, application.held)
        let app = try await Self.application(context, tenant: tenant, server: server)
        try Self.refuseEscalation(to: app, held: held)
        let body = try await GraphBody.object(request, context: context)
        var displayName: String?
        var end: Date?
        if let value = body["passwordCredential"] {
            guard case .object(let credential) = value else { throw GraphError.badRequest("passwordCredential must be an object.") }
            if case .string(let name)? = credential["displayName"] {
                guard name.count <= 256, TextRules.printable(name) == name else {
                    throw GraphError.badRequest("A secret's displayName is at most 256 printable characters.")
                }
                displayName = name
            }
            if case .string(let text)? = credential["endDateTime"] {
                guard let date = ISO8601DateFormatter().date(from: text) ?? Self.fractionalDates.date(from: text) else {
                    throw GraphError.badRequest("endDateTime is not an ISO 8601 date and time.")
                }
                end = date
            }
        }
        // Graph's default: two years from now.
        let expiresAt = end ?? server.clock.now.addingTimeInterval(2 * 365 * 86_400)
        let (credential, secret) = try await administration.addPassword(to: app, displayName: displayName, expiresAt: expiresAt)
        guard case .object(var members) = GraphApplicationJSON.credential(.string(secret), credential) else { throw GraphError.resourceNotFound }
        members.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#microsoft.graph.passwordCredential")), at: 0)
        return .json(.object(members), noStore: true)
    }

    /// `POST …/removePassword` `{"keyId"}`.
    @Sendable func removePassword(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration, held) = (application.tenant, application.administration, application.held)
        let app = try await Self.application(context, tenant: tenant, server: server)
        try Self.refuseEscalation(to: app, held: held)
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let text)? = body["keyId"], let keyID = UUID(uuidString: text) else {
            throw GraphError.badRequest("keyId must be the key id of one of the app's passwordCredentials.")
        }
        guard try await administration.removePassword(keyID, of: app) else {
            throw GraphError.badRequest("No password credential found with keyId '\(text)'.", code: "Request_BadRequest")
        }
        return Response(status: .noContent)
    }

    static var fractionalDates: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }

    private func answer(_ app: AppRegistration, tenant: Tenant, select: GraphListQuery?, status: HTTPResponse.Status) async throws -> Response {
        var members = GraphApplicationJSON.members(app, tenant: tenant, credentials: try await server.administration.passwordCredentials(of: app))
        if let select, case .object(let chosen) = select.selected(members) { members = chosen }
        members.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#applications/$entity")), at: 0)
        return .json(.object(members), status: status)
    }

    /// The tenant's apps Graph shows: all but the admin console's own, which only the server
    /// manages (a redirect URI added to it through Graph would send an admin's sign-in elsewhere).
    static func applications(_ tenant: Tenant, server: IdentityServer) async throws -> [AppRegistration] {
        let console = AdminConsole.clientID(of: tenant)
        return try await server.administration.applications(tenantID: tenant.id).filter { $0.clientID != console }
            .sorted { $0.clientIDString < $1.clientIDString }
    }

    /// The app `{id}` names: its object id, or `(appId='…')` / `appId=…` (Graph's alternate key).
    static func application(_ context: GraphRequestContext, tenant: Tenant, server: IdentityServer) async throws -> AppRegistration {
        let key = (context.parameters.get("id")?.removingPercentEncoding ?? "").lowercased()
        let apps = try await applications(tenant, server: server)
        if let appID = alternateKey(key, name: "appid") {
            guard let app = apps.first(where: { $0.clientIDString == appID }) else { throw GraphError.resourceNotFound }
            return app
        }
        guard let app = apps.first(where: { GraphApplicationJSON.objectID(of: $0) == key }) else { throw GraphError.resourceNotFound }
        return app
    }

    /// `(appId='x')`, `appId='x'`, `appId=x` → `x` (lower-cased input).
    static func alternateKey(_ key: String, name: String) -> String? {
        var text = key
        if text.hasPrefix("("), text.hasSuffix(")") { text = String(text.dropFirst().dropLast()) }
        guard text.hasPrefix("\(name)=") else { return nil }
        return String(text.dropFirst(name.count + 1)).trimmingCharacters(in: CharacterSet(charactersIn: "'"))
    }

    /// Refuses a change to an app that holds Graph application permissions the caller lacks.
    static func refuseEscalation(to app: AppRegistration, held: Set<String>) throws {
        let roles = app.permission(on: APIPermission.graphResource)?.roles ?? []
        guard roles.allSatisfy({ held.contains($0.lowercased()) }) else { throw GraphError.insufficientPrivileges }
    }
}

extension GraphApplications {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        // `{id}` is an object id or Graph's alternate key (`applications(appId='…')`, a segment
        // the `{key}` capture takes whole).
        let collection = RouteCollection(context: GraphRequestContext.self)
        let reads = collection.group().add(middleware: permit.application(anyOf: Self.readRoles)).get("applications", use: list)
        let writes = collection.group().add(middleware: permit.application(anyOf: Self.writeRoles)).post("applications", use: create)
        for path in ["applications/:id", "applications{id}"] {
            reads.get(RouterPath(path), use: get)
            writes.patch(RouterPath(path), use: update)
                .delete(RouterPath(path), use: delete)
                .post(RouterPath(path + "/addPassword"), use: addPassword)
                .post(RouterPath(path + "/removePassword"), use: removePassword)
        }
        return collection
    }
}
