import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's `/v1.0/identity/userFlowAttributes`, `/identity/apiConnectors` and
/// `/identity/identityProviders` (SPEC §2.14), over the tenant's declared attributes,
/// connectors and upstream providers: the YAML's store, so an export shows what Graph changed.
/// Secrets are write-only (`******` when read), as Graph has them.
struct GraphIdentityResources: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let hosts: HostPolicy

    static let flowReadRoles = ["IdentityUserFlow.Read.All", "IdentityUserFlow.ReadWrite.All"]
    static let flowWriteRoles = ["IdentityUserFlow.ReadWrite.All"]
    static let connectorReadRoles = ["APIConnectors.Read.All", "APIConnectors.ReadWrite.All"]
    static let connectorWriteRoles = ["APIConnectors.ReadWrite.All"]
    static let providerReadRoles = ["IdentityProvider.Read.All", "IdentityProvider.ReadWrite.All"]
    static let providerWriteRoles = ["IdentityProvider.ReadWrite.All"]
    static let hidden = JSONText.string("******")

    private static func collection(_ context: String, _ items: [JSONText]) -> Response {
        .json(.object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#\(context)")), ("value", .array(items))]))
    }

    private static func entity(_ context: String, _ item: JSONText, status: HTTPResponse.Status = .ok) -> Response {
        guard case .object(let members) = item else { return .json(item, status: status) }
        return .json(.object([("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#\(context)/$entity"))] + members), status: status)
    }

    // MARK: User flow attributes

    /// A built-in attribute's Graph id: its name with a capital (`City`, `DisplayName`).
    static func graphID(_ attribute: UserAttribute) -> String { attribute.rawValue.prefix(1).uppercased() + attribute.rawValue.dropFirst() }

    static func attributeJSON(builtIn attribute: UserAttribute) -> JSONText {
        .object([
            ("@odata.type", .string("#microsoft.graph.identityBuiltInUserFlowAttribute")), ("id", .string(graphID(attribute))),
            ("displayName", .string(attribute.labelForGraph)), ("description", .string("Your \(attribute.labelForGraph.lowercased())")),
            ("userFlowAttributeType", .string("builtIn")), ("dataType", .string("string")),
        ])
    }

    static func attributeJSON(_ attribute: CustomAttribute, tenant: Tenant) -> JSONText {
        .object([
            ("@odata.type", .string("#microsoft.graph.identityCustomUserFlowAttribute")),
            ("id", .string(attribute.graphName(extensionsAppID: tenant.extensionsAppID))), ("displayName", .string(attribute.name)),
            ("description", .string(attribute.description ?? "")), ("userFlowAttributeType", .string("custom")),
            ("dataType", .string(attribute.type == .int ? "int64" : attribute.type.rawValue)),
        ])
    }

    /// The flow attribute a Graph id names (built-in by name, custom by its extension name), if any.
    static func flowAttribute(_ id: String, tenant: Tenant) -> FlowAttribute? {
        if let builtIn = UserAttribute.allCases.first(where: { $0.rawValue.lowercased() == id.lowercased() }) { return .builtIn(builtIn) }
        return tenant.userAttributes.first { $0.graphName(extensionsAppID: tenant.extensionsAppID).lowercased() == id.lowercased() }
            .map { .custom($0.name) }
    }

    static func attributeJSON(_ attribute: FlowAttribute, tenant: Tenant) -> JSONText? {
        switch attribute {
        case .builtIn(let builtIn): attributeJSON(builtIn: builtIn)
        case .custom(let name): tenant.customAttribute(named: name).map { attributeJSON($0, tenant: tenant) }
        }
    }

    @Sendable func listAttributes(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let query = try GraphListQuery(
            request.uri.query, type: "identityUserFlowAttribute", properties: ["id", "displayName", "description", "userFlowAttributeType", "dataType"],
            filterable: ["id", "displayName", "dataType", "userFlowAttributeType"])
        let items = (UserAttribute.allCases.map { Self.attributeJSON(builtIn: $0) } + tenant.userAttributes.map { Self.attributeJSON($0, tenant: tenant) })
            .compactMap { json -> [(String, JSONText)]? in if case .object(let members) = json { members } else { nil } }
        return .json(query.page(items, context: "https://graph.microsoft.com/v1.0/$metadata#identity/userFlowAttributes", origin: hosts.origin(of: request),
                path: "/v1.0/identity/userFlowAttributes"))
    }

    @Sendable func getAttribute(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        guard let attribute = Self.flowAttribute(context.parameters.get("id") ?? "", tenant: tenant), let json = Self.attributeJSON(attribute, tenant: tenant)
        else { throw GraphError.resourceNotFound }
        return Self.entity("identity/userFlowAttributes", json)
    }

    /// `POST {"displayName", "description", "dataType"}`: a custom attribute named by its display name.
    @Sendable func createAttribute(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        for key in body.keys where !["@odata.type", "displayName", "description", "dataType", "userFlowAttributeType"].contains(key) {
            throw GraphError.badRequest("Property '\(TextRules.printable(String(key.prefix(64))))' does not exist on type 'microsoft.graph.identityUserFlowAttribute'.")
        }
        guard case .string(let name)? = body["displayName"] else { throw GraphError.badRequest("displayName is required.") }
        guard case .string(let typeName)? = body["dataType"],
            let type = typeName == "int64" ? .int : CustomAttribute.DataType(rawValue: typeName), typeName != "int"
        else {
            throw GraphError.badRequest(
                "dataType must be one of string, boolean, int64, stringCollection, dateTime (was '\(TextRules.printable(String(describing: body["dataType"]).prefix(40).description))').")
        }
        var description: String?
        if case .string(let text)? = body["description"] { description = text }
        let attribute = CustomAttribute(name: name, type: type, description: description)
        try await administration.addUserAttribute(attribute, tenantID: tenant.id)
        var updated = tenant
        updated.userAttributes.append(attribute)
        return Self.entity("identity/userFlowAttributes", Self.attributeJSON(attribute, tenant: updated), status: .created)
    }

    /// `PATCH {"description"}`: the only property Graph lets change, of a custom attribute.
    @Sendable func updateAttribute(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        guard case .custom(let name)? = Self.flowAttribute(context.parameters.get("id") ?? "", tenant: tenant) else {
            throw Self.flowAttribute(context.parameters.get("id") ?? "", tenant: tenant) == nil
                ? GraphError.resourceNotFound : GraphError.badRequest("Only custom user flow attributes can be updated.")
        }
        let body = try await GraphBody.object(request, context: context)
        guard body.keys.allSatisfy({ ["description", "@odata.type"].contains($0) }) else {
            throw GraphError.badRequest("Only the description of a user flow attribute can be updated.")
        }
        var description: String?
        if case .string(let text)? = body["description"] { description = text }
        try await administration.describeUserAttribute(named: name, description: description, tenantID: tenant.id)
        return Response(status: .noContent)
    }

    @Sendable func deleteAttribute(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        guard let attribute = Self.flowAttribute(context.parameters.get("id") ?? "", tenant: tenant) else { throw GraphError.resourceNotFound }
        guard case .custom(let name) = attribute else { throw GraphError.badRequest("Only custom user flow attributes can be deleted.") }
        try await administration.removeUserAttribute(named: name, tenantID: tenant.id)
        return Response(status: .noContent)
    }

    // MARK: API connectors

    static func connectorID(_ connector: APIConnector, tenant: Tenant) -> String {
        UUID(nameBased: "todo-api-connector:\(tenant.guid):\(connector.name)").uuidString.lowercased()
    }

    static func connectorJSON(_ connector: APIConnector, tenant: Tenant) -> JSONText {
        let authentication: JSONText =
            switch connector.auth {
            case .basic:
                .object([
                    ("@odata.type", .string("#microsoft.graph.basicAuthentication")), ("username", .string(connector.username ?? "")),
                    ("password", hidden),
                ])
            // Graph has no bearer-token configuration; this service's is shown by its base type.
            case .bearer: .object([("@odata.type", .string("#microsoft.graph.apiAuthenticationConfigurationBase"))])
            case .none: .null
            }
        return .object([
            ("id", .string(connectorID(connector, tenant: tenant))), ("displayName", .string(connector.name)), ("targetUrl", .string(connector.url)),
            ("authenticationConfiguration", authentication),
        ])
    }

    private func connector(_ context: GraphRequestContext, tenant: Tenant) throws -> APIConnector {
        let id = (context.parameters.get("id") ?? "").lowercased()
        guard let found = tenant.apiConnectors.first(where: { Self.connectorID($0, tenant: tenant) == id }) else { throw GraphError.resourceNotFound }
        return found
    }

    @Sendable func listConnectors(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return Self.collection("identity/apiConnectors", tenant.apiConnectors.map { Self.connectorJSON($0, tenant: tenant) })
    }

    @Sendable func getConnector(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return Self.entity("identity/apiConnectors", Self.connectorJSON(try connector(context, tenant: tenant), tenant: tenant))
    }

    /// Reads `displayName`, `targetUrl` and a basic `authenticationConfiguration` onto `connector`.
    private static func apply(_ body: [String: JSONValue], to connector: inout APIConnector) throws {
        for (key, value) in body {
            switch (key, value) {
            case ("@odata.type", _): continue
            case ("displayName", .string(let name)):
                guard name == connector.name || connector.name.isEmpty else {
                    throw GraphError.badRequest("A connector is named by its displayName here: make a new one to rename it.")
                }
                connector.name = name
            case ("targetUrl", .string(let url)): connector.url = url
            case ("authenticationConfiguration", .null): connector.auth = .none
            case ("authenticationConfiguration", .object(let configuration)):
                guard case .string(let type)? = configuration["@odata.type"], type.hasSuffix("basicAuthentication"),
                    case .string(let username)? = configuration["username"], case .string(let password)? = configuration["password"]
                else {
                    throw GraphError.badRequest("authenticationConfiguration must be #microsoft.graph.basicAuthentication with username and password.")
                }
                // What a client read back (`******`) is not a new password: the stored one stays.
                (connector.auth, connector.username, connector.password) = (.basic, username, password == "******" ? nil : password)
            default: throw GraphError.badRequest("Invalid value for property '\(TextRules.printable(String(key.prefix(64))))' of apiConnector.")
            }
        }
    }

    @Sendable func createConnector(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var connector = APIConnector(name: "", url: "")
        try Self.apply(try await GraphBody.object(request, context: context), to: &connector)
        guard !connector.name.isEmpty, !connector.url.isEmpty else { throw GraphError.badRequest("displayName and targetUrl are required.") }
        try await administration.saveAPIConnector(connector, tenantID: tenant.id, creating: true)
        return Self.entity("identity/apiConnectors", Self.connectorJSON(connector, tenant: tenant), status: .created)
    }

    @Sendable func updateConnector(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var connector = try connector(context, tenant: tenant)
        // The stored secret is sealed: only a new one given in clear is written.
        connector.password = nil
        connector.token = nil
        try Self.apply(try await GraphBody.object(request, context: context), to: &connector)
        try await administration.saveAPIConnector(connector, tenantID: tenant.id, creating: false)
        return Response(status: .noContent)
    }

    @Sendable func deleteConnector(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        try await administration.removeAPIConnector(named: try connector(context, tenant: tenant).name, tenantID: tenant.id)
        return Response(status: .noContent)
    }
}

extension UserAttribute {
    /// The label Graph's built-in attribute shows.
    var labelForGraph: String {
        switch self {
        case .displayName: "Display Name"
        case .givenName: "Given Name"
        case .surname: "Surname"
        case .city: "City"
        case .country: "Country/Region"
        case .postalCode: "Postal Code"
        case .jobTitle: "Job Title"
        case .streetAddress: "Street Address"
        case .state: "State/Province"
        }
    }
}

extension GraphIdentityResources {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.flowReadRoles))
            .get("identity/userFlowAttributes", use: listAttributes)
            .get("identity/userFlowAttributes/:id", use: getAttribute)
        collection.group().add(middleware: permit.application(anyOf: Self.flowWriteRoles))
            .post("identity/userFlowAttributes", use: createAttribute)
            .patch("identity/userFlowAttributes/:id", use: updateAttribute)
            .delete("identity/userFlowAttributes/:id", use: deleteAttribute)
        collection.group().add(middleware: permit.application(anyOf: Self.connectorReadRoles))
            .get("identity/apiConnectors", use: listConnectors)
            .get("identity/apiConnectors/:id", use: getConnector)
        collection.group().add(middleware: permit.application(anyOf: Self.connectorWriteRoles))
            .post("identity/apiConnectors", use: createConnector)
            .patch("identity/apiConnectors/:id", use: updateConnector)
            .delete("identity/apiConnectors/:id", use: deleteConnector)
        return collection
    }
}
