import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph beta's `/identity/b2cUserFlows` (SPEC §2.14): the tenant's user flows (not its custom
/// policies), with their identity providers, user attribute assignments (what sign-up
/// collects), languages and API connector configuration. The id gets B2C's `B2C_1_` prefix as
/// Graph adds it. One property is this service's own: `tokenLifetimes`, B2C's per-flow token
/// lifetime settings (``TenantDeclaration/TokenLifetimesPart``), which Graph does not expose.
struct GraphB2CUserFlows: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let simulatedFacebook: Bool

    static let readRoles = GraphIdentityResources.flowReadRoles
    static let writeRoles = GraphIdentityResources.flowWriteRoles
    static let base = "https://graph.microsoft.com/beta/$metadata#identity/b2cUserFlows"

    static let types: [(graph: String, type: UserFlowType)] = [
        ("signUpOrSignIn", .signUpOrSignIn), ("signUp", .signUp), ("signIn", .signIn), ("passwordReset", .passwordReset),
        ("profileUpdate", .profileEdit), ("resourceOwner", .ropc),
    ]

    static func json(_ flow: UserFlow, tenant: Tenant) -> [(String, JSONText)] {
        let lifetimes = TenantDeclaration.TokenLifetimesPart(flow.lifetimes)
        return [
            ("id", .string(flow.name)), ("userFlowType", .string(types.first { $0.type == flow.type }?.graph ?? flow.type.rawValue)),
            ("userFlowTypeVersion", .int(3)), ("isLanguageCustomizationEnabled", .bool(!tenant.languages.isEmpty)),
            ("defaultLanguageTag", tenant.languages.first.map(JSONText.string) ?? .null),
            (
                "tokenLifetimes",
                .object([
                    ("accessTokenMinutes", .int(Int64(lifetimes.accessTokenMinutes ?? 0))), ("idTokenMinutes", .int(Int64(lifetimes.idTokenMinutes ?? 0))),
                    ("refreshTokenDays", .int(Int64(lifetimes.refreshTokenDays ?? 0))),
                    ("refreshTokenWindow", .string(lifetimes.refreshTokenWindow ?? "unbounded")),
                ])
            ),
        ]
    }

    private func flow(_ context: GraphRequestContext, tenant: Tenant) async throws -> UserFlow {
        try await Self.flow(context, tenant: tenant, server: server)
    }

    /// The user flow `{id}` names (never a custom policy).
    static func flow(_ context: GraphRequestContext, tenant: Tenant, server: IdentityServer) async throws -> UserFlow {
        let name = context.parameters.get("id")?.removingPercentEncoding ?? ""
        guard !name.lowercased().hasPrefix("b2c_1a_"), let flow = try await server.administration.userFlows(tenantID: tenant.id)
            .first(where: { $0.name.lowercased() == name.lowercased() })
        else { throw GraphError.resourceNotFound }
        return flow
    }

    // MARK: Flows

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flows = try await server.administration.userFlows(tenantID: tenant.id).filter { $0.customPolicy == nil }
        return .json(.object([("@odata.context", .string(Self.base)), ("value", .array(flows.map { .object(Self.json($0, tenant: tenant)) }))]))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        return .json(.object([("@odata.context", .string(Self.base + "/$entity"))] + Self.json(flow, tenant: tenant)))
    }

    /// `POST {"id", "userFlowType", "userFlowTypeVersion", "identityProviders"?: [{id}],
    /// "apiConnectorConfiguration"?: {step: {"@odata.id"}}, "tokenLifetimes"?}`.
    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        let known: Set<String> = [
            "@odata.type", "id", "userFlowType", "userFlowTypeVersion", "isLanguageCustomizationEnabled", "defaultLanguageTag", "identityProviders",
            "apiConnectorConfiguration", "tokenLifetimes",
        ]
        for key in body.keys where !known.contains(key) {
            throw GraphError.badRequest("Property '\(TextRules.printable(String(key.prefix(64))))' does not exist on type 'microsoft.graph.b2cIdentityUserFlow'.")
        }
        guard case .string(var name)? = body["id"], case .string(let typeName)? = body["userFlowType"],
            let type = Self.types.first(where: { $0.graph.lowercased() == typeName.lowercased() })?.type
        else {
            throw GraphError.badRequest(
                "id and userFlowType (\(Self.types.map(\.graph).joined(separator: ", "))) are required.")
        }
        if !name.lowercased().hasPrefix("b2c_1_") { name = "B2C_1_" + name }
        var flow = UserFlow(
            tenantID: tenant.id, name: name, type: type, identityProviders: [.local], signUpAttributes: [.displayName],
            applicationClaims: UserFlow.defaultClaims, lifetimes: .default, emailVerification: true)
        if case .array(let providers)? = body["identityProviders"] {
            for provider in providers {
                guard case .object(let fields) = provider, case .string(let id)? = fields["id"],
                    let kind = GraphIdentityProviders.kind(id, tenant: tenant, simulatedFacebook: simulatedFacebook)
                else { throw GraphError.badRequest("identityProviders must name this tenant's identity providers by id.") }
                if !flow.identityProviders.contains(kind) { flow.identityProviders.append(kind) }
            }
        }
        if case .object(let steps)? = body["apiConnectorConfiguration"] {
            for (step, reference) in steps { try Self.setConnector(step, reference, of: &flow, tenant: tenant) }
        }
        try Self.applyLifetimes(body["tokenLifetimes"], to: &flow)
        try Self.checkLanguages(body, tenant: tenant)
        try await administration.saveUserFlow(flow, creating: true)
        var response = Response.json(.object([("@odata.context", .string(Self.base + "/$entity"))] + Self.json(flow, tenant: tenant)), status: .created)
        response.headers[.location] = "https://graph.microsoft.com/beta/identity/b2cUserFlows/\(flow.name)"
        return response
    }

    /// `PATCH`: `tokenLifetimes`; the language properties only as the tenant has them (its
    /// languages are set with `PUT …/languages/{tag}`).
    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var flow = try await flow(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        for key in body.keys where !["@odata.type", "isLanguageCustomizationEnabled", "defaultLanguageTag", "tokenLifetimes"].contains(key) {
            throw GraphError.badRequest("Property '\(TextRules.printable(String(key.prefix(64))))' cannot be changed on a user flow.")
        }
        try Self.checkLanguages(body, tenant: tenant)
        guard body["tokenLifetimes"] != nil else { return Response(status: .noContent) }
        try Self.applyLifetimes(body["tokenLifetimes"], to: &flow)
        try await administration.saveUserFlow(flow, creating: false)
        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let flow = try await flow(context, tenant: tenant)
        _ = try await administration.removeUserFlow(named: flow.name, tenantID: tenant.id)
        return Response(status: .noContent)
    }

    private static func applyLifetimes(_ value: JSONValue?, to flow: inout UserFlow) throws {
        guard let value, value != .null else { return }
        guard let data = try? JSONEncoder().encode(value),
            let part = try? JSONDecoder().decode(TenantDeclaration.TokenLifetimesPart.self, from: data)
        else { throw GraphError.badRequest("tokenLifetimes takes accessTokenMinutes, idTokenMinutes, refreshTokenDays, refreshTokenWindow.") }
        switch part.lifetimes(from: flow.lifetimes) {
        case .success(let lifetimes): flow.lifetimes = lifetimes
        case .failure(.invalid(let reason)): throw GraphError.badRequest(reason)
        }
    }

    /// The language properties, which are the tenant's here: accepted only as they are.
    private static func checkLanguages(_ body: [String: JSONValue], tenant: Tenant) throws {
        if let value = body["isLanguageCustomizationEnabled"], value != .bool(!tenant.languages.isEmpty) {
            throw GraphError.badRequest("Languages are the tenant's here: add one with PUT …/languages/{tag}.")
        }
        if let value = body["defaultLanguageTag"], value != (tenant.languages.first.map(JSONValue.string) ?? .null) {
            throw GraphError.badRequest("The default language is the tenant's first language here.")
        }
    }

    // MARK: API connector configuration

    static var steps: [(graph: String, path: WritableKeyPath<FlowConnectors, String?>)] { [
        ("postFederationSignup", \.afterFederatingIdentityProvider), ("postAttributeCollection", \.beforeCreatingUser),
        ("preTokenIssuance", \.beforeSendingToken),
    ] }

    /// Sets (a `{"@odata.id": …/apiConnectors/{id}}` reference) or clears (`{}`) one step.
    static func setConnector(_ step: String, _ reference: JSONValue, of flow: inout UserFlow, tenant: Tenant) throws {
        guard let path = steps.first(where: { $0.graph.lowercased() == step.lowercased() })?.path else {
            throw GraphError.badRequest("The steps are \(steps.map(\.graph).joined(separator: ", ")).")
        }
        guard case .object(let fields) = reference else { throw GraphError.badRequest("A step takes {\"@odata.id\": …} or {}.") }
        guard case .string(let link)? = fields["@odata.id"] else {
            flow.connectors[keyPath: path] = nil
            return
        }
        let id = link.split(separator: "/").last.map(String.init)?.lowercased() ?? ""
        guard let connector = tenant.apiConnectors.first(where: { GraphIdentityResources.connectorID($0, tenant: tenant) == id }) else {
            throw GraphError.badRequest("The @odata.id must name one of this tenant's API connectors.")
        }
        flow.connectors[keyPath: path] = connector.name
    }

    @Sendable func connectorConfiguration(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        var members: [(String, JSONText)] = [("@odata.context", .string("\(Self.base)('\(flow.name)')/apiConnectorConfiguration"))]
        for step in Self.steps {
            let connector = flow.connectors[keyPath: step.path].flatMap { name in tenant.apiConnectors.first { $0.name == name } }
            members.append((step.graph, connector.map { GraphIdentityResources.connectorJSON($0, tenant: tenant) } ?? .null))
        }
        return .json(.object(members))
    }

    /// `PUT …/apiConnectorConfiguration/{step}/$ref`.
    @Sendable func putConnector(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var flow = try await flow(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        try Self.setConnector(context.parameters.get("step") ?? "", .object(body), of: &flow, tenant: tenant)
        try await administration.saveUserFlow(flow, creating: false)
        return Response(status: .noContent)
    }

    // MARK: Identity providers of a flow

    @Sendable func providers(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let flow = try await flow(context, tenant: tenant)
        var value: [JSONText] = []
        if simulatedFacebook, flow.identityProviders.contains(.facebook) { value.append(GraphIdentityProviders.facebookJSON) }
        value += tenant.identityProviders.filter { flow.identityProviders.contains($0.kind) }.map(GraphIdentityProviders.json)
        return .json(
            .object([
                ("@odata.context", .string("https://graph.microsoft.com/beta/$metadata#Collection(microsoft.graph.identityProviderBase)")),
                ("value", .array(value)),
            ]))
    }

    /// `POST …/identityProviders/$ref` or `PATCH|POST …/userFlowIdentityProviders/$ref` `{"@odata.id"}`.
    @Sendable func addProvider(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var flow = try await flow(context, tenant: tenant)
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let link)? = body["@odata.id"], let id = link.split(separator: "/").last.map(String.init),
            let kind = GraphIdentityProviders.kind(id, tenant: tenant, simulatedFacebook: simulatedFacebook)
        else { throw GraphError.badRequest("The @odata.id must name one of this tenant's identity providers (…/identityProviders/{id}).") }
        guard !flow.identityProviders.contains(kind) else {
            throw GraphError.badRequest("One or more added object references already exist for the following modified properties: 'identityProviders'.")
        }
        flow.identityProviders.append(kind)
        try await administration.saveUserFlow(flow, creating: false)
        return Response(status: .noContent)
    }

    @Sendable func removeProvider(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var flow = try await flow(context, tenant: tenant)
        guard let kind = GraphIdentityProviders.kind(context.parameters.get("provider") ?? "", tenant: tenant, simulatedFacebook: simulatedFacebook),
            flow.identityProviders.contains(kind)
        else { throw GraphError.resourceNotFound }
        flow.identityProviders.removeAll { $0 == kind }
        try await administration.saveUserFlow(flow, creating: false)
        return Response(status: .noContent)
    }
}

extension GraphB2CUserFlows {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        let reads = collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("identity/b2cUserFlows", use: list)
            .get("identity/b2cUserFlows/:id", use: get)
            .get("identity/b2cUserFlows/:id/apiConnectorConfiguration", use: connectorConfiguration)
        let writes = collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("identity/b2cUserFlows", use: create)
            .patch("identity/b2cUserFlows/:id", use: update)
            .delete("identity/b2cUserFlows/:id", use: delete)
            .put("identity/b2cUserFlows/:id/apiConnectorConfiguration/:step/$ref", use: putConnector)
        for list in ["identityProviders", "userFlowIdentityProviders"] {
            reads.get(RouterPath("identity/b2cUserFlows/:id/\(list)"), use: providers)
            writes.post(RouterPath("identity/b2cUserFlows/:id/\(list)/$ref"), use: addProvider)
                .patch(RouterPath("identity/b2cUserFlows/:id/\(list)/$ref"), use: addProvider)
                .delete(RouterPath("identity/b2cUserFlows/:id/\(list)/:provider/$ref"), use: removeProvider)
        }
        return collection
    }
}
