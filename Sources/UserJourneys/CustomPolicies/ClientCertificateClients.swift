import AsyncHTTPClient
import Foundation
import IdentityDirectory
import NIOSSL
import Synchronization

/// The TLS configurations that present a policy key's certificate (a REST profile's
/// `ClientCertificate`, SPEC §2.12), one per certificate, made on first use and kept for the
/// process (a kid is the certificate's key thumbprint, so the identity behind it cannot change).
/// Each call connects with its own client (``OutboundURL/execute(_:timeout:maximumBytes:tls:)``)
/// to the address it checked. At most ``limit`` are kept; beyond them one is made per call.
package final class ClientCertificateClients: Sendable {
    static let limit = 32
    private let configurations = Mutex<[String: TLSConfiguration]>([:])
    private let extraTrust: String?

    init(extraTrust: String?) { self.extraTrust = extraTrust }

    func configuration(for identity: PolicyClientIdentity, tenantID: UUID) -> TLSConfiguration {
        let key = tenantID.uuidString.lowercased() + ":" + identity.kid
        if let known = configurations.withLock({ $0[key] }) { return known }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateChain = identity.certificateChain.map { .certificate($0) }
        tls.privateKey = .privateKey(identity.privateKey)
        if let extraTrust { tls.additionalTrustRoots = [.file(extraTrust)] }
        configurations.withLock { all in
            if all.count < Self.limit { all[key] = tls }
        }
        return tls
    }
}
