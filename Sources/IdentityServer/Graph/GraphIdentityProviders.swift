import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Graph's `/v1.0/identity/identityProviders` (SPEC §2.14): the tenant's upstream OpenID Connect
/// providers as `openIdConnectIdentityProvider`s (id `OIDC-V1-{name}`, `domainHint` the name flows
/// and `domain_hint` use), and the simulated Facebook as the social provider `Facebook-OAUTH`
/// where the server offers it. Only OpenID Connect providers can be made: the others Graph
/// knows federate with services this machine cannot reach.
struct GraphIdentityProviders: Sendable {
    let permit: GraphCallers
    let server: IdentityServer
    let simulatedFacebook: Bool

    static let readRoles = GraphIdentityResources.providerReadRoles
    static let writeRoles = GraphIdentityResources.providerWriteRoles
    static let facebookID = "Facebook-OAUTH"

    static func id(_ provider: UpstreamProvider) -> String { "OIDC-V1-\(provider.name)" }

    static func json(_ provider: UpstreamProvider) -> JSONText {
        let mapping = provider.claimsMapping
        func text(_ value: String?) -> JSONText { value.map(JSONText.string) ?? .null }
        return .object([
            ("@odata.type", .string("#microsoft.graph.openIdConnectIdentityProvider")), ("id", .string(id(provider))),
            ("displayName", .string(provider.label)), ("clientId", .string(provider.clientId)),
            ("clientSecret", provider.clientSecret == nil ? .null : GraphIdentityResources.hidden),
            (
                "claimsMapping",
                .object([
                    ("userId", text(mapping?.userId ?? "sub")), ("givenName", text(mapping?.givenName)), ("surname", text(mapping?.surname)),
                    ("email", text(mapping?.email)), ("displayName", text(mapping?.displayName)),
                ])
            ),
            ("domainHint", .string(provider.name)), ("metadataUrl", .string(provider.metadataUrl)), ("responseMode", .string("query")),
            ("responseType", .string("code")), ("scope", .string(provider.requestedScope)),
        ])
    }

    static let facebookJSON = JSONText.object([
        ("@odata.type", .string("#microsoft.graph.socialIdentityProvider")), ("id", .string(facebookID)), ("displayName", .string("Facebook")),
        ("identityProviderType", .string("Facebook")), ("clientId", .string("simulated")), ("clientSecret", GraphIdentityResources.hidden),
    ])

    /// The provider a Graph id names, as a flow lists it.
    static func kind(_ id: String, tenant: Tenant, simulatedFacebook: Bool) -> IdentityProviderKind? {
        if simulatedFacebook, id.lowercased() == facebookID.lowercased() { return .facebook }
        return tenant.identityProviders.first { Self.id($0).lowercased() == id.lowercased() }?.kind
    }

    func all(_ tenant: Tenant) -> [JSONText] {
        (simulatedFacebook ? [Self.facebookJSON] : []) + tenant.identityProviders.filter { $0.oauth2 == nil }.map(Self.json)
    }

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return .json(
            .object([
                ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#identity/identityProviders")), ("value", .array(all(tenant))),
            ]))
    }

    @Sendable func availableTypes(_ request: Request, context: GraphRequestContext) async throws -> Response {
        return .json(
            .object([
                ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#Collection(Edm.String)")),
                ("value", .array((simulatedFacebook ? ["OpenIdConnect", "Facebook"] : ["OpenIdConnect"]).map(JSONText.string))),
            ]))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let id = (context.parameters.get("id") ?? "").lowercased()
        guard let json = all(tenant).first(where: { GraphServicePrincipals.member("id", of: $0)?.lowercased() == id }) else {
            throw GraphError.resourceNotFound
        }
        return .json(json)
    }

    /// Reads an `openIdConnectIdentityProvider` body onto `provider`.
    private static func apply(_ body: [String: JSONValue], to provider: inout UpstreamProvider) throws {
        for (key, value) in body {
            switch (key, value) {
            case ("@odata.type", .string(let type)):
                guard type.hasSuffix("openIdConnectIdentityProvider") else {
                    throw GraphError.badRequest("Only openIdConnectIdentityProvider can be made here (\(TextRules.printable(type)) federates beyond this machine).")
                }
            case ("displayName", .string(let name)): provider.displayName = name
            case ("clientId", .string(let id)): provider.clientId = id
            // What a client read back (`******`) is not a new secret: the stored one stays.
            case ("clientSecret", .string(let secret)): provider.clientSecret = secret == "******" ? nil : secret
            case ("metadataUrl", .string(let url)): provider.metadataUrl = url
            case ("scope", .string(let scope)): provider.scope = scope
            case ("domainHint", .string(let hint)):
                guard provider.name.isEmpty || provider.name == hint else {
                    throw GraphError.badRequest("A provider is named by its domainHint here: make a new one to rename it.")
                }
                provider.name = hint
            case ("responseType", .string(let type)):
                guard type == "code" else { throw GraphError.badRequest("responseType must be code (the code flow with PKCE).") }
            case ("responseMode", .string(let mode)):
                guard ["query", "form_post"].contains(mode) else { throw GraphError.badRequest("responseMode is query or form_post.") }
            case ("claimsMapping", .object(let mapping)):
                func text(_ name: String) -> String? { if case .string(let value)? = mapping[name] { value } else { nil } }
                provider.claimsMapping = .init(
                    userId: text("userId"), displayName: text("displayName"), givenName: text("givenName"), surname: text("surname"),
                    email: text("email"))
            default: throw GraphError.badRequest("Invalid value for property '\(TextRules.printable(String(key.prefix(64))))' of identityProvider.")
            }
        }
    }

    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        guard case .string? = body["@odata.type"] else {
            throw GraphError.badRequest("@odata.type is required (#microsoft.graph.openIdConnectIdentityProvider).")
        }
        var provider = UpstreamProvider(name: "", metadataUrl: "", clientId: "")
        try Self.apply(body, to: &provider)
        if provider.name.isEmpty {
            // Named after its display name, as a domain hint can be.
            provider.name = String((provider.displayName ?? "").filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }.prefix(64))
        }
        try await administration.saveIdentityProvider(provider, tenantID: tenant.id, creating: true)
        guard case .object(var members) = Self.json(provider) else { throw GraphError.resourceNotFound }
        members.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#identity/identityProviders/$entity")), at: 0)
        return .json(.object(members), status: .created)
    }

    @Sendable func update(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let id = (context.parameters.get("id") ?? "").lowercased()
        guard var provider = tenant.identityProviders.first(where: { Self.id($0).lowercased() == id }) else { throw GraphError.resourceNotFound }
        provider.clientSecret = nil
        try Self.apply(try await GraphBody.object(request, context: context), to: &provider)
        try await administration.saveIdentityProvider(provider, tenantID: tenant.id, creating: false)
        return Response(status: .noContent)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let id = (context.parameters.get("id") ?? "").lowercased()
        guard let provider = tenant.identityProviders.first(where: { Self.id($0).lowercased() == id }) else { throw GraphError.resourceNotFound }
        try await administration.removeIdentityProvider(named: provider.name, tenantID: tenant.id)
        return Response(status: .noContent)
    }
}

extension GraphIdentityProviders {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("identity/identityProviders", use: list)
            .get("identity/identityProviders/availableProviderTypes", use: availableTypes)
            .get("identity/identityProviders/:id", use: get)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("identity/identityProviders", use: create)
            .patch("identity/identityProviders/:id", use: update)
            .delete("identity/identityProviders/:id", use: delete)
        return collection
    }
}
