import Foundation
import Hummingbird
import Logging
import ServerSupport
import Storage

/// The identity service: an Azure AD B2C-compatible OpenID Connect provider.
///
/// Built once per process (and per test) by ``make(configuration:database:clock:logger:)``, which
/// runs the schema migrations; ``buildRouter()`` gives the HTTP surface.
public final class IdentityServer: Sendable {
    public let configuration: IdentityServerConfiguration
    public let clock: any IdentityClock
    public let tenants: any TenantDirectory
    public let users: any UserDirectory
    public let grants: any GrantStore
    public let keys: SigningKeyRing
    public let hasher: PasswordHasher
    let service: IdentityService
    let logger: Logger

    private init(service: IdentityService, logger: Logger) {
        self.service = service
        self.configuration = service.configuration
        self.clock = service.clock
        self.tenants = service.tenants
        self.users = service.users
        self.grants = service.grants
        self.keys = service.keys
        self.hasher = service.hasher
        self.logger = logger
    }

    /// - Parameter dataKey: seals signing keys and server secrets in the database; every
    ///   instance sharing `database` needs the same one.
    public static func make(
        configuration: IdentityServerConfiguration, database: any Database, dataKey: DataKey, clock: any IdentityClock = SystemClock(),
        logger: Logger
    ) async throws -> IdentityServer {
        try await IdentityMigrations.runner.run(on: database, logger: logger)
        let keys = SigningKeyRing(database: database, dataKey: dataKey, clock: clock, keyBits: configuration.signingKeyBits)
        let service = IdentityService(
            configuration: configuration, clock: clock, tenants: CachedTenantDirectory(SQLTenantDirectory(database: database)),
            users: SQLUserDirectory(database: database), grants: SQLGrantStore(database: database),
            interactions: SQLInteractionStore(database: database, dataKey: dataKey), keys: keys,
            hasher: PasswordHasher(cost: configuration.passwordHashCost), pages: try PageRenderer(),
            issuer: TokenIssuer(keys: keys))
        return IdentityServer(service: service, logger: logger)
    }

    /// Which RSA implementation signs tokens: the system's OpenSSL when present, else swift-crypto.
    public func signingBackend() async throws -> String {
        try await keys.activeKey().systemSigner != nil ? "OpenSSL (system libcrypto.so.3)" : "swift-crypto (BoringSSL)"
    }

    /// Removes expired codes, tokens, transactions and sessions.
    public func sweep() async throws {
        _ = try await service.grants.sweep(now: clock.now)
        try await service.interactions.sweep(now: clock.now)
    }

    public func shutdown() async throws { try await hasher.shutdown() }

    /// Messages in the development outbox, newest first.
    public func outbox(tenantID: UUID, limit: Int = 50) async throws -> [OutboxMessage] {
        try await service.interactions.outbox(tenantID: tenantID, limit: limit)
    }

    /// Every route of the identity service.
    public func buildRouter() -> Router<IdentityRequestContext> {
        let service = self.service
        let router = Router(context: IdentityRequestContext.self)
        router.add(middleware: SecurityHeadersMiddleware(https: service.configuration.secureCookies))
        router.add(middleware: CorrelationMiddleware())
        router.add(middleware: RequestLogMiddleware())
        router.add(middleware: ErrorLoggingMiddleware())

        router.get("healthz") { _, _ -> Response in .json(.object([("status", .string("ok"))])) }
        router.get("static/style.css") { _, _ in Self.css(service.pages.stylesheet(for: nil)) }
        router.get("static/tenants/:tenant/style.css") { _, context -> Response in
            let tenant = try await service.tenants.tenant(matching: context.parameters.get("tenant") ?? "")
            return Self.css(service.pages.stylesheet(for: tenant))
        }
        router.get("v1.0/me") { request, context in try await GraphMe(service: service).handle(request, context: context) }
        if service.configuration.simulatedFacebook {
            router.get("facebook.com/dialog/oauth") { request, context in
                try await SimulatedFacebook(service: service).dialog(request, context: context)
            }
            router.post("facebook.com/dialog/oauth") { request, context in
                try await SimulatedFacebook(service: service).dialog(request, context: context)
            }
        }
        if service.configuration.developmentMailbox {
            router.get("dev/outbox") { request, context -> Response in
                guard service.isAllowedHost(request) else {
                    return .json(.object([("error", .string("not_found"))]), status: .notFound)
                }
                let tenant = try await service.tenants.defaultTenant()
                var messages: [OutboxMessage] = []
                if let tenant { messages = try await service.interactions.outbox(tenantID: tenant.id, limit: 50) }
                let formatter = ISO8601DateFormatter()
                let values: [String: Any] = [
                    "title": "Development outbox",
                    "messages": messages.map {
                        [
                            "subject": $0.subject, "recipient": $0.recipient, "body": $0.body,
                            "createdAt": formatter.string(from: $0.createdAt),
                        ]
                    },
                ]
                return .html(try service.pages.render("outbox", values, tenant: tenant))
            }
        }
        let dispatcher = ProtocolDispatcher(service: service)
        router.get("**") { request, context in try await dispatcher.dispatch(request, context: context) }
        router.post("**") { request, context in try await dispatcher.dispatch(request, context: context) }
        return router
    }

    private static func css(_ text: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "public, max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Routes every tenant-scoped URL shape to its endpoint (SPEC §2.2).
struct ProtocolDispatcher: Sendable {
    let service: IdentityService

    func dispatch(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let query = RequestParameters(query: request.uri.query)
        // MSAL Python asks for the user realm before ROPC and accepts a 404 (research/client-sdk.md §C.8).
        if request.uri.path.lowercased().hasPrefix("/common/userrealm/") {
            return .json(.object([("error", .string("not_found"))]), status: .notFound)
        }
        guard let path = EndpointPath(path: request.uri.path, queryPolicy: query["p"]) else {
            return notFound(context: context)
        }
        do {
            switch (path.endpoint, request.method) {
            case (.discovery, .get): return try await MetadataEndpoints(service: service).discovery(request, path: path)
            case (.keys, .get): return try await MetadataEndpoints(service: service).keys(path: path)
            case (.authorize, .get), (.authorize, .post):
                return try await AuthorizeEndpoint(service: service).handle(request, context: context, path: path)
            case (.token, .post): return try await TokenEndpoint(service: service).handle(request, context: context, path: path)
            case (.logout, .get), (.logout, .post):
                return try await LogoutEndpoint(service: service).handle(request, context: context, path: path)
            case (.page(let name), _):
                return try await HostedPages(service: service).handle(request, context: context, path: path, page: name)
            case (.federationCallback, .get):
                return try await SimulatedFacebook(service: service).callback(request, context: context, path: path)
            default:
                return TokenErrorResponder.respond(
                    B2CError(
                        "invalid_request", "AADB2C90037", "The HTTP method \(request.method) is not supported here.",
                        status: .methodNotAllowed),
                    correlationID: context.correlationID, now: service.now)
            }
        } catch let error as B2CError {
            // Unknown tenant or policy on a JSON endpoint: 404 with the B2C error body.
            return TokenErrorResponder.respond(error, correlationID: context.correlationID, now: service.now)
        }
    }

    private func notFound(context: IdentityRequestContext) -> Response {
        TokenErrorResponder.respond(
            B2CError(
                "invalid_request", "AADB2C90037", "An error occurred while processing the request. The resource was not found.",
                status: .notFound),
            correlationID: context.correlationID, now: service.now)
    }
}

/// Logs unexpected errors once, with the correlation id, and answers 500 without details.
struct ErrorLoggingMiddleware: RouterMiddleware {
    typealias Context = IdentityRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            throw error
        } catch StorageError.textContainsNUL {
            // A NUL in a lookup key (a tenant name, a transaction id) is bad input, not a fault:
            // the store refuses it (TextGuardedSQLDatabase), and the caller hears why.
            return TokenErrorResponder.respond(
                .malformedRequest("The request contains a NUL character."), correlationID: context.correlationID, now: Date())
        } catch {
            context.logger.error("unhandled error", metadata: ["error": "\(String(reflecting: error))"])
            return TokenErrorResponder.respond(.internalError, correlationID: context.correlationID, now: Date())
        }
    }
}
