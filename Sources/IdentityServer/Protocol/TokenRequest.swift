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

/// Reads an `application/x-www-form-urlencoded` body (at most the context's upload limit: 413
/// beyond it) merged after the query string, refusing repeated OAuth parameters.
enum FormBody {
    static let singleValued = [
        "grant_type", "code", "client_id", "client_secret", "redirect_uri", "refresh_token", "code_verifier", "username",
        "password", "scope", "state", "nonce", "response_type", "response_mode", "code_challenge",
        "code_challenge_method", "prompt", "csrf_token",
    ]

    static func read(_ request: Request, context: some RequestContext) async throws -> RequestParameters {
        var request = request
        let buffer = try await request.collectBody(upTo: context.maxUploadSize)
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") || buffer.readableBytes == 0 else {
            throw ProtocolFailure.malformedRequest("The request body must be application/x-www-form-urlencoded.")
        }
        guard let text = buffer.getString(at: buffer.readerIndex, length: buffer.readableBytes) else {
            throw ProtocolFailure.malformedRequest("The request body is not valid UTF-8.")
        }
        let form = RequestParameters(pairs: FormEncoding.decode(text))
        try rejectRepeats(form)
        return form
    }

    static func rejectRepeats(_ parameters: RequestParameters) throws {
        for name in singleValued where parameters.count(of: name) > 1 {
            throw ProtocolFailure.repeatedParameter(name)
        }
    }
}
