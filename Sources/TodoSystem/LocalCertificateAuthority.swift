import Crypto
import Foundation
import SwiftASN1
import X509

/// A development CA and a `localhost` server certificate it signs, generated once into
/// `<data-dir>/tls/`, so `--tls` needs no outside tooling. Clients trust `ca.pem`
/// (printed, and written to `settings.json` as `caCertificate`).
struct LocalCertificateAuthority {
    let directory: URL

    var caCertificatePath: String { directory.appendingPathComponent("ca.pem").path }
    var serverCertificatePath: String { directory.appendingPathComponent("server.pem").path }
    var serverKeyPath: String { directory.appendingPathComponent("server-key.pem").path }

    /// How long the CA and the server certificate live: a little over a year, as browsers allow
    /// for server certificates (CA/Browser Forum BR §6.3.2: 398 days). A leaked development CA
    /// key is then useless within a year, besides being bound to the served names (below).
    static let lifetime: TimeInterval = 397 * 86_400

    /// Every name the certificates cover: the served hosts and the loopback names.
    static func names(for hosts: [String]) -> [String] { Set(hosts + ["localhost", "127.0.0.1", "::1"]).sorted() }

    /// Creates the CA and server certificate unless both exist, the server one is not about to
    /// expire, and it covers every host (a new `--host` makes a new pair, since the CA itself is
    /// constrained to the names it was made for).
    func ensure(hosts: [String]) throws {
        let manager = FileManager.default
        if manager.fileExists(atPath: caCertificatePath), manager.fileExists(atPath: serverCertificatePath),
            manager.fileExists(atPath: serverKeyPath),
            let pem = try? String(contentsOfFile: serverCertificatePath, encoding: .utf8),
            let certificate = try? Certificate(pemEncoded: pem), certificate.notValidAfter > Date().addingTimeInterval(86_400),
            let covered = try? certificate.extensions.subjectAlternativeNames,
            // Pairs made before the CA carried key identifiers and DNS-only constraints (which
            // NIO's TLS rejects) are made again.
            (try? certificate.extensions.authorityKeyIdentifier) != nil,
            Set(Self.generalNames(Self.names(for: hosts))).isSubset(of: Set(covered))
        {
            return
        }
        try manager.createDirectory(at: directory, withIntermediateDirectories: true)
        try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        let now = Date()

        let names = Self.names(for: hosts)
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("TodoB2C")
            CommonName("TodoB2C Development CA")
        }
        let caCertificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(Self.lifetime + 86_400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                // RFC 5280 §4.2.1.10: a client that trusts this CA trusts it for these names only,
                // so its key cannot vouch for any other site.
                Critical(NameConstraints(permittedSubtrees: Self.permittedSubtrees(for: names)))
                // RFC 5280 §4.2.1.2 and §4.2.1.1: key identifiers link the chain (BoringSSL, which
                // NIO's TLS uses, will not build a chain without them).
                SubjectKeyIdentifier(hash: .init(caKey.publicKey))
            },
            issuerPrivateKey: .init(caKey))

        let serverKey = P256.Signing.PrivateKey()
        let serverCertificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(Self.lifetime),
            issuer: caName, subject: try DistinguishedName { CommonName("localhost") }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(Self.generalNames(names))
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: .init(caKey.publicKey)).keyIdentifier)
            },
            issuerPrivateKey: .init(caKey))

        try write(try caCertificate.serializeAsPEM().pemString, to: caCertificatePath, mode: 0o644)
        try write(try serverCertificate.serializeAsPEM().pemString, to: serverCertificatePath, mode: 0o644)
        try write(serverKey.pemRepresentation, to: serverKeyPath, mode: 0o600)
        try write(caKey.pemRepresentation, to: directory.appendingPathComponent("ca-key.pem").path, mode: 0o600)
    }

    /// DNS names and IP addresses as subject alternative names.
    static func generalNames(_ names: [String]) -> [GeneralName] {
        names.map { name in
            if let address = IPAddressBytes(name) { return .ipAddress(ASN1OctetString(contentBytes: address[...])) }
            return .dnsName(name)
        }
    }

    /// The CA's permitted subtrees: the DNS names only. An iPAddress constraint (RFC 5280
    /// §4.2.1.10) would bind the served addresses too, but BoringSSL, which swift-nio-ssl embeds,
    /// does not evaluate that constraint type and fails the whole chain
    /// (X509_V_ERR_UNSUPPORTED_CONSTRAINT_TYPE), so the web app and the CLI could not connect.
    /// The loopback addresses stay in the server certificate's names.
    static func permittedSubtrees(for names: [String]) -> [GeneralName] {
        names.filter { IPAddressBytes($0) == nil }.map { .dnsName($0) }
    }

    private func write(_ text: String, to path: String, mode: Int) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }
}

/// IPv4 or IPv6 literal → network-order bytes.
private func IPAddressBytes(_ text: String) -> [UInt8]? {
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
    return nil
}
