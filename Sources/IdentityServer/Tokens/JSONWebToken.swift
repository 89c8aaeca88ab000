import CryptoExtras
import Foundation
import WireCoding

/// JWS compact serialisation with RS256, the only algorithm B2C uses. The header is exactly
/// `{"typ":"JWT","alg":"RS256","kid":"…"}` with no `x5t`, because passport-azure-ad looks a key
/// up by `x5t` first and would miss (research/b2c-protocol.md §0 item 4).
enum JSONWebToken {
    static func sign(claims: JSONText, with key: SigningKey) throws -> String {
        let header = JSONText.object([("typ", .string("JWT")), ("alg", .string("RS256")), ("kid", .string(key.kid))])
        let signingInput = Base64URL.encode(header.utf8) + "." + Base64URL.encode(claims.utf8)
        let input = Data(signingInput.utf8)
        let signature = try key.privateKey.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Verifies an RS256 token against `keys` and returns its claims. Used for our own tokens
    /// only (`id_token_hint` at logout and Graph `/me` bearer tokens); time checks are the caller's.
    static func verify(_ token: String, keys: [SigningKey]) -> [String: Any]? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(String(parts[0])),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            header["alg"] as? String == "RS256", let kid = header["kid"] as? String,
            let key = keys.first(where: { $0.kid == kid }),
            let signature = Base64URL.decode(String(parts[2])),
            let payloadData = Base64URL.decode(String(parts[1]))
        else { return nil }
        let input = Data("\(parts[0]).\(parts[1])".utf8)
        guard
            key.privateKey.publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: input, padding: .insecurePKCS1v1_5)
        else { return nil }
        return try? JSONSerialization.jsonObject(with: payloadData) as? [String: Any]
    }
}
