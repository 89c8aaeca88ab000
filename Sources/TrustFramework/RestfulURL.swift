import Foundation

/// A REST technical profile's `ServiceUrl` with `SendClaimsIn` `Url` (restful-technical-profile.md):
/// `https://api.example.com/{claim1}/{claim2}?{claim3}={claim4}`, each placeholder an input
/// claim's partner name. "The host name part of the URL cannot contain claims": a placeholder
/// before the path is refused at upload, and each value is percent-encoded as unreserved
/// characters only, so a value cannot add a path segment, a query or a fragment, nor reach the
/// host.
package enum RestfulURL {
    /// Whether a placeholder sits in the scheme or the authority (before the first `/` of the path).
    package static func placeholderBeforePath(_ url: String) -> Bool {
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? Substring(url)
        let authority = afterScheme.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let scheme = url.range(of: "://").map { url[..<$0.lowerBound] } ?? ""
        return authority.contains("{") || authority.contains("}") || scheme.contains("{")
    }

    /// The URL with each placeholder standing for a value, to check the rest of it at upload.
    package static func template(_ url: String) -> String { fill(url) { _ in "x" } }

    /// The URL with each `{name}` replaced by the percent-encoded value of `values` (names
    /// case-insensitive, as claim types are); a name without a value becomes empty.
    package static func filled(_ url: String, values: [String: String]) -> String {
        let lowered = Dictionary(values.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        return fill(url) { name in
            let value = lowered[name.lowercased()] ?? ""
            // `.` and `..` alone are path steps a server resolves: encoded, they are a name.
            if value == "." || value == ".." { return value.replacingOccurrences(of: ".", with: "%2E") }
            return value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
        }
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    private static func fill(_ url: String, _ value: (String) -> String) -> String {
        var result = ""
        var rest = Substring(url)
        while let open = rest.firstIndex(of: "{") {
            result += rest[..<open]
            let after = rest[rest.index(after: open)...]
            guard let close = after.firstIndex(of: "}") else {
                result += rest[open...]
                return result
            }
            result += value(String(after[..<close]))
            rest = after[after.index(after: close)...]
        }
        return result + rest
    }
}
