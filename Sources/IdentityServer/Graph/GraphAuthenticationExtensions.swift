import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's `/identity/customAuthenticationExtensions` (SPEC §2.15), over the tenant's declared
/// extensions: the YAML's store, so an export shows what Graph changed. Each is one of External
/// ID's four derived types, named by its `displayName` (the name a user flow binds it by); its
/// endpoint is an `httpRequestEndpoint`, its token an `azureAdTokenAuthentication` for its
/// `resourceId`. Binding stays with the user flows (the YAML).
struct GraphAuthenticationExtensions: Sendable {
    let permit: GraphCallers
    let server: IdentityServer

    static let readRoles = ["CustomAuthenticationExtension.Read.All", "CustomAuthenticationExtension.ReadWrite.All"]
    static let writeRoles = ["CustomAuthenticationExtension.ReadWrite.All"]
    static let context = "https://graph.microsoft.com/v1.0/$metadata#identity/customAuthenticationExtensions"

    /// Graph's derived type for each event.
    static func odataType(_ event: AuthenticationExtension.Event) -> String {
        switch event {
        case .onTokenIssuanceStart: "#microsoft.graph.onTokenIssuanceStartCustomExtension"
        case .onAttributeCollectionStart: "#microsoft.graph.onAttributeCollectionStartCustomExtension"
        case .onAttributeCollectionSubmit: "#microsoft.graph.onAttributeCollectionSubmitCustomExtension"
        case .onOtpSend: "#microsoft.graph.onOtpSendCustomExtension"
        }
    }

    /// The event a derived type names (compared without case: Microsoft's own samples write
    /// `#microsoft.graph.OnOtpSendCustomExtension`).
    static func event(odataType: String) -> AuthenticationExtension.Event? {
        AuthenticationExtension.Event.allCases.first { Self.odataType($0).lowercased() == odataType.lowercased() }
    }

    static func json(_ ext: AuthenticationExtension, tenant: Tenant) -> JSONText {
        var members: [(String, JSONText)] = [
            ("@odata.type", .string(odataType(ext.event))), ("id", .string(ext.identifier(tenantID: tenant.id, "extension"))),
            ("displayName", .string(ext.name)), ("description", ext.description.map(JSONText.string) ?? .null),
            ("endpointConfiguration", .object([("@odata.type", .string("#microsoft.graph.httpRequestEndpoint")), ("targetUrl", .string(ext.url))])),
            (
                "authenticationConfiguration",
                .object([("@odata.type", .string("#microsoft.graph.azureAdTokenAuthentication")), ("resourceId", .string(ext.resourceId))])
            ),
            (
                "clientConfiguration",
                .object([
                    ("timeoutInMilliseconds", .int(Int64((ext.timeoutSeconds ?? AuthenticationExtension.defaultTimeoutSeconds) * 1000))),
                    ("maximumRetries", .int(0)),
                ])
            ),
        ]
        if ext.event == .onTokenIssuanceStart {
            members.append(
                ("claimsForTokenConfiguration", .array((ext.claims ?? []).map { .object([("claimIdInApiResponse", .string($0))]) })))
        }
        return .object(members)
    }

    private static func entity(_ item: JSONText, status: HTTPResponse.Status = .ok) -> Response {
        guard case .object(let members) = item else { return .json(item, status: status) }
        return .json(.object([("@odata.context", .string(context + "/$entity"))] + members), status: status)
    }

    private func extensionNamed(_ context: GraphRequestContext, tenant: Tenant) throws -> AuthenticationExtension {
        let id = (context.parameters.get("id") ?? "").lowercased()
        guard let found = tenant.authenticationExtensions.first(where: { $0.identifier(tenantID: tenant.id, "extension") == id }) else {
            throw GraphError.resourceNotFound
        }
        return found
    }

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return .json(.object([("@odata.context", .string(Self.context)), ("value", .array(tenant.authenticationExtensions.map { Self.json($0, tenant: tenant) }))]))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return Self.entity(Self.json(try extensionNamed(context, tenant: tenant), tenant: tenant))
    }

    /// Reads Graph's members onto `ext`; anything this service would not keep is refused, so
    /// nothing given is silently lost.
    static func apply(_ body: [String: JSONValue], to ext: inout AuthenticationExtension) throws {
        func invalid(_ key: String) -> GraphError {
            GraphError.badRequest("Invalid value for property '\(TextRules.printable(String(key.prefix(64))))' of customAuthenticationExtension.")
        }
        for (key, value) in body {
            switch (key, value) {
            case ("@odata.type", .string(let type)):
                guard Self.event(odataType: type) == ext.event else { throw invalid(key) }
            case ("displayName", .string(let name)):
                guard name == ext.name || ext.name.isEmpty else {
                    throw GraphError.badRequest("A custom authentication extension is named by its displayName here: make a new one to rename it.")
                }
                ext.name = name
            case ("description", .null): ext.description = nil
            case ("description", .string(let text)): ext.description = text.isEmpty ? nil : text
            case ("endpointConfiguration", .object(let endpoint)):
                guard case .string(let url)? = endpoint["targetUrl"], Self.only(endpoint, ["targetUrl"], type: "httpRequestEndpoint") else {
                    throw invalid(key)
                }
                ext.url = url
            case ("authenticationConfiguration", .object(let authentication)):
                guard case .string(let resource)? = authentication["resourceId"],
                    Self.only(authentication, ["resourceId"], type: "azureAdTokenAuthentication")
                else { throw invalid(key) }
                ext.resourceId = resource
            case ("clientConfiguration", .object(let client)):
                guard Self.only(client, ["timeoutInMilliseconds", "maximumRetries"], type: "customExtensionClientConfiguration") else { throw invalid(key) }
                for (member, setting) in client {
                    switch (member, setting) {
                    case ("@odata.type", _): continue
                    // One call per event: a sign-in waits for one answer only.
                    case ("maximumRetries", .number(0)), ("maximumRetries", .null): continue
                    case ("timeoutInMilliseconds", .number(let milliseconds)) where milliseconds.truncatingRemainder(dividingBy: 1000) == 0:
                        ext.timeoutSeconds = Int(exactly: milliseconds / 1000) ?? 0
                    case ("timeoutInMilliseconds", .null): ext.timeoutSeconds = nil
                    default:
                        throw GraphError.badRequest(
                            "clientConfiguration takes timeoutInMilliseconds in whole seconds (1000 to 10000) and maximumRetries 0.")
                    }
                }
            case ("claimsForTokenConfiguration", .array(let claims)) where ext.event == .onTokenIssuanceStart:
                ext.claims = try claims.map { item in
                    guard case .object(let claim) = item, case .string(let name)? = claim["claimIdInApiResponse"],
                        Self.only(claim, ["claimIdInApiResponse"], type: "onTokenIssuanceStartReturnClaim")
                    else { throw invalid(key) }
                    return name
                }
            default: throw invalid(key)
            }
        }
    }

    /// Whether `object` holds only `members` and, if it says, the `@odata.type` `type`.
    private static func only(_ object: [String: JSONValue], _ members: Set<String>, type: String) -> Bool {
        for (key, value) in object where !members.contains(key) {
            guard key == "@odata.type", case .string(let given) = value, given.lowercased() == "#microsoft.graph.\(type)".lowercased() else {
                return false
            }
        }
        return true
    }

    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let type)? = body["@odata.type"], let event = Self.event(odataType: type) else {
            throw GraphError.badRequest(
                "@odata.type must be one of \(AuthenticationExtension.Event.allCases.map { Self.odataType($0) }.joined(separator: ", ")).")
        }
        var ext = AuthenticationExtension(name: "", event: event, url: "", resourceId: "")
        try Self.apply(body, to: &ext)
        guard !ext.name.isEmpty, !ext.url.isEmpty, !ext.resourceId.isEmpty else {
            throw GraphError.badRequest("displayName, endpointConfiguration.targetUrl and authenticationConfiguration.resourceId are required.")
        }
        try await administration.saveAuthenticationExtension(ext, tenantID: tenant.id, creating: true)
        return Self.entity(Self.json(ext, tenant: tenant), status: .created)
    }

    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        var ext = try extensionNamed(context, tenant: tenant)
        try Self.apply(try await GraphBody.object(request, context: context), to: &ext)
        try await administration.saveAuthenticationExtension(ext, tenantID: tenant.id, creating: false)
        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        try await administration.removeAuthenticationExtension(named: try extensionNamed(context, tenant: tenant).name, tenantID: tenant.id)
        return Response(status: .noContent)
    }
}

extension GraphAuthenticationExtensions {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("identity/customAuthenticationExtensions", use: list)
            .get("identity/customAuthenticationExtensions/:id", use: get)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("identity/customAuthenticationExtensions", use: create)
            .patch("identity/customAuthenticationExtensions/:id", use: update)
            .delete("identity/customAuthenticationExtensions/:id", use: delete)
        return collection
    }
}
