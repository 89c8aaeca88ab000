import Crypto
import CryptoExtras
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import TestSupport

/// A stand-in authority for the Task API's tests: a real HTTP server on loopback that serves a
/// discovery document and a JWKS for its own RSA key, and mints tokens with that key (or with
/// whatever an attacker would try).
struct MockAuthority: Sendable {
    let key: _RSA.Signing.PrivateKey
    let kid: String
    var issuer: String
    /// Whether the JWKS still lists the key; a test withdraws it as an operator would.
    let publication: Publication

    final class Publication: Sendable {
        private let withdrawn = Mutex(false)
        private let added = Mutex<[String]>([])
        private let served = Mutex(0)
        var isWithdrawn: Bool { withdrawn.withLock { $0 } }
        func withdraw() { withdrawn.withLock { $0 = true } }
        /// Publishes another key of the authority (a JWK object) beside its own.
        func publish(_ jwk: String) { added.withLock { $0.append(jwk) } }
        var addedKeys: [String] { added.withLock { $0 } }
        /// How many times the JWKS was fetched.
        var fetches: Int { served.withLock { $0 } }
        func countFetch() { served.withLock { $0 += 1 } }
    }

    static let audience = "11111111-2222-3333-4444-555555555555"

    init(issuer: String = "http://issuer.test/\(UUID().uuidString.lowercased())/v2.0/") throws {
        key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        kid = "kid-\(UUID().uuidString.prefix(8))"
        self.issuer = issuer
        publication = Publication()
    }

    /// Another authority publishing the same key under its own issuer (as B2C policies of one
    /// tenant do with per-policy issuers).
    init(sharingKeyWith other: MockAuthority, issuer: String) {
        key = other.key
        kid = other.kid
        self.issuer = issuer
        publication = Publication()
    }

    private init(key: _RSA.Signing.PrivateKey, kid: String, issuer: String, publication: Publication) {
        self.key = key
        self.kid = kid
        self.issuer = issuer
        self.publication = publication
    }

    /// The same authority signing with a new key, which its JWKS lists once `publication.publish(next.jwk)`.
    func nextKey() throws -> MockAuthority {
        MockAuthority(
            key: try _RSA.Signing.PrivateKey(keySize: .bits2048), kid: "kid-\(UUID().uuidString.prefix(8))", issuer: issuer,
            publication: publication)
    }

    static func b64(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// This key as a JWK object.
    var jwk: String {
        let primitives = try! key.publicKey.getKeyPrimitives()
        return
            "{\"kid\":\"\(kid)\",\"use\":\"sig\",\"kty\":\"RSA\",\"e\":\"\(Self.b64(primitives.publicExponent))\",\"n\":\"\(Self.b64(primitives.modulus))\"}"
    }

    var jwks: String { "{\"keys\":[\(jwk)]}" }

    /// Runs the authority on a free port for the duration of `body`, which gets its discovery URL.
    func serve<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        let jwk = self.jwk
        let issuer = self.issuer
        let publication = self.publication
        router.get("auth/jwks") { _, _ in
            publication.countFetch()
            let keys = (publication.isWithdrawn ? [] : [jwk]) + publication.addedKeys
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: "{\"keys\":[\(keys.joined(separator: ","))]}")))
        }
        // The JWKS URL follows the Host the fetcher used, so the port need not be known up front.
        router.get("auth/.well-known/openid-configuration") { request, _ in
            let base = "http://\(request.head.authority ?? "127.0.0.1")"
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: "{\"issuer\":\"\(issuer)\",\"jwks_uri\":\"\(base)/auth/jwks\"}")))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: TestDatabase.logger)
        return try await app.test(.live) { client in
            try await body("http://127.0.0.1:\(client.port!)/auth/.well-known/openid-configuration")
        }
    }

    /// A signed token. `claims` override the defaults (an access token for user `oid`).
    func token(
        oid: String = "user-a", name: String = "Alice", extra: [String: Any] = [:], header: [String: Any]? = nil, removing: [String] = []
    ) -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": issuer, "aud": Self.audience, "exp": now + 3600, "nbf": now - 10, "iat": now - 10, "oid": oid, "sub": oid,
            "name": name, "azp": "client-app", "scp": "tasks.read tasks.write", "ver": "1.0",
        ]
        for (key, value) in extra { claims[key] = value }
        for key in removing { claims.removeValue(forKey: key) }
        let headerJSON = try! JSONSerialization.data(
            withJSONObject: header ?? ["typ": "JWT", "alg": "RS256", "kid": kid], options: [.sortedKeys])
        let payload = try! JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let input = Self.b64(headerJSON) + "." + Self.b64(payload)
        let signature = try! key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5).rawRepresentation
        return input + "." + Self.b64(signature)
    }

    /// The classic RS/HS confusion attack: HS256 with the public key's PEM as the HMAC secret.
    func hmacToken(oid: String = "user-a") -> String {
        let now = Int(Date().timeIntervalSince1970)
        let header = try! JSONSerialization.data(withJSONObject: ["typ": "JWT", "alg": "HS256", "kid": kid], options: [.sortedKeys])
        let payload = try! JSONSerialization.data(
            withJSONObject: ["iss": issuer, "aud": Self.audience, "exp": now + 3600, "oid": oid, "azp": "x"], options: [.sortedKeys])
        let input = Self.b64(header) + "." + Self.b64(payload)
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data(input.utf8), using: SymmetricKey(data: Data(key.publicKey.pemRepresentation.utf8)))
        return input + "." + Self.b64(Data(mac))
    }

    func unsignedToken(oid: String = "user-a") -> String {
        let now = Int(Date().timeIntervalSince1970)
        let header = try! JSONSerialization.data(withJSONObject: ["typ": "JWT", "alg": "none"], options: [.sortedKeys])
        let payload = try! JSONSerialization.data(
            withJSONObject: ["iss": issuer, "aud": Self.audience, "exp": now + 3600, "oid": oid, "azp": "x"], options: [.sortedKeys])
        return Self.b64(header) + "." + Self.b64(payload) + "."
    }
}
