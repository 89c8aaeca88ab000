import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ServerSupport
import Storage

/// Settings of the Task API.
public struct TaskServiceConfiguration: Sendable {
    public var policy: BearerPolicy
    /// Origins allowed by CORS; empty means no CORS headers (same-origin only).
    public var corsAllowedOrigins: [String]
    /// Served over HTTPS (`serve --tls`): responses to non-loopback names carry HSTS.
    public var https: Bool
    /// Load balancers whose `X-Forwarded-For` names the client (the web app's per-address limits).
    public var trustedProxies: [String] = []

    public init(policy: BearerPolicy, corsAllowedOrigins: [String] = [], https: Bool = false) {
        self.policy = policy
        self.corsAllowedOrigins = corsAllowedOrigins
        self.https = https
    }
}

/// The Task API: bearer-protected, per-user tasks (SPEC §3). ``make(configuration:database:fetcher:logger:)``
/// runs its migrations; ``buildRouter()`` gives the routes, which the web app's router can join.
public final class TaskServer: Sendable {
    public let configuration: TaskServiceConfiguration
    public let repository: SQLTaskRepository
    public let validator: BearerValidator
    public let metrics: TaskMetrics
    let logger: Logger

    let adoption: LegacyOwnerAdoption

    private init(
        configuration: TaskServiceConfiguration, repository: SQLTaskRepository, validator: BearerValidator, adoption: LegacyOwnerAdoption,
        logger: Logger
    ) {
        self.configuration = configuration
        self.repository = repository
        self.validator = validator
        self.adoption = adoption
        self.metrics = TaskMetrics()
        self.logger = logger
    }

    /// Brings `database` to this build's task schema (for tools that restore a backup).
    public static func migrate(_ database: any Database, logger: Logger) async throws {
        try await SQLTaskRepository.migrations.run(on: database, logger: logger)
    }

    public static func make(
        configuration: TaskServiceConfiguration, database: any Database, fetcher: any MetadataFetcher, logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> TaskServer {
        try await SQLTaskRepository.migrations.run(on: database, logger: logger)
        // Lists are kept in memory: SQLite is one process's file, written only through this
        // repository; instances sharing PostgreSQL ask it for the owner's version each time.
        let repository = SQLTaskRepository(database: database, cachesLists: true)
        let validator = BearerValidator(policy: configuration.policy, fetcher: fetcher, logger: logger, clock: clock)
        let adoption = LegacyOwnerAdoption(
            repository: repository, validator: validator, pending: try await repository.hasLegacyOwners(), logger: logger)
        return TaskServer(configuration: configuration, repository: repository, validator: validator, adoption: adoption, logger: logger)
    }

    /// The hand-written OpenAPI document (`Resources/openapi.json`), kept true by a test that
    /// compares it with the router.
    public static let openAPIDocument: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"), let data = try? Data(contentsOf: url) else {
            return Array("{}".utf8)
        }
        return Array(data)
    }()

    static let allowedMethods = [
        "api/tasks": "GET, POST", "api/tasks/:id": "GET, PATCH, DELETE", "tasks": "GET, POST, DELETE",
        "taskservice/api/tasks": "GET, POST", "taskservice/api/tasks/:id": "DELETE",
    ]

    /// The method handlers that only answer 405, left out of the OpenAPI document.
    static let unsupportedMethods: [(String, [HTTPRequest.Method])] = [
        ("api/tasks", [.put, .patch, .delete]), ("api/tasks/:id", [.post, .put]), ("tasks", [.put, .patch]),
        ("taskservice/api/tasks", [.put, .patch, .delete]), ("taskservice/api/tasks/:id", [.get, .post, .put, .patch]),
    ]

    public func buildRouter() -> Router<TaskRequestContext> {
        let router = Router(context: TaskRequestContext.self)
        router.add(middleware: SecurityHeadersMiddleware(https: configuration.https))
        router.add(middleware: StatementDeadlineMiddleware())
        if !configuration.trustedProxies.isEmpty {
            router.add(middleware: ForwardedClientMiddleware(proxies: TrustedProxies(configuration.trustedProxies)))
        }
        router.add(middleware: RequestLogMiddleware(.taskAPI))
        router.add(middleware: RequestTelemetryMiddleware(part: "api"))
        // CORS outside the problem mapping, so browsers can read error responses too.
        if !configuration.corsAllowedOrigins.isEmpty {
            router.add(middleware: CORSPolicyMiddleware(allowedOrigins: Set(configuration.corsAllowedOrigins)))
        }
        router.add(middleware: MetricsMiddleware(metrics: metrics))
        router.add(middleware: ProblemMiddleware())
        let repository = self.repository
        let metrics = self.metrics
        router.get("healthz") { _, _ in try JSONResponse.make(["status": "ok"], status: .ok) }
        let database = repository.database
        // Answers within a second: a balancer's health check must not hang on a dead database,
        // and writes failing (a full disk) make the instance not ready though reads still work.
        router.get("readyz") { _, context -> Response in
            do {
                try await database.checkReady()
                return try JSONResponse.make(["status": "ready"], status: .ok)
            } catch {
                context.logger.warning("not ready", metadata: ["error": "\(error)"])
                throw TaskAPIError.unavailable
            }
        }
        // Prometheus metrics for this machine only: they describe traffic, and nothing outside
        // needs them (scrape through loopback).
        router.get("metrics") { request, context in
            guard context.isLocal(request) else { return Problem.response(for: .notFound) }
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: metrics.exposition)))
        }
        let openAPI = Self.openAPIDocument
        router.get("openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: openAPI)))
        }
        let authenticated = BearerAuthenticationMiddleware(validator: validator, metrics: metrics, adoption: adoption)
        router.group("api/tasks").add(middleware: authenticated).addRoutes(TaskController(repository: repository).endpoints)
        router.group("tasks").add(middleware: authenticated).addRoutes(TutorialTaskController(repository: repository).endpoints)
        router.group("taskservice/api/tasks").add(middleware: authenticated).addRoutes(
            DotNetTaskController(repository: repository).endpoints)
        // A known path with a method it does not serve: 405 with `Allow` (RFC 9110 §15.5.6).
        for (path, methods) in Self.unsupportedMethods {
            let allow = Self.allowedMethods[path] ?? ""
            for method in methods {
                router.on(RouterPath(path), method: method) { _, _ -> Response in
                    var response = Problem.response(for: .methodNotAllowed)
                    response.headers[.allow] = allow
                    return response
                }
            }
        }
        return router
    }
}

/// CORS for the configured origins only (Fetch standard, CORS protocol): a listed `Origin` (or any,
/// with `*`) gets `Access-Control-Allow-Origin` echoed back; preflights are answered here; any
/// other origin gets no CORS headers, so browsers keep its pages out.
struct CORSPolicyMiddleware: RouterMiddleware {
    typealias Context = TaskRequestContext
    let allowedOrigins: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], allowedOrigins.contains("*") || allowedOrigins.contains(origin) else {
            return try await next(request, context)
        }
        var response: Response
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            response = Response(status: .noContent)
            response.headers[.accessControlAllowMethods] = "GET, POST, PATCH, DELETE, OPTIONS"
            response.headers[.accessControlAllowHeaders] =
                "Authorization, Content-Type, If-Match, If-None-Match, client-request-id, x-request-id"
            response.headers[.accessControlMaxAge] = "600"
        } else {
            response = try await next(request, context)
            response.headers[.accessControlExposeHeaders] = "Location, ETag, Link, x-request-id"
        }
        response.headers[.accessControlAllowOrigin] = allowedOrigins.contains("*") ? "*" : origin
        response.headers[.vary] = "Origin"
        return response
    }
}
