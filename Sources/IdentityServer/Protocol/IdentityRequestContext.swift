import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The request context of the identity service: Hummingbird's core plus the correlation id
/// that every B2C error description and log line carries (SPEC §2.6).
public struct IdentityRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public var correlationID: String
    /// Where the request came from, for smart lockout's per-source counting: the peer's IP
    /// address ("unknown" without a socket, as in router tests).
    public var clientAddress: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        correlationID = UUID().uuidString.lowercased()
        clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// Forms and JSON bodies are small; anything bigger is refused with 413.
    public var maxUploadSize: Int { 64 * 1024 }
}

/// Takes the caller's `client-request-id` (MSAL sends one) as the correlation id, or makes one;
/// echoes it on the response and tags the request's log lines with it.
struct CorrelationMiddleware: RouterMiddleware {
    typealias Context = IdentityRequestContext

    static let header = HTTPField.Name("client-request-id")!

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        if let supplied = request.headers[Self.header], let id = UUID(uuidString: supplied) {
            context.correlationID = id.uuidString.lowercased()
        }
        context.logger[metadataKey: "correlation_id"] = .string(context.correlationID)
        var response = try await next(request, context)
        response.headers[Self.header] = context.correlationID
        return response
    }
}

/// One log line per request: method, path, status, duration and correlation id. The query string
/// is left out on purpose: it carries codes, states and hints that must not reach a log.
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = IdentityRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        context.logger.info(
            "request",
            metadata: [
                "method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(response.status.code)",
                "ms": "\(String(format: "%.1f", milliseconds))",
            ])
        return response
    }
}
