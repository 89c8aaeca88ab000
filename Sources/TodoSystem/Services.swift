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
    static func make(_ configuration: SystemConfiguration) throws -> (HTTPServerBuilder, String?) {
        // One timer covers idle keep-alive connections and requests whose header or next body
        // part does not arrive (slowloris): Hummingbird's idle timeout counts from the last
        // complete part read or response written.
        let http1 = HTTP1Channel.Configuration(idleTimeout: .seconds(Int64(configuration.idleTimeout)))
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
