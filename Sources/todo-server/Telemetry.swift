import Foundation
import Logging
import Metrics
import OTel
import ServerSupport
import ServiceLifecycle
import Synchronization
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

    /// The longest one export waits for the collector.
    static let exportTimeout: Duration = .seconds(3)

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
            // A collector that is slow or gone holds a shutdown only this long per export
            // (OpenTelemetry's default is 10 s, and 30 s for each export's whole retry loop).
            configuration[keyPath: signal].timeout = Self.exportTimeout
        }
        configuration.traces.batchSpanProcessor.exportTimeout = Self.exportTimeout
        configuration.metrics.exportTimeout = Self.exportTimeout
        configuration.logs.batchLogRecordProcessor.exportTimeout = Self.exportTimeout
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
        var group = ServiceGroupConfiguration(services: services, logger: Logger(label: "todo-server.telemetry"))
        group.maximumGracefulShutdownDuration = Duration.seconds(5)
        group.maximumCancellationDuration = Duration.seconds(1)
        return Telemetry(service: OffTheEventLoops(ServiceGroup(configuration: group)))
    }
}

/// A service run on a thread of its own rather than NIO's event loops, which are the global
/// executor in `serve`: swift-otel's OTLP/HTTP exporter shuts its HTTP client down in `deinit`
/// with `syncShutdown`, which AsyncHTTPClient answers with a crash (SIGILL) on an event loop's
/// thread, and the exporter is released when its service group's `run` returns (issue 51, F2).
/// Under this task executor preference (SE-0417) the group, its child tasks and that release
/// run on a Dispatch queue.
struct OffTheEventLoops: Service {
    let service: any Service
    init(_ service: any Service) { self.service = service }

    func run() async throws {
        do {
            try await withTaskExecutorPreference(DispatchTaskExecutor.telemetry) { try await service.run() }
        } catch is CancellationError {
            // The group's last exports outlasted its grace at shutdown (a collector that is gone
            // or never answers): what was left is dropped, and the process still ends cleanly.
        }
    }
}

/// A task executor over a serial Dispatch queue.
final class DispatchTaskExecutor: TaskExecutor {
    static let telemetry = DispatchTaskExecutor(label: "todo-server.telemetry")
    private let queue: DispatchQueue
    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
