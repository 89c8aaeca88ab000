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

    /// Creates the CA and server certificate unless both exist (and the server one has not expired).
    func ensure(hosts: [String]) throws {
        let manager = FileManager.default
        if manager.fileExists(atPath: caCertificatePath), manager.fileExists(atPath: serverCertificatePath),
            manager.fileExists(atPath: serverKeyPath),
            let pem = try? String(contentsOfFile: serverCertificatePath, encoding: .utf8),
            let certificate = try? Certificate(pemEncoded: pem), certificate.notValidAfter > Date().addingTimeInterval(86_400)
        {
            return
        }
        try manager.createDirectory(at: directory, withIntermediateDirectories: true)
        try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        let now = Date()

        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("TodoB2C")
            CommonName("TodoB2C Development CA")
        }
        let caCertificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(10 * 365 * 86_400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(caKey))

        let serverKey = P256.Signing.PrivateKey()
        var names: [GeneralName] = []
        for host in Set(hosts + ["localhost", "127.0.0.1", "::1"]).sorted() {
            if let address = IPAddressBytes(host) {
                names.append(.ipAddress(ASN1OctetString(contentBytes: address[...])))
            } else {
                names.append(.dnsName(host))
            }
        }
        let serverCertificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(397 * 86_400),
            issuer: caName, subject: try DistinguishedName { CommonName("localhost") }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: .init(caKey))

        try write(try caCertificate.serializeAsPEM().pemString, to: caCertificatePath, mode: 0o644)
        try write(try serverCertificate.serializeAsPEM().pemString, to: serverCertificatePath, mode: 0o644)
        try write(serverKey.pemRepresentation, to: serverKeyPath, mode: 0o600)
        try write(caKey.pemRepresentation, to: directory.appendingPathComponent("ca-key.pem").path, mode: 0o600)
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
