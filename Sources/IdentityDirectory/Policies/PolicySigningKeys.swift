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

/// The key sets sign-ins read (a policy's signing set, its JWKS), kept for a few seconds: a
/// sign-in on a custom policy reads its set at the `SendClaims` step and again at the token
/// endpoint, and each read is two queries over the tenant's sets. Writes through this process
/// drop the cache; another instance's writes are seen within ``lifetime`` (as the signing key
/// ring's are). Which key is active is decided at each use, so a dated key takes over on time.
package final class PolicyKeySetCache: Sendable {
    static let lifetime: TimeInterval = 10
    private let sets = Mutex<[String: (set: PolicyKeySet?, loadedAt: Date)]>([:])

    func cached(_ key: String, now: Date) -> PolicyKeySet?? {
        guard let entry = sets.withLock({ $0[key] }), now >= entry.loadedAt, now.timeIntervalSince(entry.loadedAt) < Self.lifetime else {
            return nil
        }
        return .some(entry.set)
    }

    func store(_ key: String, _ set: PolicyKeySet?, now: Date) {
        sets.withLock { all in
            if all.count >= 1024 { all.removeAll() }
            all[key] = (set, now)
        }
    }

    func forget() { sets.withLock { $0.removeAll() } }

    package init() {}
}

extension PolicyKeySetLibrary {
    /// `keySet(tenantID:id:)` through ``PolicyKeySetCache``, for what sign-ins read.
    func recentKeySet(tenantID: UUID, id: String) async throws -> PolicyKeySet? {
        let key = tenantID.uuidString.lowercased() + ":" + Self.normalizedID(id).lowercased()
        let now = clock.now
        if let known = recentSets.cached(key, now: now) { return known }
        let set = try await keySet(tenantID: tenantID, id: id)
        recentSets.store(key, set, now: now)
        return set
    }

    /// The key that signs a custom policy's tokens now: the active key of `keySet` (the JWT
    /// issuer's `issuer_secret`), which must be an RSA signing key. Throws
    /// ``PolicyKeySetError`` naming what is missing, so the sign-in fails with that reason.
    package func signingKey(tenantID: UUID, keySet: String) async throws -> SigningKey {
        guard let set = try await recentKeySet(tenantID: tenantID, id: keySet) else {
            throw PolicyKeySetError(kind: .notFound, message: "The key set '\(keySet)' does not exist.")
        }
        guard let key = Self.active(in: set, at: clock.now, where: Self.signs) else {
            throw PolicyKeySetError(
                kind: .notFound, message: "The key set '\(set.id)' has no active RSA signing key (none, or every one expired or not yet valid).")
        }
        let context = Self.sealingContext(tenantID: tenantID, keySet: set.id, kid: key.kid)
        let signer = try await cachedSigner(context) {
            guard let pem = try await openedSecret(tenantID: tenantID, keySet: set.id, kid: key.kid) else {
                throw PolicyKeySetError(kind: .notFound, message: "The key '\(key.kid)' of '\(set.id)' was deleted.")
            }
            return RS256Signer(try _RSA.Signing.PrivateKey(pemRepresentation: pem))
        }
        return SigningKey(
            kid: key.kid, signer: signer, createdAt: key.createdAt, activatedAt: key.notBefore ?? key.createdAt, retiredAt: key.expires,
            publishUntil: key.expires)
    }

    /// Whether a key can sign tokens: an RSA key for `sig` with its public half known.
    /// A certificate (`uploadPkcs12`) is for TLS client authentication only.
    static func signs(_ key: PolicyKey) -> Bool { key.kty == "RSA" && key.use == "sig" && key.n != nil && key.e != nil && key.x5c == nil }

    /// What a policy signing with `keySet` publishes in its JWKS: every RSA signing key of the set
    /// that has not expired, the ones not yet active included, so that validators know a key
    /// before it signs (B2C's rollover).
    package func publishedKeys(tenantID: UUID, keySet: String) async throws -> [PolicyKey] {
        let now = clock.now
        return try await recentKeySet(tenantID: tenantID, id: keySet)?.keys.filter { Self.signs($0) && now < ($0.expires ?? .distantFuture) } ?? []
    }

    private func cachedSigner(_ key: String, make: () async throws -> RS256Signer) async throws -> RS256Signer {
        if let known = signers.cached(key) { return known }
        let made = try await make()
        signers.store(key, made)
        return made
    }
}

extension PolicyKeySetLibrary {
    /// The public half of the unexpired signing key `kid` of `keySet`, if it has one: what
    /// verifies a token the policy signing with that set issued (an `id_token_hint`).
    package func verificationKey(tenantID: UUID, keySet: String, kid: String) async throws -> _RSA.Signing.PublicKey? {
        guard let key = try await publishedKeys(tenantID: tenantID, keySet: keySet).first(where: { $0.kid == kid }),
            let n = key.n.flatMap(Base64URL.decode), let e = key.e.flatMap(Base64URL.decode)
        else { return nil }
        return try? _RSA.Signing.PublicKey(n: n, e: e)
    }
}

/// What a technical profile's `CryptographicKeys/Key` needs of the key set it names, by its
/// `Id`: the JWT issuer's `issuer_secret` an RSA signing key; a secret the profile sends out
/// (`client_secret`, a REST API's credentials) an uploaded secret, never an RSA key, whose
/// private half must not leave; any other key, a key. A kind is written `kty:use`.
package enum PolicyKeyKinds {
    static let secretKeys: Set<String> = [
        "client_secret", "BasicAuthenticationUsername", "BasicAuthenticationPassword", "BearerAuthenticationToken",
    ]

    static func kind(kty: String, use: String) -> String { "\(kty):\(use)" }

    static func needed(by keyID: String) -> (accepts: (Set<String>) -> Bool, description: String) {
        if keyID == "issuer_secret" { return ({ $0.contains("RSA:sig") }, "RSA signing key (generateKey, use sig)") }
        if secretKeys.contains(keyID) { return ({ kinds in kinds.contains { $0.hasPrefix("oct:") } }, "secret (uploadSecret)") }
        if keyID == "ClientCertificate" { return ({ kinds in kinds.contains { $0.hasPrefix("x509:") } }, "certificate (uploadPkcs12)") }
        return ({ !$0.isEmpty }, "key")
    }
}
