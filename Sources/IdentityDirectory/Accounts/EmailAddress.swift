import Foundation
import TodoModels

/// An email address as an account identifier: one canonical form per address, so that two
/// strings a person cannot tell apart can never be two accounts (SPEC §2.7), and the address a
/// code is sent to is the address that is checked and stored.
///
/// The canonical form is RFC 8265's UsernameCaseMapped profile applied to the whole address:
/// width mapping (`ａｌｉｃｅ` → `alice`), lower case, NFC; then the IdentifierClass check (ASCII
/// printable characters, letters, digits and combining marks only: no controls, format
/// characters, spaces or symbols). On top of that: a deliberately simple address syntax, and no
/// part that mixes scripts people confuse (Latin `a` beside Cyrillic `а`, UTS #39 §5.1).
package struct EmailAddress: Sendable, Hashable, CustomStringConvertible {
    /// The comparison key: `sign_in_name` of local accounts.
    package let canonical: String
    /// The address as entered but width-mapped and NFC, for display and for sending mail.
    package let display: String

    package var description: String { canonical }

    /// nil when `raw` is not an acceptable address.
    package init?(_ raw: String) {
        let trimmed = TextRules.trimmed(raw)
        let display = TextRules.widthMapped(trimmed).precomposedStringWithCanonicalMapping
        let canonical = display.lowercased().precomposedStringWithCanonicalMapping
        guard Self.isWellFormed(canonical),
            // RFC 8265 §3.3: the profile is idempotent; a string that changes again is refused.
            TextRules.widthMapped(canonical).lowercased().precomposedStringWithCanonicalMapping == canonical
        else { return nil }
        self.canonical = canonical
        self.display = display
    }

    /// What the address looks like to a person (``ConfusableSkeleton``): no two accounts of a
    /// tenant share one.
    var skeleton: String { ConfusableSkeleton.of(canonical) }

    /// The comparison key for `raw`, or nil when no account can have it.
    package static func canonical(_ raw: String) -> String? { EmailAddress(raw)?.canonical }

    /// One `@`; a local part of RFC 5322 atext and dots (≤ 64 bytes, RFC 5321 §4.5.3.1.1); a
    /// dotted domain of letters, digits and hyphens; at most 254 bytes (RFC 5321 §4.5.3.1.3).
    private static func isWellFormed(_ address: String) -> Bool {
        guard address.utf8.count <= 254, address.unicodeScalars.allSatisfy(isIdentifierClass) else { return false }
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        let local = parts[0]
        let domain = parts[1]
        guard !local.isEmpty, local.utf8.count <= 64, !local.hasPrefix("."), !local.hasSuffix("."), !local.contains(".."),
            local.unicodeScalars.allSatisfy({ isLetterOrDigit($0) || localPunctuation.contains($0) }),
            isSingleScript(local)
        else { return false }
        // A combining mark beside an ASCII domain only disguises a Latin letter (`i` and a
        // combining dot above is drawn as `i`): no mail system needs one there (F-7).
        if domain.allSatisfy(\.isASCII), local.unicodeScalars.contains(where: isMark) { return false }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return false }
        for label in labels {
            guard !label.isEmpty, label.utf8.count <= 63, !label.hasPrefix("-"), !label.hasSuffix("-"),
                label.unicodeScalars.allSatisfy({ isLetterOrDigit($0) || $0 == "-" }), isSingleScript(label)
            else { return false }
        }
        return true
    }

    /// RFC 5322 §3.2.3 atext besides letters and digits, and the dot.
    private static let localPunctuation = Set("!#$%&'*+-/=?^_`{|}~.".unicodeScalars)

    /// RFC 8264 §9.11: IdentifierClass = ASCII7 printable or LetterDigits (Ll Lu Lo Nd Lm Mn Mc).
    private static func isIdentifierClass(_ scalar: Unicode.Scalar) -> Bool {
        (0x21...0x7E).contains(scalar.value) || isLetterOrDigit(scalar)
    }

    private static func isLetterOrDigit(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .lowercaseLetter, .uppercaseLetter, .otherLetter, .decimalNumber, .modifierLetter, .nonspacingMark,
            .spacingMark:
            true
        default: false
        }
    }

    private static func isMark(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: true
        default: false
        }
    }

    /// Scripts whose letters are easily mistaken for one another; a part of an address may use
    /// at most one of them (UTS #39's "highly restrictive" level, for the scripts that matter).
    private enum ConfusableScript { case latin, greek, cyrillic, armenian, cherokee }

    private static func script(of scalar: Unicode.Scalar) -> ConfusableScript? {
        switch scalar.value {
        case 0x41...0x5A, 0x61...0x7A, 0xC0...0x24F, 0x250...0x2AF, 0x1D00...0x1DBF, 0x1E00...0x1EFF, 0x2C60...0x2C7F,
            0xA720...0xA7FF, 0xAB30...0xAB6F:
            .latin
        case 0x370...0x3FF, 0x1F00...0x1FFF: .greek
        case 0x400...0x52F, 0x1C80...0x1C8F, 0x2DE0...0x2DFF, 0xA640...0xA69F: .cyrillic
        case 0x530...0x58F, 0xFB13...0xFB17: .armenian
        case 0x13A0...0x13FF, 0xAB70...0xABBF: .cherokee
        default: nil
        }
    }

    private static func isSingleScript(_ part: Substring) -> Bool {
        var seen: ConfusableScript?
        for scalar in part.unicodeScalars where scalar.properties.isAlphabetic {
            guard let script = script(of: scalar) else { continue }
            if let seen, seen != script { return false }
            seen = script
        }
        return true
    }
}
