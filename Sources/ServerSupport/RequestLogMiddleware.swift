import HTTPTypes
import Hummingbird

/// A request context that carries the id of its request, for logs and error bodies.
public protocol IdentifiedRequestContext: RequestContext {
    var requestID: String { get set }
}

/// Which header names a request's id, which echoes it, and what counts as a usable one.
public struct RequestIDConvention: Sendable {
    /// Read in order; the first usable value becomes the request's id.
    public var headers: [HTTPField.Name]
    public var echo: HTTPField.Name
    /// The log metadata key the id goes under.
    public var metadataKey: String
    public var isUsable: @Sendable (String) -> Bool

    public init(headers: [HTTPField.Name], echo: HTTPField.Name, metadataKey: String, isUsable: @escaping @Sendable (String) -> Bool) {
        self.headers = headers
        self.echo = echo
        self.metadataKey = metadataKey
        self.isUsable = isUsable
    }
}

/// The one request-id and access-log middleware of every HTTP part: takes the caller's id (or
/// keeps the context's new one), tags every log line of the request with it, echoes it on the
/// response, and writes one line per request: method, path, status and milliseconds. The query
/// string is left out on purpose: it carries codes, states and hints that must not reach a log.
public struct RequestLogMiddleware<Context: IdentifiedRequestContext>: RouterMiddleware {
    let convention: RequestIDConvention

    public init(_ convention: RequestIDConvention) { self.convention = convention }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        if let supplied = convention.headers.lazy.compactMap({ request.headers[$0] }).first(where: convention.isUsable) {
            context.requestID = supplied
        }
        context.logger[metadataKey: convention.metadataKey] = .string(context.requestID)
        let start = ContinuousClock.now
        var response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        response.headers[convention.echo] = context.requestID
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        context.logger.info(
            "request",
            metadata: [
                "method": "\(request.method)", "path": "\(LoggedPath.of(request.uri.path))", "status": "\(response.status.code)",
                "ms": "\((milliseconds * 10).rounded() / 10)",
            ])
        return response
    }
}

/// The path as the access log shows it: a segment that names an email (Graph's `/users/{upn}`)
/// is written `{redacted}`, since log lines leave the machine (OpenTelemetry's logs).
public enum LoggedPath {
    public static func of(_ path: String) -> String {
        guard path.contains("@") || path.lowercased().contains("%40") else { return path }
        return path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.contains("@") || segment.lowercased().contains("%40") ? "{redacted}" : String(segment)
        }.joined(separator: "/")
    }
}
