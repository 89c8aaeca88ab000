import Foundation
import Hummingbird
import Prometheus

/// Prometheus metrics of the API: requests by route and status with latencies, and bearer
/// tokens refused by reason. Served at `/metrics` in the text exposition format.
public final class TaskMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private static let buckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
    ]

    public init() {}

    func request(route: String, method: String, status: Int, duration: Duration) {
        let labels = [("route", route), ("method", method), ("status", String(status))]
        registry.makeCounter(name: "todo_http_requests_total", labels: labels).increment()
        registry.makeDurationHistogram(
            name: "todo_http_request_duration_seconds", labels: [("route", route), ("method", method)], buckets: Self.buckets
        )
        .record(duration)
    }

    func tokenRejected(_ rejection: TokenRejection) {
        registry.makeCounter(name: "todo_token_validation_failures_total", labels: [("reason", rejection.reason)]).increment()
    }

    var exposition: String { registry.emitToString() }
}

/// Records every request's route (the matched path pattern, never the raw path with ids), method,
/// status and duration.
struct MetricsMiddleware: RouterMiddleware {
    typealias Context = TaskRequestContext
    let metrics: TaskMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        metrics.request(
            route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: response.status.code,
            duration: ContinuousClock.now - start)
        return response
    }
}
