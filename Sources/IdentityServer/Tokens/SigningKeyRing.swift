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
    public let privateKey: _RSA.Signing.PrivateKey
    public let createdAt: Date
    public let activatedAt: Date?
    public let retiredAt: Date?
    /// A retired key stays in the JWKS until every token it signed has expired.
    public let publishUntil: Date?

    public var bits: Int { privateKey.keySizeInBits }
}

/// The service's signing keys, kept in the database so that every instance signs with the same
/// key and a restart keeps tokens valid. The active key signs; keys rotated out stay published
/// (SPEC §2.5). Each instance re-reads the ring at most every `refreshInterval`. Private keys are
/// stored sealed with the data key (the security issue's M-6); rows from before sealing are
/// sealed in place when first read.
public final class SigningKeyRing: Sendable {
    private let database: any Database
    private let dataKey: DataKey
    private let clock: any IdentityClock
    private let keyBits: Int
    private let refreshInterval: TimeInterval
    private let cache = Mutex<(keys: [SigningKey], loadedAt: Date)?>(nil)

    public init(
        database: any Database, dataKey: DataKey, clock: any IdentityClock, keyBits: Int = 2048, refreshInterval: TimeInterval = 60
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
        func key(opening pem: String) -> SigningKey? {
            guard let privateKey = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) else { return nil }
            func date(_ value: Int64?) -> Date? { value.map { Date(timeIntervalSince1970: TimeInterval($0)) } }
            return SigningKey(
                kid: kid, privateKey: privateKey, createdAt: date(createdAt)!, activatedAt: date(activatedAt),
                retiredAt: date(retiredAt), publishUntil: date(publishUntil))
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
            if let key = row.key(opening: pem) { keys.append(key) }
        }
        cache.withLock { $0 = (keys, now) }
        return keys
    }

    /// The key that signs new tokens; creates the first one on first use.
    public func activeKey() async throws -> SigningKey {
        if let key = try await allKeys().first(where: { $0.retiredAt == nil && $0.activatedAt != nil }) {
            return key
        }
        return try await rotate(retiredKeysPublishedFor: 0)
    }

    /// Keys that belong in the JWKS: the active one and retired ones still within their window.
    public func publishedKeys() async throws -> [SigningKey] {
        _ = try await activeKey()
        let now = clock.now
        return try await allKeys().filter { key in
            key.retiredAt == nil || (key.publishUntil.map { $0 > now } ?? false)
        }
    }

    /// Makes a new active key. The previous one keeps verifying for `retiredKeysPublishedFor`
    /// seconds, which should be at least the longest token lifetime.
    @discardableResult
    public func rotate(retiredKeysPublishedFor: TimeInterval = 24 * 3600) async throws -> SigningKey {
        let size: _RSA.Signing.KeySize = keyBits >= 3072 ? .bits3072 : .bits2048
        let privateKey = try _RSA.Signing.PrivateKey(keySize: size)
        let kid = JWKSet.thumbprint(of: privateKey.publicKey)
        let now = clock.now.epochSeconds
        let row = Row(
            kid: kid, privateKeyPem: try dataKey.seal(privateKey.pemRepresentation, context: Row.context(kid: kid)),
            bits: Int64(privateKey.keySizeInBits),
            createdAt: now, activatedAt: now, retiredAt: nil, publishUntil: nil)
        let publishUntil = now + Int64(retiredKeysPublishedFor)
        try await database.transaction { sql in
            try await sql.update("signing_keys").set("retired_at", to: now).set("publish_until", to: publishUntil)
                .where("retired_at", .is, SQLLiteral.null).run()
            try await sql.insert(into: "signing_keys").model(row, with: .snakeCase).run()
        }
        cache.withLock { $0 = nil }
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
        if key.retiredAt == nil { replacement = try await rotate(retiredKeysPublishedFor: 0) }
        let now = clock.now.epochSeconds
        try await database.transaction { sql in
            try await sql.update("signing_keys").set("retired_at", to: now).set("publish_until", to: now - 1)
                .where("kid", .equal, kid).run()
        }
        cache.withLock { $0 = nil }
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

    /// Forgets the cached ring so the next call reads the database.
    public func invalidate() { cache.withLock { $0 = nil } }
}
