import Crypto
import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import WireCoding

/// Reads an `application/x-www-form-urlencoded` body (at most the context's upload limit: 413
/// beyond it) merged after the query string, refusing repeated OAuth parameters.
package enum FormBody {
    static let singleValued = [
        "grant_type", "code", "client_id", "client_secret", "redirect_uri", "refresh_token", "code_verifier", "username",
        "password", "scope", "state", "nonce", "response_type", "response_mode", "code_challenge",
        "code_challenge_method", "prompt", "csrf_token",
    ]

    /// - Parameter limit: the most bytes read (the context's upload limit unless given).
    package static func read(_ request: Request, context: some RequestContext, upTo limit: Int? = nil) async throws -> RequestParameters {
        var request = request
        let buffer = try await request.collectBody(upTo: limit ?? context.maxUploadSize)
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

    package static func rejectRepeats(_ parameters: RequestParameters) throws {
        for name in singleValued where parameters.count(of: name) > 1 {
            throw ProtocolFailure.repeatedParameter(name)
        }
    }
}
