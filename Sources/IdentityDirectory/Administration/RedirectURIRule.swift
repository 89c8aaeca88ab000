import Foundation
import TodoModels

/// The redirect URIs an app registration takes, as B2C's app registrations check them: an
/// absolute URI of at most 256 characters, no fragment (RFC 6749 §3.1.2) and no wildcard; `https`,
/// or `http` on a loopback host only; a custom scheme (`msauth.com.contoso.app://auth`) or
/// `urn:ietf:wg:oauth:2.0:oob` only for a public client (a native app).
public enum RedirectURIRule {
    public static let maximumLength = 256
    public static let maximumCount = 256

    /// Why B2C would refuse `uri` for an app of `kind`; nil when it takes it.
    public static func problem(with uri: String, kind: ClientKind) -> String? {
        let shown = "'\(TextRules.printable(String(uri.prefix(80))))'"
        guard !uri.isEmpty, uri.count <= maximumLength else { return "A redirect URI is 1 to \(maximumLength) characters." }
        guard uri.allSatisfy({ $0.isASCII && !$0.isWhitespace && !($0.asciiValue.map { $0 < 0x20 || $0 == 0x7F } ?? true) }) else {
            return "The redirect URI \(shown) has spaces, controls or characters outside ASCII."
        }
        guard !uri.contains("*") else { return "The redirect URI \(shown) has a wildcard, which B2C does not take." }
        // Browsers read `\` as `/` in an http URL: `http://evil.example\@localhost` goes to
        // evil.example, where a URL parser sees user `evil.example\` at localhost.
        guard !uri.contains("\\") else { return "The redirect URI \(shown) has a backslash." }
        guard !uri.contains("#") else { return "The redirect URI \(shown) has a fragment (RFC 6749 §3.1.2)." }
        if uri == "urn:ietf:wg:oauth:2.0:oob" {
            return kind == .public ? nil : "urn:ietf:wg:oauth:2.0:oob is for public clients (native apps) only."
        }
        guard let parts = URLComponents(string: uri), let scheme = parts.scheme?.lowercased() else {
            return "The redirect URI \(shown) is not an absolute URI."
        }
        guard parts.user == nil, parts.password == nil else { return "The redirect URI \(shown) has a user name or password in it." }
        switch scheme {
        case "https":
            guard parts.host?.isEmpty == false else { return "The redirect URI \(shown) has no host." }
            return nil
        case "http":
            let host = (parts.host ?? "").lowercased()
            return ["localhost", "127.0.0.1", "[::1]", "::1"].contains(host)
                ? nil : "The redirect URI \(shown) uses http, which B2C takes for localhost only: use https."
        case "javascript", "data", "file", "vbscript":
            return "The redirect URI \(shown) has a scheme no app may use."
        default:
            return kind == .public ? nil : "A custom scheme (\(shown)) is for public clients (native apps) only."
        }
    }
}
