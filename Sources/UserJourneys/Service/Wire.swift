import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import WireCoding

extension Response {
    /// A JSON response from ordered JSON text.
    package static func json(_ body: JSONText, status: HTTPResponse.Status = .ok, noStore: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if noStore {
            // RFC 6749 §5.1: token responses must not be cached.
            headers[.cacheControl] = "no-store"
            headers[HTTPField.Name("Pragma")!] = "no-cache"
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body.utf8)))
    }

    /// An HTML page. Pages are never cached, never framed and load nothing from elsewhere.
    package static func html(_ body: String, status: HTTPResponse.Status = .ok, scriptNonce: String? = nil) -> Response {
        let script = scriptNonce.map { "'nonce-\($0)'" } ?? "'none'"
        let headers: HTTPFields = [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            .contentSecurityPolicy:
                "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action *; frame-ancestors 'none'; base-uri 'none'; script-src \(script)",
            HTTPField.Name("X-Frame-Options")!: "DENY",
            HTTPField.Name("Referrer-Policy")!: "no-referrer",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    package static func redirecting(to location: String, status: HTTPResponse.Status = .found) -> Response {
        Response(status: status, headers: [.location: location, .cacheControl: "no-store"])
    }
}

/// HTML text escaping for the few strings written without a template.
package enum HTMLText {
    package static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}

/// Sends protocol results to an app's redirect URI in the requested response mode. Errors and
/// successes share it, so a code and an `access_denied` travel exactly the same way.
package enum RedirectResponder {
    static func respond(
        redirectURI: String, mode: ResponseMode, parameters: [(String, String)]
    ) -> Response {
        switch mode {
        case .query, .fragment:
            var location = redirectURI
            let encoded = FormEncoding.encode(parameters)
            if mode == .query {
                location += (redirectURI.contains("?") ? "&" : "?") + encoded
            } else {
                location += "#" + encoded
            }
            return .redirecting(to: location)
        case .formPost:
            // OAuth 2.0 Form Post Response Mode §2: an auto-submitting form; the button keeps it
            // working without JavaScript.
            let nonce = Secrets.randomToken(byteCount: 16)
            let fields = parameters.map {
                "<input type=\"hidden\" name=\"\(HTMLText.escape($0.0))\" value=\"\(HTMLText.escape($0.1))\">"
            }.joined(separator: "\n")
            let html = """
                <!DOCTYPE html>
                <html lang="en"><head><meta charset="utf-8"><title>Continue</title>
                <meta name="viewport" content="width=device-width, initial-scale=1"></head>
                <body><form method="post" action="\(HTMLText.escape(redirectURI))" id="response">
                \(fields)
                <noscript><p>Press Continue to return to the application.</p></noscript>
                <button type="submit">Continue</button></form>
                <script nonce="\(nonce)">document.getElementById('response').submit();</script>
                </body></html>
                """
            return .html(html, scriptNonce: nonce)
        }
    }

    /// A B2C error to the redirect URI: `error`, `error_description` (with correlation id and
    /// timestamp) and the app's `state`.
    ///
    /// On the Entra face the same error carries Entra's `AADSTS` description and its
    /// `error_uri` (``EntraError``), as Entra's redirects do.
    package static func error(
        _ error: ProtocolFailure, redirectURI: String, mode: ResponseMode, state: String?, correlationID: String, now: Date,
        face: ProtocolFace = .b2c, origin: String = ""
    ) -> Response {
        var parameters = face.dialect.redirectParameters(error, correlationID: correlationID, now: now, origin: origin)
        if let state { parameters.append(("state", state)) }
        return respond(redirectURI: redirectURI, mode: mode, parameters: parameters)
    }
}
