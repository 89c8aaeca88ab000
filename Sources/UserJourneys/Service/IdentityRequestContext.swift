import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import Logging
import ServerSupport
import TrustFramework

/// What every identity-service handler may ask of its request context.
package protocol IdentityContext: RequestContext {
    /// The id every B2C error description and log line carries (SPEC §2.6).
    var correlationID: String { get }
    /// Where the request came from, for per-source limits: the peer's IP address ("unknown"
    /// without a socket, as in router tests).
    var clientAddress: String { get }
    /// The tenant whose look an error page takes, once the request's tenant is known.
    var brandingTenant: Tenant? { get }
}

/// The request context of the identity service: Hummingbird's core plus the correlation id
/// that every B2C error description and log line carries (SPEC §2.6).
public struct IdentityRequestContext: RequestContext, IdentityContext, IdentifiedRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var correlationID: String
    /// The correlation id under its generic name (``RequestLogMiddleware``); a caller's GUID is
    /// kept in lower case, as B2C writes it.
    public var requestID: String {
        get { correlationID }
        set { correlationID = newValue.lowercased() }
    }
    public var clientAddress: String
    /// Set by ``PolicyResolver`` for the routes under a tenant; ``PolicyRequestContext`` takes it.
    var resolvedPolicy: ResolvedPolicy?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        correlationID = RequestIDs.next()
        clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// A request made inside the process, with no socket: the Task API fetching its issuer's
    /// discovery document and keys (``InProcessMetadata``), which must not queue behind the
    /// per-address connection cap that a flood from the same address fills (issue 51, F8).
    public init(inProcess logger: Logger) {
        coreContext = .init(source: InProcessSource(logger: logger))
        correlationID = RequestIDs.next()
        clientAddress = "in-process"
    }

    private struct InProcessSource: RequestContextSource {
        let logger: Logger
    }

    /// Forms and JSON bodies are small; anything bigger is refused with 413.
    public var maxUploadSize: Int { 64 * 1024 }

    package var brandingTenant: Tenant? { nil }
}

/// The tenant and user flow a protocol URL names.
struct ResolvedPolicy: Sendable {
    let tenant: Tenant
    let flow: UserFlow
    let route: PolicyRoute
}

/// The context of every route under `/{tenant}`: the identity context plus the resolved tenant,
/// flow and URL shape, so a controller never looks them up itself.
package struct PolicyRequestContext: ChildRequestContext, IdentityContext {
    package var coreContext: CoreRequestContextStorage
    package let correlationID: String
    package let clientAddress: String
    package let tenant: Tenant
    package let flow: UserFlow
    package let route: PolicyRoute
    /// The protocol the request speaks, from its URL's shape: B2C's with a policy, the
    /// Microsoft identity platform's without.
    package let dialect: any ProtocolDialect
    /// Set by ``TransactionLoader`` for the hosted pages; ``PageRequestContext`` takes it.
    var transaction: LoadedTransaction?

    package init(context: IdentityRequestContext) throws {
        // The group's PolicyResolver always runs first; reaching here without it is a wiring bug.
        guard let resolved = context.resolvedPolicy else { throw HTTPError(.internalServerError) }
        coreContext = context.coreContext
        correlationID = context.correlationID
        clientAddress = context.clientAddress
        tenant = resolved.tenant
        flow = resolved.flow
        route = resolved.route
        dialect = resolved.route.face.dialect
    }

    package var maxUploadSize: Int { 64 * 1024 }
    package var brandingTenant: Tenant? { tenant }
}

/// Resolves the `{tenant}` and policy of a protocol URL once, before any controller runs
/// (https://learn.microsoft.com/azure/active-directory-b2c/b2clogin). The policy comes from where this group's routes put it: a
/// path segment (`/{tenant}/{policy}/…`, `/tfp/{tenant}/{policy}/…`), or the query's `p`, or,
/// with neither, the tenant's default flow (Microsoft-identity-platform URLs). A path-form URL
/// may also carry `p=` (passport-azure-ad always appends it; §6.3): the path's policy wins.
package struct PolicyResolver: RouterMiddleware {
    package typealias Context = IdentityRequestContext
    let tenants: any TenantDirectory
    let customPolicies: CustomPolicyLibrary
    let offered: @Sendable (UserFlow) -> UserFlow
    /// `.path` or `.tfp` for groups with a `:policy` capture, `.query` for the others.
    let placement: PolicyPlacement

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let tenantSegment = Self.decoded(context.parameters.get("tenant") ?? "")
        var policy: String?
        var placement = self.placement
        if placement == .query {
            policy = RequestParameters(query: request.uri.query).nonEmpty("p")
            if policy == nil { placement = .none }
        } else {
            policy = context.parameters.get("policy").map(Self.decoded)
        }
        let tenant = try await tenants.resolveSegment(tenantSegment)
        let name = policy ?? tenant.defaultPolicy
        guard UserFlow.isValidName(name), let flow = try await flow(named: name, tenant: tenant) else {
            throw ProtocolFailure.unknownPolicy(name, tenant: tenant.name)
        }
        var context = context
        context.resolvedPolicy = ResolvedPolicy(
            tenant: tenant, flow: offered(flow), route: PolicyRoute(tenantSegment: tenantSegment, policy: policy, placement: placement))
        return try await next(request, context)
    }

    /// A captured path segment, percent-decoded as the protocol URLs are.
    package static func decoded(_ segment: String) -> String { segment.removingPercentEncoding ?? segment }

    /// A user flow, or a custom policy (`B2C_1A_…`) that is a relying party, as a flow.
    private func flow(named name: String, tenant: Tenant) async throws -> UserFlow? {
        if let flow = try await tenants.userFlow(tenantID: tenant.id, name: name) { return flow }
        guard CustomPolicyID.names(name), let policy = try await customPolicies.program(tenantID: tenant.id, id: name) else { return nil }
        return UserFlow(customPolicy: policy, tenantID: tenant.id)
    }

    package init(
        tenants: any TenantDirectory,
        customPolicies: CustomPolicyLibrary,
        offered: @escaping @Sendable (UserFlow) -> UserFlow,
        placement: PolicyPlacement
    ) {
        self.tenants = tenants
        self.customPolicies = customPolicies
        self.offered = offered
        self.placement = placement
    }
}

extension TenantDirectory {
    /// The tenant of a URL segment: its name or GUID; `common`, `organizations` and `consumers`
    /// (Microsoft-identity-platform authorities) mean the default tenant.
    func resolveSegment(_ segment: String) async throws -> Tenant {
        if ["common", "organizations", "consumers"].contains(segment.lowercased()), let tenant = try await defaultTenant() {
            return tenant
        }
        guard let tenant = try await tenant(matching: segment) else { throw ProtocolFailure.unknownTenant(segment) }
        return tenant
    }
}

extension RequestIDConvention {
    /// MSAL sends a `client-request-id` GUID; B2C echoes it and quotes it as the correlation id
    /// of every error description (SPEC §2.6). Anything else gets an id of our own.
    package static let identityService = RequestIDConvention(
        headers: [HTTPField.Name("client-request-id")!], echo: HTTPField.Name("client-request-id")!, metadataKey: "correlation_id",
        isUsable: { UUID(uuidString: $0) != nil })
}

/// Behind a trusted balancer, the client is the one its `X-Forwarded-For` names (issue 14).
package struct ForwardedClientMiddleware: RouterMiddleware {
    package typealias Context = IdentityRequestContext
    let proxies: TrustedProxies

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let client = proxies.clientAddress(peer: context.clientAddress, fields: request.headers) { context.clientAddress = client }
        return try await next(request, context)
    }

    package init(proxies: TrustedProxies) {
        self.proxies = proxies
    }
}
