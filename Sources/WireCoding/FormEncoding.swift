import Foundation

/// `application/x-www-form-urlencoded` reading and writing (WHATWG URL §5), one place for both.
public enum FormEncoding {
    /// Decodes a form body or query string into (name, value) pairs, keeping repeats in order.
    public static func decode(_ text: String) -> [(String, String)] {
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

    public static func escape(_ value: String) -> String {
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

    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    /// Name → value, the first value of a repeated name winning (what OAuth endpoints and form
    /// handlers read).
    public static func fields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in decode(text) where fields[name] == nil { fields[name] = value }
        return fields
    }
}
