import Foundation

/// The rules every piece of text the system stores passes first: names people and apps are known
/// by, and free text such as task titles.
///
/// Why: a control character (Cc: NUL, ESC, …) or a format character (Cf: bidi overrides,
/// zero-width spaces, …) in an identifier lets two different strings look the same to people, logs
/// and terminals, and a NUL is silently cut off by SQLite's driver. So names refuse both classes,
/// unassigned code points and private-use characters, and are stored in one normal form (NFC), the
/// way the PRECIS framework prepares strings for comparison (RFC 8264 §9, RFC 8266).
public enum TextRules {
    /// Why a piece of text was refused.
    public enum Problem: Error, Equatable, Sendable {
        case empty
        case tooLong(maximum: Int)
        /// A control, format, unassigned, private-use or noncharacter code point.
        case forbiddenCharacter(Unicode.Scalar)
    }

    /// A display name or another attribute value (given name, city, …): spaces of every kind
    /// mapped to U+0020 and runs of them collapsed, trimmed, NFC (RFC 8266 §2.2's additional
    /// mapping and normalisation, without its compatibility mapping so that names keep their
    /// letters); 1 to `maximumLength` characters.
    public static func name(_ raw: String, maximumLength: Int) -> Result<String, Problem> {
        var mapped = String.UnicodeScalarView()
        var pendingSpace = false
        for scalar in raw.unicodeScalars {
            if scalar.properties.generalCategory == .spaceSeparator || scalar == "\t" {
                pendingSpace = !mapped.isEmpty
                continue
            }
            if let forbidden = forbiddenInName(scalar) { return .failure(.forbiddenCharacter(forbidden)) }
            if pendingSpace { mapped.append(" ") }
            pendingSpace = false
            mapped.append(scalar)
        }
        let normalized = String(mapped).precomposedStringWithCanonicalMapping
        if normalized.isEmpty { return .failure(.empty) }
        if normalized.count > maximumLength { return .failure(.tooLong(maximum: maximumLength)) }
        return .success(normalized)
    }

    /// Free text (a task title): trimmed; 1 to `maximumLength` characters; refuses controls and
    /// format characters except the zero-width joiner and non-joiner, which emoji sequences and
    /// several scripts (Persian, the Indic scripts) need (RFC 8264 §9.8, CONTEXTJ). Bidi controls
    /// are refused: they reorder what a reader sees (CVE-2021-42574, "Trojan Source").
    public static func freeText(_ raw: String, maximumLength: Int) -> Result<String, Problem> {
        let trimmed = trimmed(raw)
        for scalar in trimmed.unicodeScalars {
            if scalar == "\u{200C}" || scalar == "\u{200D}" { continue }
            switch scalar.properties.generalCategory {
            case .control, .format, .surrogate, .unassigned, .lineSeparator, .paragraphSeparator:
                return .failure(.forbiddenCharacter(scalar))
            default: if scalar.properties.isNoncharacterCodePoint { return .failure(.forbiddenCharacter(scalar)) }
            }
        }
        if trimmed.isEmpty { return .failure(.empty) }
        if trimmed.count > maximumLength { return .failure(.tooLong(maximum: maximumLength)) }
        return .success(trimmed)
    }

    /// `text` without leading and trailing White_Space characters (Unicode's property: spaces,
    /// tabs, line ends). Foundation's `whitespaces` set also holds the zero-width space, a format
    /// character that must be refused rather than quietly dropped.
    public static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }

    /// The scalar itself when it may not appear in a name, else nil.
    static func forbiddenInName(_ scalar: Unicode.Scalar) -> Unicode.Scalar? {
        switch scalar.properties.generalCategory {
        case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator:
            return scalar
        default:
            return scalar.properties.isNoncharacterCodePoint ? scalar : nil
        }
    }

    /// RFC 8265 §3.3.2 rule 1, width mapping: a fullwidth or halfwidth character becomes its
    /// decomposition (`ＡＬＩＣＥ` is `ALICE`). Those characters are the Halfwidth and Fullwidth
    /// Forms block, the ideographic space and the narrow won sign.
    public static func widthMapped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isWidthVariant) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isWidthVariant(scalar) {
                out.append(contentsOf: String(scalar).precomposedStringWithCompatibilityMapping.unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    private static func isWidthVariant(_ scalar: Unicode.Scalar) -> Bool {
        (0xFF00...0xFFEF).contains(scalar.value) || scalar.value == 0x3000 || scalar.value == 0x20A9
    }

    /// Text with every control and format character shown as `\u{…}`, for terminals and logs:
    /// stored text never holds them, but text from a request (a path, a header) may.
    public static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { isUnprintable($0) }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isUnprintable(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: true
        default: false
        }
    }
}
