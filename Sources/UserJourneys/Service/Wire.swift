import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import ServerSupport
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

    /// An HTML page. Pages are never cached, never framed and load nothing from elsewhere; their
    /// forms post only to this service and `formTargets` (``FormActionSources``).
    package static func html(
        _ body: String, status: HTTPResponse.Status = .ok, scriptNonce: String? = nil, formTargets: [String] = []
    ) -> Response {
        let script = scriptNonce.map { "'nonce-\($0)'" } ?? "'none'"
        let formAction = (["'self'"] + FormActionSources.sources(formTargets)).joined(separator: " ")
        let headers: HTTPFields = [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            .contentSecurityPolicy:
                "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action \(formAction); frame-ancestors 'none'; base-uri 'none'; script-src \(script)",
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

/// The sources of a page's CSP `form-action`, beside `'self'`. Chromium applies `form-action` to
/// the redirects that follow a form's POST as well (CSP Level 2 §7.10), so a page whose form ends
/// at the app's redirect URI or at an identity provider names their origins; nothing else may
/// receive what its forms hold, whatever markup got into the page.
package enum FormActionSources {
    /// A source expression for each URL: `scheme://host[:port]`, or `scheme:` for an app's own
    /// scheme (`msauth.com.example.app://auth`); nothing for what is not a URL.
    package static func sources(_ urls: [String]) -> [String] {
        var seen = Set<String>()
        return urls.compactMap(source).filter { seen.insert($0).inserted }
    }

    static func source(_ url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme.unicodeScalars.allSatisfy({ schemeCharacters.contains($0) }), scheme.first?.isLetter == true
        else { return nil }
        guard scheme == "http" || scheme == "https" else { return scheme == "javascript" || scheme == "data" ? nil : scheme + ":" }
        guard let host = components.host?.lowercased(), !host.isEmpty, host.unicodeScalars.allSatisfy({ hostCharacters.contains($0) })
        else { return nil }
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(bracketed)" + (components.port.map { ":\($0)" } ?? "")
    }

    private static let schemeCharacters = Set("abcdefghijklmnopqrstuvwxyz0123456789+-.".unicodeScalars)
    private static let hostCharacters = Set("abcdefghijklmnopqrstuvwxyz0123456789-.:[]".unicodeScalars)
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
                "<input type=\"hidden\" name=\"\(MarkupTemplates.escape($0.0))\" value=\"\(MarkupTemplates.escape($0.1))\">"
            }.joined(separator: "\n")
            let html = """
                <!DOCTYPE html>
                <html lang="en"><head><meta charset="utf-8"><title>Continue</title>
                <meta name="viewport" content="width=device-width, initial-scale=1"></head>
                <body><form method="post" action="\(MarkupTemplates.escape(redirectURI))" id="response">
                \(fields)
                <noscript><p>Press Continue to return to the application.</p></noscript>
                <button type="submit">Continue</button></form>
                <script nonce="\(nonce)">document.getElementById('response').submit();</script>
                </body></html>
                """
            return .html(html, scriptNonce: nonce, formTargets: [redirectURI])
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
