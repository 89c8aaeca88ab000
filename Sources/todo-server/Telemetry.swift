import Foundation
import Logging
import Metrics
import OTel
import ServerSupport
import ServiceLifecycle
import Tracing

/// OpenTelemetry for `serve` (SPEC §2.13), through swift-otel: traces, metrics and logs over
/// OTLP/HTTP when a collector is named (`--otlp-endpoint`, or OpenTelemetry's own
/// `OTEL_EXPORTER_OTLP_ENDPOINT` and its per-signal variants); every other `OTEL_*` variable
/// (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
/// `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SDK_DISABLED` …) applies as the specification defines it.
/// Without one nothing is bootstrapped but the line log: the tracer and metrics stay swift's
/// no-ops and nothing leaves the process.
///
/// What the spans and measurements hold is chosen where they are made
/// (``RequestTelemetryMiddleware``, the journey steps, the sign-in log's counters): routes, never
/// paths or queries; ids and codes, never a user, a token or a value.
struct Telemetry {
    /// The exporters' background work, to run alongside the servers and stop after them.
    let service: any Service

    /// The collector's variables, any of which turns export on.
    static let endpointVariables = [
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    ]

    /// Bootstraps the process's logging (always the line log; OpenTelemetry's too when
    /// exporting), tracer and metrics; nil when nothing is exported.
    static func bootstrap(endpoint: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Telemetry? {
        // The flag is the collector's base URL, as the variable is: OpenTelemetry reads it there.
        if let endpoint { setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint, 1) }
        // A signal is exported when the base endpoint or its own is set: a traces endpoint alone
        // sends no metrics or logs anywhere (not to OpenTelemetry's default localhost:4318).
        let base = endpoint != nil || !(environment["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? "").isEmpty
        func wanted(_ signal: String) -> Bool { base || !(environment["OTEL_EXPORTER_OTLP_\(signal)_ENDPOINT"] ?? "").isEmpty }
        let disabled = environment["OTEL_SDK_DISABLED"]?.lowercased() == "true"
        let (traces, metrics, logs) = (wanted("TRACES"), wanted("METRICS"), wanted("LOGS"))
        guard traces || metrics || logs, !disabled else {
            LoggingSystem.bootstrap { label in LineLogHandler(label: label) }
            return nil
        }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "todo-server"
        // OTLP/HTTP only: this build leaves swift-otel's gRPC exporter out (Package.swift).
        for signal in [\OTel.Configuration.traces.otlpExporter, \.metrics.otlpExporter, \.logs.otlpExporter] {
            configuration[keyPath: signal].protocol = .httpProtobuf
        }
        var services: [any Service] = []
        // The tracer is bootstrapped last: an exporter's HTTP client made after it would trace
        // its own exports (each export a span, each span another export).
        var tracer: (any Tracer)?
        if traces {
            let tracing = try OTel.makeTracingBackend(configuration: configuration)
            tracer = tracing.factory
            services.append(tracing.service)
        }
        if metrics {
            let backend = try OTel.makeMetricsBackend(configuration: configuration)
            MetricsSystem.bootstrap(backend.factory)
            services.append(backend.service)
        }
        if logs {
            let logging = try OTel.makeLoggingBackend(configuration: configuration)
            LoggingSystem.bootstrap { label in MultiplexLogHandler([LineLogHandler(label: label), logging.factory(label)]) }
            services.append(logging.service)
        } else {
            LoggingSystem.bootstrap { label in LineLogHandler(label: label) }
        }
        if let tracer { InstrumentationSystem.bootstrap(tracer) }
        TelemetrySwitch.turnOn()
        let group = ServiceGroup(configuration: .init(services: services, logger: Logger(label: "todo-server.telemetry")))
        return Telemetry(service: group)
    }
}
