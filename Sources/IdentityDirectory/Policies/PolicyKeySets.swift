import Crypto
import CryptoExtras
import Foundation
import JOSE
import SQLKit
import Storage
import TrustFramework
import WireCoding

/// A key of a policy key set (Graph's `trustFrameworkKey`): what may be shown of it. The private
/// part of an RSA key and a secret's value stay sealed in the database and never leave it.
public struct PolicyKey: Sendable, Equatable {
    public var kid: String
    /// `sig` or `enc`.
    public var use: String
    /// `RSA` (generated) or `oct` (an uploaded secret).
    public var kty: String
    /// An RSA key's public modulus and exponent (base64url).
    public var n: String?
    public var e: String?
    public var notBefore: Date?
    public var expires: Date?
    package var createdAt: Date
    /// An uploaded certificate (`uploadPkcs12`): its DER, base64 (Graph's `x5c`).
    public var x5c: String? = nil
}

/// A tenant's policy key set (`B2C_1A_TokenSigningKeyContainer`…), by its id.
public struct PolicyKeySet: Sendable, Equatable {
    public var id: String
    public var keys: [PolicyKey]
}

/// A refused key-set operation, with Graph's status and message.
package struct PolicyKeySetError: Error, Equatable {
    package enum Kind { case notFound, conflict, invalid }
    package var kind: Kind
    package var message: String
}

/// The tenants' policy key sets (SPEC §2.12; Graph beta `trustFramework/keySets`): the keys a
/// custom policy's technical profiles name by `StorageReferenceId`, such as the JWT issuer's
/// `issuer_secret`. Keys are made here (`generateKey`) or uploaded (`uploadSecret`); the active key
/// is the newest one whose `nbf` has passed and whose `exp` has not.
package struct PolicyKeySetLibrary: Sendable {
    let database: any Database
    let dataKey: DataKey
    let clock: any IdentityClock
    let signers = PolicySignerCache()
    let recentSets = PolicyKeySetCache()

    /// B2C prefixes a key set's id with `B2C_1A_` when the request's id lacks it.
    static func normalizedID(_ id: String) -> String { id.uppercased().hasPrefix("B2C_1A_") ? id : "B2C_1A_" + id }

    static func sealingContext(tenantID: UUID, keySet: String, kid: String) -> String {
        "trust_framework_keys:\(tenantID.uuidString.lowercased()):\(keySet.lowercased()):\(kid)"
    }

    package func keySets(tenantID: UUID) async throws -> [PolicyKeySet] {
        let tenant = tenantID.uuidString.lowercased()
        let sets = try await database.rows(
            "SELECT key_set_id FROM trust_framework_key_sets WHERE tenant_id = ? ORDER BY key_set_id_lower", [.text(tenant)])
        let keys = try await database.rows(
            "SELECT key_set_id_lower, kid, use, kty, n, e, nbf, exp, created_at, x5c FROM trust_framework_keys WHERE tenant_id = ? ORDER BY created_at, kid",
            [.text(tenant)])
        return try sets.map { row in
            let id = try row.text("key_set_id")
            return PolicyKeySet(
                id: id,
                keys: try keys.filter { try $0.text("key_set_id_lower") == id.lowercased() }.map { key in
                    PolicyKey(
                        kid: try key.text("kid"), use: try key.text("use"), kty: try key.text("kty"), n: try key.optionalText("n"),
                        e: try key.optionalText("e"), notBefore: try key.optionalInteger("nbf").map { Date(timeIntervalSince1970: TimeInterval($0)) },
                        expires: try key.optionalInteger("exp").map { Date(timeIntervalSince1970: TimeInterval($0)) },
                        createdAt: Date(timeIntervalSince1970: TimeInterval(try key.integer("created_at"))), x5c: try key.optionalText("x5c"))
                })
        }
    }

    package func keySet(tenantID: UUID, id: String) async throws -> PolicyKeySet? {
        let wanted = Self.normalizedID(id).lowercased()
        return try await keySets(tenantID: tenantID).first { $0.id.lowercased() == wanted }
    }

    package func create(tenantID: UUID, id requested: String) async throws -> PolicyKeySet {
        let id = Self.normalizedID(requested)
        guard CustomPolicyID.isValid(id) else {
            throw PolicyKeySetError(kind: .invalid, message: "The key set id '\(requested)' may use letters, digits and underscores only.")
        }
        do {
            try await database.transaction { sql in
                try await sql.raw(
                    """
                    INSERT INTO trust_framework_key_sets (tenant_id, key_set_id_lower, key_set_id, created_at)
                    VALUES (\(bind: tenantID.uuidString.lowercased()), \(bind: id.lowercased()), \(bind: id), \(bind: Int64(clock.now.timeIntervalSince1970)))
                    """
                ).run()
            }
        } catch where database.isUniqueViolation(error) {
            throw PolicyKeySetError(kind: .conflict, message: "The key set '\(id)' already exists.")
        }
        database.afterTransaction { [recentSets] in recentSets.forget() }
        return PolicyKeySet(id: id, keys: [])
    }

    package func delete(tenantID: UUID, id: String) async throws -> Bool {
        let key = Self.normalizedID(id).lowercased()
        let tenant = tenantID.uuidString.lowercased()
        defer { database.afterTransaction { [recentSets] in recentSets.forget() } }
        return try await database.transaction { sql in
            let existing = try await sql.raw(
                "SELECT key_set_id FROM trust_framework_key_sets WHERE tenant_id = \(bind: tenant) AND key_set_id_lower = \(bind: key)"
            ).all()
            try await sql.raw("DELETE FROM trust_framework_keys WHERE tenant_id = \(bind: tenant) AND key_set_id_lower = \(bind: key)").run()
            try await sql.raw("DELETE FROM trust_framework_key_sets WHERE tenant_id = \(bind: tenant) AND key_set_id_lower = \(bind: key)").run()
            return !existing.isEmpty
        }
    }

    /// `generateKey`: a new RSA key (2048 bits) in the set.
    package func generateKey(tenantID: UUID, keySet: String, use: String, kty: String, notBefore: Date?, expires: Date?) async throws -> PolicyKey {
        guard kty.uppercased() == "RSA" else { throw PolicyKeySetError(kind: .invalid, message: "kty must be RSA; '\(kty)' was given.") }
        let privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let (n, e) = JWKSet.components(of: privateKey.publicKey)
        let kid = JWKSet.thumbprint(of: privateKey.publicKey)
        return try await add(
            tenantID: tenantID, keySet: keySet, kid: kid, use: use, kty: "RSA", secret: privateKey.pemRepresentation, n: n, e: e,
            notBefore: notBefore, expires: expires)
    }

    /// `uploadSecret`: a secret (`kty` `oct`) the policy uses, such as a client secret of an
    /// identity provider. Its value is sealed and never shown again.
    package func uploadSecret(tenantID: UUID, keySet: String, use: String, value: String, notBefore: Date?, expires: Date?) async throws -> PolicyKey {
        guard !value.isEmpty, value.utf8.count <= 4096 else {
            throw PolicyKeySetError(kind: .invalid, message: "k must be a secret of 1 to 4096 bytes.")
        }
        return try await add(
            tenantID: tenantID, keySet: keySet, kid: Secrets.randomToken(byteCount: 16), use: use, kty: "oct", secret: value, n: nil,
            e: nil, notBefore: notBefore, expires: expires)
    }

    /// The key in use now, by B2C's rollover rule (policy-keys-overview, "Key rollover"): of the
    /// keys whose `nbf` has passed and whose `exp` has not, the one activated last; a key with no
    /// activation date is the fallback, used only when no dated key is valid.
    package func activeKey(tenantID: UUID, keySet: String) async throws -> PolicyKey? {
        guard let set = try await self.keySet(tenantID: tenantID, id: keySet) else {
            throw PolicyKeySetError(kind: .notFound, message: "The key set '\(keySet)' does not exist.")
        }
        return Self.active(in: set, at: clock.now)
    }

    /// The active key among the set's keys that pass `usable` (a secret's set is asked for its
    /// `oct` keys, a signing set for its RSA signing keys, so a key of another kind added to a set
    /// never becomes the one a profile uses).
    static func active(in set: PolicyKeySet, at now: Date, where usable: (PolicyKey) -> Bool = { _ in true }) -> PolicyKey? {
        let valid = set.keys.filter { usable($0) && ($0.notBefore ?? .distantPast) <= now && now < ($0.expires ?? .distantFuture) }
        let dated = valid.filter { $0.notBefore != nil }
        // `keys` come oldest first (by creation, in whole seconds, then kid): among equal
        // activation dates the later in that order wins.
        let latest = dated.compactMap(\.notBefore).max()
        return dated.last { $0.notBefore == latest } ?? valid.last
    }

    /// The active secret's value (`kty` `oct`: an uploaded secret), opened; nil when the set has
    /// none. Never an RSA key: a profile that sends its secret out (a REST password, a client
    /// secret) must not be able to send the private key that signs the policy's tokens.
    package func activeSecret(tenantID: UUID, keySet: String) async throws -> String? {
        guard let set = try await self.keySet(tenantID: tenantID, id: keySet),
            let key = Self.active(in: set, at: clock.now, where: { $0.kty == "oct" })
        else { return nil }
        return try await openedSecret(tenantID: tenantID, keySet: set.id, kid: key.kid)
    }

    /// The sealed secret of key `kid` of `keySet` (a secret's value, a generated key's PEM, an
    /// uploaded certificate's file), opened; nil when the key is gone.
    func openedSecret(tenantID: UUID, keySet: String, kid: String) async throws -> String? {
        let rows = try await database.rows(
            "SELECT sealed_secret FROM trust_framework_keys WHERE tenant_id = ? AND key_set_id_lower = ? AND kid = ?",
            [.text(tenantID.uuidString.lowercased()), .text(keySet.lowercased()), .text(kid)])
        guard let sealed = try rows.first?.text("sealed_secret") else { return nil }
        return try dataKey.open(sealed, context: Self.sealingContext(tenantID: tenantID, keySet: keySet, kid: kid)).value
    }

    func add(
        tenantID: UUID, keySet: String, kid: String, use: String, kty: String, secret: String, n: String?, e: String?, notBefore: Date?,
        expires: Date?, x5c: String? = nil
    ) async throws -> PolicyKey {
        guard ["sig", "enc"].contains(use) else { throw PolicyKeySetError(kind: .invalid, message: "use must be sig or enc; '\(use)' was given.") }
        if let notBefore, let expires, expires <= notBefore {
            throw PolicyKeySetError(kind: .invalid, message: "exp must be after nbf.")
        }
        guard let set = try await self.keySet(tenantID: tenantID, id: keySet) else {
            throw PolicyKeySetError(kind: .notFound, message: "The key set '\(keySet)' does not exist.")
        }
        let now = clock.now
        let sealed = try dataKey.seal(secret, context: Self.sealingContext(tenantID: tenantID, keySet: set.id, kid: kid))
        let key = PolicyKey(kid: kid, use: use, kty: kty, n: n, e: e, notBefore: notBefore, expires: expires, createdAt: now, x5c: x5c)
        try await database.transaction { sql in
            try await sql.raw(
                """
                INSERT INTO trust_framework_keys (tenant_id, key_set_id_lower, kid, use, kty, sealed_secret, n, e, nbf, exp, created_at, x5c)
                VALUES (\(bind: tenantID.uuidString.lowercased()), \(bind: set.id.lowercased()), \(bind: kid), \(bind: use), \(bind: kty), \(bind: sealed), \(bind: n), \(bind: e),
                        \(bind: notBefore.map { Int64(exactly: $0.timeIntervalSince1970.rounded()) ?? 0 }), \(bind: expires.map { Int64(exactly: $0.timeIntervalSince1970.rounded()) ?? 0 }), \(bind: Int64(now.timeIntervalSince1970)), \(bind: x5c))
                """
            ).run()
        }
        database.afterTransaction { [recentSets] in recentSets.forget() }
        return key
    }

    package init(database: any Database, dataKey: DataKey, clock: any IdentityClock) {
        self.database = database
        self.dataKey = dataKey
        self.clock = clock
    }
}
