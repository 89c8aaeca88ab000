import Crypto
import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import WireCoding

/// RFC 7636 (PKCE) verification at the token endpoint.
enum PKCE {
    static func verify(verifier: String?, challenge: String?, method: CodeChallengeMethod?) throws {
        guard let challenge else {
            // RFC 9700 §2.1.1: a verifier without a challenge is a downgrade attempt.
            if verifier != nil { throw ProtocolFailure.verifierInvalid }
            return
        }
        guard let verifier, isWellFormedVerifier(verifier) else { throw ProtocolFailure.verifierInvalid }
        let computed: String
        switch method ?? .plain {
        case .s256: computed = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
        case .plain: computed = verifier
        }
        guard Secrets.constantTimeEquals(computed, challenge) else { throw ProtocolFailure.verifierMismatch }
    }

    /// RFC 7636 §4.1: 43–128 characters of [A-Z] [a-z] [0-9] "-" "." "_" "~".
    static func isWellFormedVerifier(_ value: String) -> Bool {
        (43...128).contains(value.count)
            && value.unicodeScalars.allSatisfy {
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-._~".unicodeScalars.contains($0))
            }
    }

    /// A challenge has the same alphabet; S256 challenges are exactly 43 characters.
    static func isWellFormedChallenge(_ value: String, method: CodeChallengeMethod) -> Bool {
        if method == .s256 { return value.count == 43 && isWellFormedVerifier(value) }
        return isWellFormedVerifier(value)
    }
}

/// `Authorization: Basic` client credentials, each part form-encoded (RFC 6749 §2.3.1).
struct BasicCredentials {
    let user: String
    let password: String

    init?(header: String?) {
        guard let header, header.count > 6, header.prefix(6).lowercased() == "basic " else { return nil }
        guard let data = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        // RFC 6749 §2.3.1: the client id and secret are form-encoded before Basic encoding.
        user = FormEncoding.unescape(text[..<colon])
        password = FormEncoding.unescape(text[text.index(after: colon)...])
    }
}

