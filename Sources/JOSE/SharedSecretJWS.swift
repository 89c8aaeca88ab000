import Crypto
import Foundation
import WireCoding

/// HMAC JSON Web Signatures (RFC 7518 §3.2: `HS256`, `HS384`, `HS512`), for one use only: a
/// token an app signed with a secret the tenant uploaded for it, as B2C's symmetric
/// `id_token_hint` is (id-token-hint.md, "Issue a token with symmetric keys"). This system never
/// signs with HMAC, and ``RS256/parse(_:requiringKeyID:)`` never accepts it, so an RSA public key
/// can never stand in for a secret (RFC 8725 §2.1): a caller reaches HMAC only by holding a
/// shared secret.
public enum SharedSecretJWS {
    /// The HMAC algorithms accepted. `none` and every public-key algorithm are refused.
    public static let algorithms: Set<String> = ["HS256", "HS384", "HS512"]

    /// The claims of `token` when `secret` made its signature; throws otherwise. The comparison
    /// is the MAC's own constant-time check.
    public static func verify(_ token: String, secret: [UInt8]) throws(JWSError) -> JWTClaims {
        let parts = try CompactJWS(token, accepting: algorithms)
        guard !secret.isEmpty else { throw .signatureInvalid }
        let (algorithm, signature, signingInput, payload) = (parts.algorithm, parts.signature, parts.signingInput, parts.payload)
        let key = SymmetricKey(data: secret)
        let valid: Bool
        switch algorithm {
        case "HS384": valid = HMAC<SHA384>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key)
        case "HS512": valid = HMAC<SHA512>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key)
        default: valid = HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key)
        }
        guard valid else { throw .signatureInvalid }
        guard let claims = JWTClaims(payload: payload) else { throw .malformed("payload") }
        return claims
    }
}
