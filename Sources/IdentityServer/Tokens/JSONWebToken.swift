import Foundation
import JOSE

/// The identity service's own tokens, signed and checked with the system's one JOSE
/// implementation (``RS256``).
enum JSONWebToken {
    static func sign(claims: JSONText, with key: SigningKey) throws -> String {
        try RS256.sign(claims: claims.utf8, keyID: key.kid, with: key.signer)
    }

    /// Verifies an RS256 token against `keys` and returns its claims. Used for our own tokens
    /// only (`id_token_hint` at logout and Graph `/me` bearer tokens); time checks are the caller's.
    static func verify(_ token: String, keys: [SigningKey]) -> [String: Any]? {
        guard let parsed = try? RS256.parse(token), let key = keys.first(where: { $0.kid == parsed.keyID }),
            parsed.isSigned(by: key.privateKey.publicKey)
        else { return nil }
        return try? parsed.claims()
    }
}
