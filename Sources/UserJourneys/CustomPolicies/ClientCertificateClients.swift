import AsyncHTTPClient
import Foundation
import IdentityDirectory
import NIOSSL
import Synchronization

/// HTTP clients that present a policy key's certificate (a REST profile's `ClientCertificate`,
/// SPEC §2.12): TLS client authentication is a client's configuration, so there is one client
/// per certificate, made on first use and kept for the process (a kid is the certificate's key
/// thumbprint, so the identity behind it cannot change). Redirects are never followed, as for
/// every outbound call. At most ``limit`` are kept; a certificate beyond them is refused rather
/// than a client left unclosed.
package final class ClientCertificateClients: Sendable {
    static let limit = 32
    private let clients = Mutex<[String: HTTPClient]>([:])
    private let extraTrust: String?

    init(extraTrust: String?) { self.extraTrust = extraTrust }

    func client(for identity: PolicyClientIdentity, tenantID: UUID) throws -> HTTPClient? {
        let key = tenantID.uuidString.lowercased() + ":" + identity.kid
        if let known = clients.withLock({ $0[key] }) { return known }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateChain = identity.certificateChain.map { .certificate($0) }
        tls.privateKey = .privateKey(identity.privateKey)
        if let extraTrust { tls.additionalTrustRoots = [.file(extraTrust)] }
        return clients.withLock { all -> HTTPClient? in
            if let known = all[key] { return known }
            guard all.count < Self.limit else { return nil }
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow)
            // AsyncHTTPClient's own spans record the full URL; ours (OutboundTrace) record the host.
            configuration.tracing.tracer = nil
            let made = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            all[key] = made
            return made
        }
    }

    /// Shuts every client down (the server's shutdown): AsyncHTTPClient requires it.
    package func shutdown() async {
        let all = clients.withLock { all in
            defer { all = [:] }
            return Array(all.values)
        }
        for client in all { try? await client.shutdown() }
    }
}
