/// Values made safe for swift-mustache's HTML escaping, which replaces `<`, `>`, `&`, `"` and `'`
/// by `Character`: one of them followed by a combining mark (`"` + U+0301) is a single
/// `Character` that is none of them, and would reach the page raw, where an HTML parser reads the
/// quote and leaves the attribute. Such a cluster keeps only its first scalar, which the escaping
/// then catches. Every page renderer passes its values through ``safe(_:)``.
public enum MarkupValues {
    private static let escaped: Set<Unicode.Scalar> = ["<", ">", "&", "\"", "'"]

    /// `value` with every string in it (nested in dictionaries and arrays) made safe.
    public static func safe(_ value: Any) -> Any {
        switch value {
        case let text as String: return safe(text)
        case let object as [String: Any]: return object.mapValues(safe)
        case let list as [[String: Any]]: return list.map { $0.mapValues(safe) }
        case let list as [Any]: return list.map(safe)
        default: return value
        }
    }

    public static func safe(_ text: String) -> String {
        // The common case, untouched: no character to escape carries a mark.
        guard text.contains(where: { $0.unicodeScalars.count > 1 && escaped.contains($0.unicodeScalars.first!) }) else { return text }
        var out = String.UnicodeScalarView()
        for character in text {
            if let first = character.unicodeScalars.first, escaped.contains(first) {
                out.append(first)
            } else {
                out.append(contentsOf: character.unicodeScalars)
            }
        }
        return String(out)
    }
}
