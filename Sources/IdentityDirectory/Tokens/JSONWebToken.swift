import CryptoExtras
import Foundation
import JOSE
import WireCoding

/// The identity service's own tokens, signed and checked with the system's one JOSE
/// implementation (``RS256``).
package enum JSONWebToken {
    package static func sign(claims: JSONText, with key: SigningKey) throws -> String {
        try RS256.sign(claims: claims.utf8, keyID: key.kid, with: key.signer)
    }

    /// Verifies an RS256 token against `keys` and checks its claims against `policy`: the
    /// claims, or nil. For our own tokens (`id_token_hint` at logout, Graph bearer tokens).
    package static func verify(_ token: String, keys: [SigningKey], policy: ClaimPolicy, now: Date) -> JWTClaims? {
        verify(token, publicKeys: keys.map { ($0.kid, $0.privateKey.publicKey) }, policy: policy, now: now)
    }

    /// As ``verify(_:keys:policy:now:)``, against public keys by kid (a policy key set's).
    package static func verify(
        _ token: String, publicKeys: [(kid: String, key: _RSA.Signing.PublicKey)], policy: ClaimPolicy, now: Date
    ) -> JWTClaims? {
        guard let parsed = try? RS256.parse(token), let key = publicKeys.first(where: { $0.kid == parsed.keyID }),
            parsed.isSigned(by: key.key), let claims = try? parsed.claims(), (try? policy.check(claims, now: now)) != nil
        else { return nil }
        return claims
    }
}
