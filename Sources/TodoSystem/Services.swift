import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import IdentityServer
import Logging
import NIOSSL
import ServiceLifecycle
import Synchronization
import WebApp

/// The releases of everything the system holds, run in reverse order of acquisition: once, on
/// graceful shutdown or when building fails half-way. AsyncHTTPClient, for one, insists on an
/// explicit shutdown before it is released.
final class Teardown: Sendable {
    private let steps = Mutex<[(name: String, release: @Sendable () async throws -> Void)]>([])

    func add(_ name: String, _ release: @escaping @Sendable () async throws -> Void) {
        steps.withLock { $0.append((name, release)) }
    }

    func run(logger: Logger) async {
        let steps = self.steps.withLock { steps in
            defer { steps.removeAll() }
            return steps
        }
        for step in steps.reversed() {
            do {
                try await step.release()
            } catch {
                logger.warning("release failed", metadata: ["part": "\(step.name)", "error": "\(error)"])
            }
        }
    }
}

/// Waits for the graceful shutdown, then runs the ``Teardown``. First in the service group, so
/// it is shut down last, after every server has stopped.
struct TeardownService: Service {
    let teardown: Teardown
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        await teardown.run(logger: logger)
    }
}

/// Deletes expired codes, tokens, transactions and sessions every few minutes.
struct SweepService: Service {
    let identity: IdentityServer
    let webApp: WebApp?
    let logger: Logger

    func run() async throws {
        // Shutdown cancels the sleep; that is the normal end of this service, not a failure.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await identity.sweep()
                    try await webApp?.sweep()
                } catch {
                    logger.warning("sweep failed", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: .seconds(300))
            }
        }
    }
}

/// How both parts listen: plain HTTP/1.1, or HTTPS with the data dir's development CA (made on
/// first use), so tokens never travel in clear text when `--tls` is on.
enum Listener {
    /// The server builder and, under TLS, the CA certificate's path for clients.
    /// `cap`: each listener's connections at most (``ConnectionBudget``).
    static func make(_ configuration: SystemConfiguration, cap: Int) throws -> (HTTPServerBuilder, String?) {
        // One timer covers idle keep-alive connections and requests whose header or next body
        // part does not arrive (slowloris): Hummingbird's idle timeout counts from the last
        // complete part read or response written.
        // That timer restarts on every body part, so a request must also arrive whole within the
        // idle timeout, its body at 1 KB/s at least after 10 s, and one client address may hold
        // a quarter of the connections at most (``RequestPacing``).
        let pacing = RequestPacing(
            requestDeadline: .seconds(Int64(configuration.idleTimeout)), connectionsPerAddress: max(4, cap / 4),
            proxies: configuration.trustedProxies, proxiesOnly: configuration.onlyProxiesConnect)
        let addresses = ConnectionsByAddress()
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: pacing.handlers(counting: addresses), idleTimeout: .seconds(Int64(configuration.idleTimeout)))
        guard configuration.tls else { return (.http1(configuration: http1), nil) }
        let ca = LocalCertificateAuthority(
            directory: URL(fileURLWithPath: configuration.store.dataDirectory).appendingPathComponent("tls"))
        try ca.ensure(hosts: [configuration.displayHostName])
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(ca.serverCertificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: ca.serverKeyPath, format: .pem)))
        // TLS 1.2 and 1.3 only, forward-secret AEAD suites only (RFC 8996 deprecates 1.0/1.1; no
        // CBC with SHA-1: Mozilla's "intermediate" configuration).
        tls.minimumTLSVersion = .tlsv12
        tls.cipherSuites = "ECDHE+AESGCM:ECDHE+CHACHA20"
        return (try .tls(.http1(configuration: http1), tlsConfiguration: tls), ca.caCertificatePath)
    }
}

/// Keeps the listeners' connections under the process's descriptor limit (issue 14): at the
/// limit, accepting fails with EMFILE on every loop turn, the ports stop answering and a thread
/// spins. Each listener stops accepting at its share instead (more connections wait in the
/// kernel's queue until the idle timeout frees a slot), leaving descriptors for the database,
/// SQLite's files and outbound clients.
enum ConnectionBudget {
    /// Raises the soft descriptor limit to the hard one, as many servers do at start, and
    /// returns each of `listeners`' connection cap: `configured`, or less if the limit is lower.
    static func perListener(configured: Int, listeners: Int, logger: Logger) -> Int {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return configured }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, 1_048_576)
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        let descriptors = Int(clamping: limit.rlim_cur)
        let reserved = min(256, descriptors / 4)
        let share = max(16, (descriptors - reserved) / max(1, listeners))
        if share < configured {
            logger.notice(
                "connections capped by the descriptor limit",
                metadata: ["per_listener": "\(share)", "descriptor_limit": "\(descriptors)", "configured": "\(configured)"])
        }
        return min(configured, share)
    }

    #if os(Linux)
        private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
        private static let resource = RLIMIT_NOFILE
    #endif
}
