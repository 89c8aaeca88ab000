import Crypto
import CryptoExtras
import Foundation
import WireCoding

/// Why a compact JWS was refused before any key was tried.
public enum JWSError: Error, Equatable, Sendable {
    case malformed(String)
    case unsupportedAlgorithm(String)
    case missingKeyID
    /// The signature is not the one the key makes (``SharedSecretJWS``; RS256 callers ask
    /// ``RS256/UnverifiedToken/isSigned(by:)``).
    case signatureInvalid
}

/// RS256 JSON Web Signatures in compact serialisation (RFC 7515 §7.1): the only algorithm B2C and
/// Entra sign with, and the only one this system signs or accepts with a public key (HMAC only
/// where a tenant uploaded a shared secret for it: ``SharedSecretJWS``). The one JOSE implementation
/// of the system: the identity service signs and checks its own tokens with it, the Task API and
/// Graph `/me` verify bearer tokens with it.
public enum RS256 {
    /// A token split and decoded, its signature not yet checked.
    public struct UnverifiedToken: Sendable {
        public let keyID: String
        let signingInput: Data
        let signature: Data
        let payload: Data

        /// Whether `key` made the signature (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 §3.3).
        public func isSigned(by key: _RSA.Signing.PublicKey) -> Bool {
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: signingInput, padding: .insecurePKCS1v1_5)
        }

        /// The claims, for a token whose signature checked out.
        public func claims() throws(JWSError) -> JWTClaims {
            guard let claims = JWTClaims(payload: payload) else { throw .malformed("payload") }
            return claims
        }
    }

    /// Splits and decodes `token`. RFC 8725 §2.1/§3.1: exactly RS256 is accepted, so `none` and
    /// HMAC (whose "secret" an attacker would set to a public key) never reach verification; a
    /// `crit` header names extensions this implementation does not understand (RFC 7515 §4.1.11).
    ///
    /// `kid` is required unless `requiringKeyID` is false (RFC 7515 makes it optional; an upstream
    /// provider's token may lack it, and then its ``UnverifiedToken/keyID`` is empty).
    public static func parse(_ token: String, requiringKeyID: Bool = true) throws(JWSError) -> UnverifiedToken {
        let parts = try CompactJWS(token, accepting: ["RS256"])
        let keyID = parts.header["kid"] as? String ?? ""
        guard !keyID.isEmpty || !requiringKeyID else { throw .missingKeyID }
        return UnverifiedToken(keyID: keyID, signingInput: parts.signingInput, signature: parts.signature, payload: parts.payload)
    }

    /// Signs `claims` (a JSON object's UTF-8 text, written in the caller's claim order). The header is
    /// exactly `{"typ":"JWT","alg":"RS256","kid":"…"}` with no `x5t`, because passport-azure-ad
    /// looks a key up by `x5t` first and would miss (https://github.com/AzureAD/passport-azure-ad/blob/dev/lib/bearerstrategy.js#L309-L316 item 4).
    public static func sign(claims: [UInt8], keyID: String, with signer: RS256Signer) throws -> String {
        var header = Array(#"{"typ":"JWT","alg":"RS256","kid":"#.utf8)
        JSONEscaping.appendQuoted(keyID, to: &header)
        header.append(UInt8(ascii: "}"))
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try signer.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }
}

/// A compact JWS split and decoded (RFC 7515 §7.1), its `alg` one of those the caller accepts
/// and no `crit` header (extensions this implementation does not understand, §4.1.11).
struct CompactJWS {
    let header: [String: Any]
    let algorithm: String
    let signingInput: Data
    let signature: Data
    let payload: Data

    init(_ token: String, accepting algorithms: Set<String>) throws(JWSError) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("not a JWS compact serialization") }
        guard let headerData = Base64URL.decode(String(parts[0])),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any]
        else { throw .malformed("header") }
        let algorithm = header["alg"] as? String ?? ""
        guard algorithms.contains(algorithm) else { throw .unsupportedAlgorithm(String(algorithm.prefix(16))) }
        guard header["crit"] == nil else { throw .malformed("unsupported critical header") }
        guard let signature = Base64URL.decode(String(parts[2])), let payload = Base64URL.decode(String(parts[1])) else {
            throw .malformed("encoding")
        }
        self.header = header
        self.algorithm = algorithm
        self.signature = signature
        self.payload = payload
        signingInput = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
    }
}

/// RSA keys as JSON Web Keys (RFC 7517 §4, RFC 7518 §6.3): `kty`, `n`, `e`, `kid`.
public enum JWKSet {
    /// The signing keys of a JWKS document, by `kid`: RSA keys for signatures only; others, and
    /// keys that do not parse, are left out.
    public static func signingKeys(from document: Data) -> [String: _RSA.Signing.PublicKey] {
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        for (kid, key) in signingKeyList(from: document) { if let kid { keys[kid] = key } }
        return keys
    }

    /// Every RSA signing key of a JWKS document in its order, with its `kid` where it has one:
    /// `use` `sig` or absent, `alg` RS256 or absent.
    public static func signingKeyList(from document: Data) -> [(kid: String?, key: _RSA.Signing.PublicKey)] {
        let jwks = try? JSONSerialization.jsonObject(with: document) as? [String: Any]
        var keys: [(kid: String?, key: _RSA.Signing.PublicKey)] = []
        for jwk in jwks?["keys"] as? [[String: Any]] ?? [] {
            guard jwk["kty"] as? String == "RSA", (jwk["use"] as? String ?? "sig") == "sig", (jwk["alg"] as? String ?? "RS256") == "RS256",
                let n = (jwk["n"] as? String).flatMap(Base64URL.decode), let e = (jwk["e"] as? String).flatMap(Base64URL.decode),
                let key = try? _RSA.Signing.PublicKey(n: n, e: e)
            else { continue }
            keys.append((jwk["kid"] as? String, key))
        }
        return keys
    }

    /// The key's JWK thumbprint (RFC 7638 §3): SHA-256 of the required members in lexicographic
    /// order without whitespace, base64url. Used as `kid`.
    public static func thumbprint(of key: _RSA.Signing.PublicKey) -> String {
        let (n, e) = components(of: key)
        return Base64URL.encode(Data(SHA256.hash(data: Data(#"{"e":"\#(e)","kty":"RSA","n":"\#(n)"}"#.utf8))))
    }

    /// `n` and `e` of `key`, base64url without padding, as a JWK carries them.
    public static func components(of key: _RSA.Signing.PublicKey) -> (n: String, e: String) {
        let primitives = try? key.getKeyPrimitives()
        return (Base64URL.encode(primitives?.modulus ?? Data()), Base64URL.encode(primitives?.publicExponent ?? Data()))
    }
}
