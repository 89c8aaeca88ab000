import Foundation

/// UTS #39's skeleton (§4) of an account name, for the letters that pass for Latin ones: two
/// addresses with one skeleton read the same to a person (`ɑlıce@example.com` and
/// `alice@example.com`), so the second is refused as the first's duplicate (the second outside
/// attack's F-7). Only non-ASCII characters are mapped, each to the ASCII letter or digit it
/// imitates, from the prototypes of Unicode's confusables data; ASCII stays as it is, so that
/// ordinary addresses (`rn` and `m`, `l` and `1`) never collide with each other.
enum ConfusableSkeleton {
    /// NFKD (compatibility letters such as mathematical `𝐚` and small capitals' decompositions
    /// become the letters they style), each character to its prototype, NFC again (UTS #39 §4,
    /// with NFKD for the compatibility characters RFC 8264's IdentifierClass would exclude).
    static func of(_ name: String) -> String {
        var mapped = String.UnicodeScalarView()
        for scalar in name.decomposedStringWithCompatibilityMapping.unicodeScalars {
            if let prototype = prototypes[scalar.value] {
                mapped.append(contentsOf: prototype.unicodeScalars)
            } else {
                mapped.append(scalar)
            }
        }
        return String(mapped).precomposedStringWithCanonicalMapping
    }

    /// Look-alikes of ASCII letters and digits: Unicode's confusables data (``generated``, made by
    /// `scripts/confusables-table.py`, with the small capitals by name), then the choices below,
    /// which win where Unicode's prototype is an ASCII character ASCII itself is not folded to
    /// (Unicode's prototype of `1` is `l`, of `0` is `O`: here a digit imitates the digit).
    static let prototypes: [UInt32: String] = {
        var table: [UInt32: String] = [:]
        for entry in generated.replacingOccurrences(of: "\n", with: "").split(separator: ";") {
            let parts = entry.split(separator: "=")
            if parts.count == 2, let point = UInt32(parts[0], radix: 16) { table[point] = String(parts[1]) }
        }
        let pairs: [(String, [UInt32])] = [
            ("a", [0x0251, 0x03B1, 0x0430, 0x237A]),
            ("b", [0x0184, 0x042C, 0x0185, 0x13CF, 0x1472]),
            ("c", [0x03F2, 0x0441, 0x1D04, 0x217D, 0x2CA5]),
            ("d", [0x0501, 0x13E7, 0x146F, 0x217E]),
            ("e", [0x0435, 0x04BD, 0x212E, 0x212F, 0xAB32]),
            ("f", [0x017F, 0x1E9D, 0x0584]),
            ("g", [0x0261, 0x018D, 0x0581, 0x1D83, 0x210A]),
            ("h", [0x04BB, 0x0570, 0x13C2, 0x210E]),
            ("i", [0x0131, 0x0269, 0x026A, 0x03B9, 0x0456, 0x04CF, 0x1FBE, 0x2139, 0x2148, 0x2170, 0x2373, 0x13A5]),
            ("j", [0x0458, 0x03F3, 0x2149]),
            ("k", [0x03BA, 0x043A]),
            ("l", [0x01C0, 0x05C0, 0x05D5, 0x05DF, 0x0627, 0x2113, 0x217C, 0x2223, 0x23FD, 0x2C92, 0x0406]),
            ("m", [0x217F]),
            ("n", [0x0578, 0x057C, 0x03B7]),
            ("o", [0x03BF, 0x043E, 0x0585, 0x05E1, 0x0647, 0x0966, 0x0D20, 0x101D, 0x10FF, 0x1D0F, 0x2134, 0x2C9F, 0x03C3]),
            ("p", [0x03C1, 0x0440, 0x2374, 0x2CA3]),
            ("q", [0x051B, 0x0563, 0x0566]),
            ("r", [0x0433, 0x1D26, 0x2C85, 0xAB47, 0xAB48]),
            ("s", [0x0455, 0x01BD, 0xA731, 0x10FD]),
            ("t", [0x1D1B]),
            ("u", [0x028B, 0x03C5, 0x057D, 0x1D1C, 0xA79F]),
            ("v", [0x03BD, 0x0475, 0x05D8, 0x1D20, 0x2174, 0x2228, 0x22C1]),
            ("w", [0x026F, 0x0461, 0x051D, 0x0561, 0x1D21]),
            ("x", [0x0445, 0x04B3, 0x157D, 0x166E, 0x2179, 0x292B, 0x292C, 0x2A2F, 0x00D7]),
            ("y", [0x0443, 0x028F, 0x03B3, 0x04AF, 0x10E7, 0x1EFF, 0x213D]),
            ("z", [0x1D22, 0xAB93]),
            ("0", [0x0D66]),
            ("1", [0x0661]),
        ]
        for (prototype, scalars) in pairs {
            for scalar in scalars { table[scalar] = prototype }
        }
        return table
    }()
}
