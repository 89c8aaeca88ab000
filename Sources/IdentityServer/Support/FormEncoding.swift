import Foundation

/// `application/x-www-form-urlencoded` reading and writing (WHATWG URL §5), one place for both.
enum FormEncoding {
    /// Decodes a form body or query string into (name, value) pairs, keeping repeats in order.
    static func decode(_ text: String) -> [(String, String)] {
        guard !text.isEmpty else { return [] }
        return text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = unescape(parts[0])
            let value = parts.count > 1 ? unescape(parts[1]) : ""
            return (name, value)
        }
    }

    private static func unescape(_ part: Substring) -> String {
        let spaced = part.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }

    /// Characters left as they are; everything else is percent-encoded and space becomes `+`.
    private static let unreserved: CharacterSet = {
        var set = CharacterSet()
        set.insert(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._*")
        return set
    }()

    static func escape(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            let scalar = Unicode.Scalar(byte)
            if byte == 0x20 {
                out += "+"
            } else if byte < 0x80, unreserved.contains(scalar) {
                out.unicodeScalars.append(scalar)
            } else {
                // B2C writes lowercase escapes (`%3a`, `%0d%0a`; research/b2c-protocol.md §4.1).
                out += String(format: "%%%02x", byte)
            }
        }
        return out
    }

    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }
}

/// The parameters of a request: query or form, first value wins, names case-sensitive.
public struct RequestParameters: Sendable {
    public private(set) var pairs: [(String, String)]

    public init(pairs: [(String, String)]) { self.pairs = pairs }
    init(query: String?) { self.pairs = FormEncoding.decode(query ?? "") }

    public subscript(_ name: String) -> String? {
        pairs.first { $0.0 == name }?.1
    }

    /// A parameter that must not be repeated (RFC 6749 §3.1: "Request and response parameters
    /// MUST NOT be included more than once").
    func count(of name: String) -> Int { pairs.filter { $0.0 == name }.count }

    /// The value if present and not empty.
    func nonEmpty(_ name: String) -> String? {
        guard let value = self[name], !value.isEmpty else { return nil }
        return value
    }

    func merging(_ other: RequestParameters) -> RequestParameters {
        RequestParameters(pairs: pairs + other.pairs)
    }
}
