import Crypto
import CryptoExtras
import Foundation
import JOSE
import Synchronization
import WireCoding

/// The signers of policy keys, made once per key and process: opening a PEM and handing the key
/// to OpenSSL costs more than the signature. A kid is the public key's RFC 7638 thumbprint, so
/// the private key behind a kid cannot change; the cache is keyed by tenant, key set and kid.
package final class PolicySignerCache: Sendable {
    private let signers = Mutex<[String: RS256Signer]>([:])

    func cached(_ key: String) -> RS256Signer? { signers.withLock { $0[key] } }

    func store(_ key: String, _ signer: RS256Signer) {
        signers.withLock { all in
            // Tenants × key sets × rotations stays small, but the cache is never unbounded.
            if all.count >= 256 { all.removeAll() }
            all[key] = signer
        }
    }

    package init() {}
}

extension PolicyKeySetLibrary {
    /// The key that signs a custom policy's tokens now: the active key of `keySet` (the JWT
    /// issuer's `issuer_secret`), which must be an RSA signing key. Throws
    /// ``PolicyKeySetError`` naming what is missing, so the sign-in fails with that reason.
    package func signingKey(tenantID: UUID, keySet: String) async throws -> SigningKey {
        guard let set = try await self.keySet(tenantID: tenantID, id: keySet) else {
            throw PolicyKeySetError(kind: .notFound, message: "The key set '\(keySet)' does not exist.")
        }
        guard let key = Self.active(in: set, at: clock.now) else {
            throw PolicyKeySetError(kind: .notFound, message: "The key set '\(set.id)' has no active key (every key is expired or not yet valid).")
        }
        guard key.kty == "RSA", key.use == "sig" else {
            throw PolicyKeySetError(
                kind: .invalid, message: "The active key of '\(set.id)' is \(key.kty) for \(key.use); signing tokens needs an RSA key for sig.")
        }
        let context = Self.sealingContext(tenantID: tenantID, keySet: set.id, kid: key.kid)
        let signer = try await cachedSigner(context) {
            let rows = try await database.rows(
                "SELECT sealed_secret FROM trust_framework_keys WHERE tenant_id = ? AND key_set_id_lower = ? AND kid = ?",
                [.text(tenantID.uuidString.lowercased()), .text(set.id.lowercased()), .text(key.kid)])
            guard let sealed = try rows.first?.text("sealed_secret") else {
                throw PolicyKeySetError(kind: .notFound, message: "The key '\(key.kid)' of '\(set.id)' was deleted.")
            }
            return RS256Signer(try _RSA.Signing.PrivateKey(pemRepresentation: try dataKey.open(sealed, context: context).value))
        }
        return SigningKey(
            kid: key.kid, signer: signer, createdAt: key.createdAt, activatedAt: key.notBefore ?? key.createdAt, retiredAt: key.expires,
            publishUntil: key.expires)
    }

    /// What a policy signing with `keySet` publishes in its JWKS: every RSA signing key of the set
    /// that has not expired, the ones not yet active included, so that validators know a key
    /// before it signs (B2C's rollover).
    package func publishedKeys(tenantID: UUID, keySet: String) async throws -> [PolicyKey] {
        let now = clock.now
        return try await self.keySet(tenantID: tenantID, id: keySet)?.keys.filter {
            $0.kty == "RSA" && $0.use == "sig" && $0.n != nil && $0.e != nil && now < ($0.expires ?? .distantFuture)
        } ?? []
    }

    private func cachedSigner(_ key: String, make: () async throws -> RS256Signer) async throws -> RS256Signer {
        if let known = signers.cached(key) { return known }
        let made = try await make()
        signers.store(key, made)
        return made
    }
}

extension PolicyKeySetLibrary {
    /// The public halves of every unexpired RSA signing key of the tenant's key sets, by kid:
    /// what verifies a token one of the tenant's custom policies signed (an `id_token_hint`).
    package func verificationKeys(tenantID: UUID) async throws -> [(kid: String, key: _RSA.Signing.PublicKey)] {
        let now = clock.now
        return try await keySets(tenantID: tenantID).flatMap(\.keys).compactMap { key in
            guard key.kty == "RSA", key.use == "sig", now < (key.expires ?? .distantFuture),
                let n = key.n.flatMap(Base64URL.decode), let e = key.e.flatMap(Base64URL.decode),
                let publicKey = try? _RSA.Signing.PublicKey(n: n, e: e)
            else { return nil }
            return (key.kid, publicKey)
        }
    }
}
