import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// A B2C user flow's `userAttributeAssignments` (what its sign-up page collects, in order) and
/// `languages` (SPEC §2.14), Graph beta. An assignment's id is its attribute's id. What the pages
/// here cannot do is refused rather than stored and ignored: a required attribute other than the
/// display name, verification of an attribute, a choice list.
struct GraphUserFlowAssignments: Sendable {
    let permit: GraphCallers
    let server: IdentityServer

    static let readRoles = GraphIdentityResources.flowReadRoles
    static let writeRoles = GraphIdentityResources.flowWriteRoles

    private func flow(_ context: GraphRequestContext, tenant: Tenant) async throws -> UserFlow {
        try await GraphB2CUserFlows.flow(context, tenant: tenant, server: server)
    }

    static func assignmentID(_ attribute: FlowAttribute, tenant: Tenant) -> String {
        switch attribute {
        case .builtIn(let builtIn): GraphIdentityResources.graphID(builtIn)
        case .custom(let name): tenant.customAttribute(named: name)?.graphName(extensionsAppID: tenant.extensionsAppID) ?? name
        }
    }

    static func json(_ attribute: FlowAttribute, tenant: Tenant, expand: Bool) -> JSONText {
        let custom: CustomAttribute? = if case .custom(let name) = attribute { tenant.customAttribute(named: name) } else { nil }
        let label: String =
            switch attribute {
            case .builtIn(let builtIn): builtIn.labelForGraph
            case .custom(let name): custom?.label ?? name
            }
        var members: [(String, JSONText)] = [
            ("id", .string(assignmentID(attribute, tenant: tenant))), ("isOptional", .bool(attribute != .displayName)),
            ("requiresVerification", .bool(false)), ("userInputType", .string(custom?.type == .boolean ? "CheckboxSingleSelect" : "TextBox")),
            ("displayName", .string(label)), ("userAttributeValues", .array([])),
        ]
        if expand, let attribute = GraphIdentityResources.attributeJSON(attribute, tenant: tenant) { members.append(("userAttribute", attribute)) }
        return .object(members)
    }

    private static func expands(_ request: Request) -> Bool {
        RequestParameters(query: request.uri.query)["$expand"]?.lowercased().contains("userattribute") == true
    }

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        let expand = Self.expands(request)
        return .json(
            .object([
                ("@odata.context", .string("\(GraphB2CUserFlows.base)('\(flow.name)')/userAttributeAssignments")),
                ("value", .array(flow.signUpAttributes.map { Self.json($0, tenant: tenant, expand: expand) })),
            ]))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        let key = (context.parameters.get("assignment") ?? "").lowercased()
        guard let attribute = flow.signUpAttributes.first(where: { Self.assignmentID($0, tenant: tenant).lowercased() == key }),
            case .object(let members) = Self.json(attribute, tenant: tenant, expand: Self.expands(request))
        else { throw GraphError.resourceNotFound }
        return .json(.object([("@odata.context", .string("\(GraphB2CUserFlows.base)('\(flow.name)')/userAttributeAssignments/$entity"))] + members))
    }

    /// Refuses what the pages cannot do.
    private static func checkServed(_ body: [String: JSONValue], attribute: FlowAttribute) throws {
        if case .bool(true)? = body["requiresVerification"] { throw GraphError.badRequest("Verifying an attribute other than the email is not served here.") }
        if case .bool(false)? = body["isOptional"], attribute != .displayName {
            throw GraphError.badRequest("Sign-up requires only the display name here: other attributes are optional.")
        }
        if case .array(let values)? = body["userAttributeValues"], !values.isEmpty {
            throw GraphError.badRequest("Choice lists (userAttributeValues) are not served here.")
        }
        if case .string(let type)? = body["userInputType"], !["textbox", "checkboxsingleselect"].contains(type.lowercased()) {
            throw GraphError.badRequest("userInputType is TextBox (or CheckboxSingleSelect for a boolean) here.")
        }
    }

    /// `POST {"userAttribute": {"id"}} or {"userAttribute@odata.bind": "…/userFlowAttributes/{id}"}`.
    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var flow = try await flow(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        let known: Set<String> = [
            "@odata.type", "userAttribute", "userAttribute@odata.bind", "isOptional", "requiresVerification", "userInputType", "displayName",
            "userAttributeValues",
        ]
        for key in body.keys where !known.contains(key) {
            throw GraphError.badRequest("Property '\(TextRules.printable(String(key.prefix(64))))' does not exist on type 'microsoft.graph.identityUserFlowAttributeAssignment'.")
        }
        var id: String?
        if case .object(let attribute)? = body["userAttribute"], case .string(let text)? = attribute["id"] { id = text }
        if case .string(let link)? = body["userAttribute@odata.bind"] { id = link.split(separator: "/").last.map(String.init) }
        guard let id, let attribute = GraphIdentityResources.flowAttribute(id.replacingOccurrences(of: "'", with: ""), tenant: tenant) else {
            throw GraphError.badRequest("userAttribute must name a user flow attribute of this tenant by id.")
        }
        try Self.checkServed(body, attribute: attribute)
        guard !flow.signUpAttributes.contains(attribute) else {
            throw GraphError(status: .conflict, code: "Request_MultipleObjectsWithSameKeyValue", message: "The attribute is already assigned to the user flow.")
        }
        flow.signUpAttributes.append(attribute)
        try await administration.saveUserFlow(flow, creating: false)
        var response = Response.json(Self.json(attribute, tenant: tenant, expand: false), status: .created)
        response.headers[.location] = "https://graph.microsoft.com/beta/identity/b2cUserFlows/\(flow.name)/userAttributeAssignments/\(Self.assignmentID(attribute, tenant: tenant))"
        return response
    }

    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        let key = (context.parameters.get("assignment") ?? "").lowercased()
        guard let attribute = flow.signUpAttributes.first(where: { Self.assignmentID($0, tenant: tenant).lowercased() == key }) else {
            throw GraphError.resourceNotFound
        }
        let body = try await GraphBody.object(request, context: context)
        try Self.checkServed(body, attribute: attribute)
        if body["displayName"] != nil { throw GraphError.badRequest("An assignment shows its attribute's own label here.") }
        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var flow = try await flow(context, tenant: tenant)
        let key = (context.parameters.get("assignment") ?? "").lowercased()
        guard flow.signUpAttributes.contains(where: { Self.assignmentID($0, tenant: tenant).lowercased() == key }) else {
            throw GraphError.resourceNotFound
        }
        flow.signUpAttributes.removeAll { Self.assignmentID($0, tenant: tenant).lowercased() == key }
        try await administration.saveUserFlow(flow, creating: false)
        return Response(status: .noContent)
    }

    @Sendable func getOrder(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        return .json(
            .object([
                ("@odata.context", .string("https://graph.microsoft.com/beta/$metadata#microsoft.graph.assignmentOrder")),
                ("order", .array(flow.signUpAttributes.map { .string(Self.assignmentID($0, tenant: tenant)) })),
            ]))
    }

    /// `POST …/setOrder {"newAssignmentOrder": {"order": [ids]}}`: the same assignments, reordered.
    @Sendable func setOrder(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var flow = try await flow(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        guard case .object(let order)? = body["newAssignmentOrder"], case .array(let ids)? = order["order"] else {
            throw GraphError.badRequest("The body is {\"newAssignmentOrder\": {\"order\": [ids]}}.")
        }
        let reordered = try ids.map { value -> FlowAttribute in
            guard case .string(let id) = value,
                let attribute = flow.signUpAttributes.first(where: { Self.assignmentID($0, tenant: tenant).lowercased() == id.lowercased() })
            else { throw GraphError.badRequest("order must name each of the flow's assignments once.") }
            return attribute
        }
        guard reordered.count == flow.signUpAttributes.count, Set(reordered) == Set(flow.signUpAttributes) else {
            throw GraphError.badRequest("order must name each of the flow's assignments once.")
        }
        flow.signUpAttributes = reordered
        try await administration.saveUserFlow(flow, creating: false)
        return Response(status: .noContent)
    }

    // MARK: Languages (the tenant's, shown under each flow)

    static func languageJSON(_ tag: String) -> JSONText {
        let name = Locale(identifier: "en").localizedString(forIdentifier: tag) ?? tag
        return .object([("id", .string(tag)), ("isEnabled", .bool(true)), ("displayName", .string(name))])
    }

    @Sendable func languages(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        return .json(
            .object([
                ("@odata.context", .string("\(GraphB2CUserFlows.base)('\(flow.name)')/languages")),
                ("value", .array(tenant.languages.map(Self.languageJSON))),
            ]))
    }
}

extension GraphUserFlowAssignments {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("identity/b2cUserFlows/:id/userAttributeAssignments", use: list)
            .get("identity/b2cUserFlows/:id/userAttributeAssignments/getOrder", use: getOrder)
            .get("identity/b2cUserFlows/:id/userAttributeAssignments/getOrder()", use: getOrder)
            .get("identity/b2cUserFlows/:id/userAttributeAssignments/:assignment", use: get)
            .get("identity/b2cUserFlows/:id/languages", use: languages)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("identity/b2cUserFlows/:id/userAttributeAssignments", use: create)
            .post("identity/b2cUserFlows/:id/userAttributeAssignments/setOrder", use: setOrder)
            .patch("identity/b2cUserFlows/:id/userAttributeAssignments/:assignment", use: update)
            .delete("identity/b2cUserFlows/:id/userAttributeAssignments/:assignment", use: delete)
        return collection
    }
}
