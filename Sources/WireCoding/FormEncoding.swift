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

    /// The URL Standard's application/x-www-form-urlencoded parsing of one name or value
    /// (https://url.spec.whatwg.org/#urlencoded-parsing): `+` is a space, `%XX` its byte, a `%`
    /// not followed by two hex digits stays as it is, and bytes that are not UTF-8 become U+FFFD,
    /// as browsers and Python's `parse_qsl` read them. On bytes: Foundation's
    /// `replacingOccurrences` and `removingPercentEncoding` went through NSString for every field
    /// of every token request (issue 13's refresh profile).
    public static func unescape(_ part: Substring) -> String {
        let utf8 = part.utf8
        guard utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(part) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            index = utf8.index(after: index)
            if byte == UInt8(ascii: "%"), index != utf8.endIndex, utf8.index(after: index) != utf8.endIndex,
                let high = Hex.value(utf8[index]), let low = Hex.value(utf8[utf8.index(after: index)])
            {
                bytes.append(high << 4 | low)
                index = utf8.index(index, offsetBy: 2)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
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
                // B2C writes lowercase escapes (`%3a`, `%0d%0a`; https://learn.microsoft.com/azure/active-directory-b2c/openid-connect#send-authentication-requests).
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
