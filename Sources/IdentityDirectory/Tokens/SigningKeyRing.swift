import Crypto
import CryptoExtras
import Foundation
import JOSE
import SQLKit
import Storage
import Synchronization
import TodoModels
import WireCoding

/// One RS256 signing key. The `kid` is the RFC 7638 thumbprint of the public key, so it is
/// stable, unique and derivable by anyone holding the JWK.
public struct SigningKey: Sendable {
    public let kid: String
    /// Signs with the key; kept across the ring's re-reads, so OpenSSL's copy of the key (Linux)
    /// is made once per key and process.
    public let signer: RS256Signer
    public var privateKey: _RSA.Signing.PrivateKey { signer.privateKey }
    public let createdAt: Date
    /// When it starts signing; a rotated-in key is published before that (pending).
    public let activatedAt: Date?
    /// When it stops signing (its successor's activation); it stays published until `publishUntil`.
    public let retiredAt: Date?
    /// A retired key stays in the JWKS until every token it signed has expired.
    public let publishUntil: Date?

    public var bits: Int { privateKey.keySizeInBits }

    /// Whether it signs at `now`: activated, and not yet retired.
    public func signs(at now: Date) -> Bool {
        (activatedAt.map { $0 <= now } ?? false) && (retiredAt.map { $0 > now } ?? true)
    }

    /// Whether it is in the JWKS at `now`: pending, signing, or retired within its window.
    public func isPublished(at now: Date) -> Bool {
        retiredAt.map { $0 > now } ?? true || (publishUntil.map { $0 > now } ?? false)
    }
}

/// The service's signing keys, kept in the database so that every instance signs with the same
/// key and a restart keeps tokens valid. The active key signs; keys rotated out stay published
/// (SPEC §2.5). A rotation publishes the new key first and signs with it only after a
/// propagation delay, as Entra and B2C roll keys over: by then every instance publishes it
/// (each re-reads the ring every `refreshInterval`) and validators have fetched it, so no
/// valid token is refused (issue 14). Private keys are stored sealed with the data key (the
/// security issue's M-6); rows from before sealing are sealed in place when first read.
public final class SigningKeyRing: Sendable {
    private let database: any Database
    private let dataKey: DataKey
    private let clock: any IdentityClock
    private let keyBits: Int
    private let refreshInterval: TimeInterval
    private let cache = Mutex<(keys: [SigningKey], loadedAt: Date)?>(nil)
    /// How often an instance re-reads the ring: a rotation's delay must be longer.
    public static let refreshInterval: TimeInterval = 10
    /// A rotation's default delay between publishing a key and signing with it: longer than
    /// the ring's refresh and than validators' key-set cache (the Task API's is 5 minutes).
    public static let propagationDelay: TimeInterval = 600

    public init(
        database: any Database, dataKey: DataKey, clock: any IdentityClock, keyBits: Int = 2048,
        refreshInterval: TimeInterval = SigningKeyRing.refreshInterval
    ) {
        self.database = database
        self.dataKey = dataKey
        self.clock = clock
        self.keyBits = keyBits
        self.refreshInterval = refreshInterval
    }

    struct Row: Codable {
        var kid: String
        var privateKeyPem: String
        var bits: Int64
        var createdAt: Int64
        var activatedAt: Int64?
        var retiredAt: Int64?
        var publishUntil: Int64?

        static func context(kid: String) -> String { "signing_keys:\(kid)" }

        /// The key, or nil when the stored PEM does not parse; a key sealed with another data
        /// key is an error, not a missing key (a new one would otherwise be made silently).
        /// `signer`: the one an earlier read made for this kid, kept (the kid is the public key's
        /// thumbprint, so its private key cannot have changed), with OpenSSL's copy of the key.
        func key(opening pem: String, reusing signer: RS256Signer? = nil) -> SigningKey? {
            guard let signer = signer ?? (try? _RSA.Signing.PrivateKey(pemRepresentation: pem)).map(RS256Signer.init) else { return nil }
            func date(_ value: Int64?) -> Date? { value.map { Date(timeIntervalSince1970: TimeInterval($0)) } }
            return SigningKey(
                kid: kid, signer: signer, createdAt: date(createdAt)!, activatedAt: date(activatedAt), retiredAt: date(retiredAt),
                publishUntil: date(publishUntil))
        }
    }

    /// All stored keys, newest first.
    public func allKeys() async throws -> [SigningKey] {
        let now = clock.now
        if let cached = cache.withLock({ $0 }), now.timeIntervalSince(cached.loadedAt) < refreshInterval,
            now >= cached.loadedAt
        {
            return cached.keys
        }
        let rows = try await database.read { sql in
            try await sql.select().columns("*").from("signing_keys").orderBy("created_at", .descending)
                .all(decoding: Row.self, with: .snakeCase)
        }
        let earlier = cache.withLock { $0?.keys } ?? []
        var keys: [SigningKey] = []
        for row in rows {
            let context = Row.context(kid: row.kid)
            let (pem, wasClear) = try dataKey.open(row.privateKeyPem, context: context)
            if wasClear {
                let sealed = try dataKey.seal(pem, context: context)
                try await database.transaction { sql in
                    try await sql.update("signing_keys").set("private_key_pem", to: sealed).where("kid", .equal, row.kid)
                        .where("private_key_pem", .equal, row.privateKeyPem).run()
                }
            }
            if let key = row.key(opening: pem, reusing: earlier.first { $0.kid == row.kid }?.signer) { keys.append(key) }
        }
        cache.withLock { $0 = (keys, now) }
        return keys
    }

    /// The key that signs new tokens (of several, the latest activated); creates the first one
    /// on first use.
    public func activeKey() async throws -> SigningKey {
        let now = clock.now
        let signing = try await allKeys().filter { $0.signs(at: now) }
        if let key = Self.latest(signing) { return key }
        // None signs (a first start): one instance makes the key, the others find it. Made
        // concurrently, each would retire the other's at once and refuse its tokens.
        return try await database.exclusively(key: 72_018) {
            self.invalidate()
            if let key = Self.latest(try await self.allKeys().filter { $0.signs(at: now) }) { return key }
            return try await self.rotate(activateAfter: 0)
        }
    }

    private static func latest(_ keys: [SigningKey]) -> SigningKey? {
        keys.max { ($0.activatedAt!, $0.createdAt) < ($1.activatedAt!, $1.createdAt) }
    }

    /// Keys that belong in the JWKS: pending ones, the active one, and retired ones still
    /// within their window.
    public func publishedKeys() async throws -> [SigningKey] {
        _ = try await activeKey()
        let now = clock.now
        return try await allKeys().filter { $0.isPublished(at: now) }
    }

    /// Makes a new key, published at once and signing after `activateAfter` seconds (0: at
    /// once, for emergencies; validators that cached the key set then refuse its tokens until
    /// they fetch it again). The key signing until then retires at that moment and keeps
    /// verifying for `retiredKeysPublishedFor` seconds more, which should be at least the
    /// longest token lifetime.
    @discardableResult
    public func rotate(activateAfter: TimeInterval = SigningKeyRing.propagationDelay, retiredKeysPublishedFor: TimeInterval = 24 * 3600)
        async throws -> SigningKey
    {
        let size: _RSA.Signing.KeySize = keyBits >= 3072 ? .bits3072 : .bits2048
        let privateKey = try _RSA.Signing.PrivateKey(keySize: size)
        let kid = JWKSet.thumbprint(of: privateKey.publicKey)
        let now = clock.now.epochSeconds
        let activation = now + Int64(max(0, activateAfter).rounded(.up))
        let row = Row(
            kid: kid, privateKeyPem: try dataKey.seal(privateKey.pemRepresentation, context: Row.context(kid: kid)),
            bits: Int64(privateKey.keySizeInBits),
            createdAt: now, activatedAt: activation, retiredAt: nil, publishUntil: nil)
        let publishUntil = activation + Int64(retiredKeysPublishedFor)
        try await database.transaction { sql in
            // Every key still to sign (the active one, a pending one) hands over at the activation.
            try await sql.update("signing_keys").set("retired_at", to: activation).set("publish_until", to: publishUntil)
                .where("retired_at", .is, SQLLiteral.null).run()
            try await sql.update("signing_keys").set("retired_at", to: activation)
                .where("retired_at", .greaterThan, activation).run()
            try await sql.insert(into: "signing_keys").model(row, with: .snakeCase).run()
        }
        forgetAfterCommit()
        return row.key(opening: privateKey.pemRepresentation)!
    }

    /// Withdraws a key at once (a leaked key): it leaves the JWKS and stops verifying here, and
    /// validators drop it at their next key-set fetch. An active key is first replaced by a new one.
    /// - Returns: the new active key when the revoked one was active.
    @discardableResult
    public func revoke(kid: String) async throws -> SigningKey? {
        let keys = try await allKeys()
        guard let key = keys.first(where: { $0.kid == kid }) else { throw KeyRingError.noSuchKey(kid) }
        var replacement: SigningKey?
        if key.signs(at: clock.now) { replacement = try await rotate(activateAfter: 0, retiredKeysPublishedFor: 0) }
        let now = clock.now.epochSeconds
        try await database.transaction { sql in
            if let activation = key.activatedAt, activation > self.clock.now {
                // A pending key: the keys that were to hand over to it sign on, as before the rotation.
                try await sql.update("signing_keys").set("retired_at", to: SQLLiteral.null).set("publish_until", to: SQLLiteral.null)
                    .where("retired_at", .equal, activation.epochSeconds).where("kid", .notEqual, kid).run()
            }
            try await sql.update("signing_keys").set("retired_at", to: now).set("publish_until", to: now - 1)
                .where("kid", .equal, kid).run()
        }
        forgetAfterCommit()
        return replacement
    }

    public enum KeyRingError: Error, Equatable, CustomStringConvertible {
        case noSuchKey(String)
        public var description: String {
            switch self {
            case .noSuchKey(let kid): "no signing key '\(TextRules.printable(kid))'"
            }
        }
    }

    /// Forgets the cached ring now and, inside a change's transaction, again when it ends: a
    /// sign-in between the two would read the old keys back and keep them (or a rolled-back
    /// first key would stay cached).
    private func forgetAfterCommit() {
        database.afterTransaction { [self] in self.cache.withLock { $0 = nil } }
    }

    /// Forgets the cached ring so the next call reads the database.
    public func invalidate() { cache.withLock { $0 = nil } }
}
