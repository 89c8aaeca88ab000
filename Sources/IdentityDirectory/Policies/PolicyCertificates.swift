import Crypto
import CryptoExtras
import Foundation
import JOSE
import NIOSSL
import WireCoding
import X509

/// Certificates in policy key sets (Graph beta `trustFrameworkKeySet: uploadPkcs12`): a PKCS#12
/// file and its password, sealed; the certificate's public key, validity and DER shown. What a
/// REST technical profile's `ClientCertificate` key presents to its service (SPEC §2.12).
extension PolicyKeySetLibrary {
    static let maximumPkcs12Bytes = 64 * 1024

    /// `uploadPkcs12`: `pkcs12` is the file in base64 (Graph's `key`), opened with `password`.
    /// Its validity becomes the key's `nbf` and `exp`. RSA certificates only.
    package func uploadPkcs12(tenantID: UUID, keySet: String, pkcs12: String, password: String) async throws -> PolicyKey {
        func invalid(_ message: String) -> PolicyKeySetError { PolicyKeySetError(kind: .invalid, message: message) }
        guard let data = Data(base64Encoded: pkcs12), !data.isEmpty, data.count <= Self.maximumPkcs12Bytes, password.utf8.count <= 1024 else {
            throw invalid("key must be a PKCS#12 file in base64, at most \(Self.maximumPkcs12Bytes / 1024) KiB.")
        }
        let bundle: NIOSSLPKCS12Bundle
        do {
            bundle = try NIOSSLPKCS12Bundle(buffer: Array(data), passphrase: Array(password.utf8))
        } catch {
            throw invalid("The PKCS#12 file could not be opened with that password.")
        }
        guard let leaf = bundle.certificateChain.first, let der = try? leaf.toDERBytes(), let certificate = try? Certificate(derEncoded: der)
        else { throw invalid("The PKCS#12 file holds no certificate.") }
        guard let publicKey = _RSA.Signing.PublicKey(certificate.publicKey) else { throw invalid("Only RSA certificates are supported.") }
        let (n, e) = JWKSet.components(of: publicKey)
        let sealed = JSONText.object([("pkcs12", .string(pkcs12)), ("password", .string(password))]).serialized
        return try await add(
            tenantID: tenantID, keySet: keySet, kid: JWKSet.thumbprint(of: publicKey), use: "sig", kty: "RSA", secret: sealed, n: n, e: e,
            notBefore: certificate.notValidBefore, expires: certificate.notValidAfter, x5c: Data(der).base64EncodedString())
    }

    /// The active certificate of `keySet` (within its validity) with its chain and private key,
    /// for TLS client authentication; nil when the set has none.
    package func clientIdentity(tenantID: UUID, keySet: String) async throws -> PolicyClientIdentity? {
        guard let set = try await recentKeySet(tenantID: tenantID, id: keySet),
            let key = Self.active(in: set, at: clock.now, where: { $0.x5c != nil })
        else { return nil }
        guard let opened = try await openedSecret(tenantID: tenantID, keySet: set.id, kid: key.kid),
            let stored = try? JSONDecoder().decode([String: String].self, from: Data(opened.utf8)),
            let file = stored["pkcs12"].flatMap({ Data(base64Encoded: $0) }), let password = stored["password"],
            let bundle = try? NIOSSLPKCS12Bundle(buffer: Array(file), passphrase: Array(password.utf8))
        else { return nil }
        return PolicyClientIdentity(kid: key.kid, certificateChain: bundle.certificateChain, privateKey: bundle.privateKey)
    }
}

/// A certificate and its private key, as TLS presents them.
package struct PolicyClientIdentity: @unchecked Sendable {
    // NIOSSL's certificate and key are immutable wrappers of BoringSSL objects.
    package let kid: String
    package let certificateChain: [NIOSSLCertificate]
    package let privateKey: NIOSSLPrivateKey
}
