import HTTPTypes
import Hummingbird
import Metrics
import NIOHTTP1
import Synchronization
import Tracing

/// Whether this process exports telemetry: set once by `serve` after it bootstraps OpenTelemetry.
/// Off, a request costs no span, no timer and no string for them: even swift's no-op tracer and
/// metrics cost the Task API's bare route 18% of its rate (30,000 against 24,600 requests/s,
/// `scripts/bench/api.sh`, alternating builds).
public enum TelemetrySwitch {
    private static let on = Atomic<Bool>(false)

    public static var isOn: Bool { on.load(ordering: .relaxed) }

    public static func turnOn() { on.store(true, ordering: .relaxed) }
}

/// A span and a latency measurement per request (SPEC §2.13), for whatever tracer and metrics
/// backend the process bootstrapped (OpenTelemetry when `serve --otlp-endpoint` is set; nothing
/// otherwise: the default tracer and metrics are no-ops).
///
/// What a span holds is chosen here, not left to a generic middleware: the method, the matched
/// route pattern (`/v1.0/users/{id}`, never the path, which can hold an email), the status and
/// the correlation id. Never the query string (codes, states, hints), a header or a body.
/// A caller's W3C `traceparent` makes the span its child.
public struct RequestTelemetryMiddleware<Context: IdentifiedRequestContext>: RouterMiddleware {
    /// The part answering (`identity`, `api`, `web`), an attribute of every span and measurement.
    let part: String

    public init(part: String) { self.part = part }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard TelemetrySwitch.isOn else { return try await next(request, context) }
        var parent = InstrumentationContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &parent, using: HTTPFieldsCarrier())
        let start = ContinuousClock.now
        let method = Self.method(request.method)
        // Ended here rather than by `withSpan`, which would mark every thrown error (a 400 as
        // much as a 500) as the span's failure and record its text.
        let span = InstrumentationSystem.tracer.startAnySpan(method, context: parent, ofKind: .server)
        span.attributes["http.request.method"] = method
        span.attributes["todo.part"] = part
        span.attributes["todo.correlation_id"] = context.requestID
        defer { span.end() }
        do {
            let response = try await InstrumentationContext.$current.withValue(span.context) { try await next(request, context) }
            finish(span, context: context, method: method, status: Int(response.status.code), since: start)
            return response
        } catch {
            finish(span, context: context, method: method, status: Int((error as? any HTTPResponseError)?.status.code ?? 500), since: start)
            throw error
        }
    }

    /// The method as OpenTelemetry's HTTP conventions name it: a known one, else `_OTHER`, so a
    /// dimension never holds what a client made up.
    static func method(_ method: HTTPRequest.Method) -> String {
        ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"].contains(method.rawValue) ? method.rawValue : "_OTHER"
    }

    private func finish(_ span: any Span, context: Context, method: String, status: Int, since start: ContinuousClock.Instant) {
        let route = context.endpointPath ?? "unmatched"
        span.operationName = "\(method) \(route)"
        span.attributes["http.route"] = route
        span.attributes["http.response.status_code"] = status
        // OpenTelemetry's HTTP conventions: only server errors mark a server span as failed.
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
        Timer(
            label: "http.server.request.duration",
            dimensions: [("todo.part", part), ("http.request.method", method), ("http.route", route), ("http.response.status_code", String(status))],
            preferredDisplayUnit: .seconds
        ).recordInterval(since: start)
    }
}

extension Timer {
    fileprivate func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}

/// Reads a request's (or writes an outgoing request's) trace context headers (`traceparent`,
/// `tracestate`) in swift-http-types' fields.
public struct HTTPFieldsCarrier: Extractor, Injector {
    public init() {}

    public func extract(key: String, from carrier: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { carrier[$0] }
    }

    public func inject(_ value: String, forKey key: String, into carrier: inout HTTPFields) {
        if let name = HTTPField.Name(key) { carrier[name] = value }
    }
}

/// The same for NIO's headers, which AsyncHTTPClient sends.
public struct HTTPHeadersCarrier: Injector {
    public init() {}

    public func inject(_ value: String, forKey key: String, into carrier: inout HTTPHeaders) {
        carrier.replaceOrAdd(name: key, value: value)
    }
}

/// Outbound calls (API connectors, REST profiles, upstream providers, the Task API's metadata
/// fetch) are client spans, and carry the span's W3C trace context (`traceparent`), so the
/// receiver's spans join the trace.
public enum OutboundTrace {
    /// Runs `call` in a client span named `name` (`POST api-connector`), for `host`; `call` gets
    /// the trace headers to add to its request. Only the host is recorded: a URL's query can hold
    /// a token (an OAuth2 claims endpoint's `access_token`).
    public static func call<T>(_ name: String, host: String?, _ call: (_ traceHeaders: HTTPHeaders) async throws -> T) async throws -> T {
        try await withSpan(name, ofKind: .client) { span in
            if let host { span.attributes["server.address"] = host }
            var headers = HTTPHeaders()
            InstrumentationSystem.instrument.inject(span.context, into: &headers, using: HTTPHeadersCarrier())
            return try await call(headers)
        }
    }
}
