import Foundation

/// A claim type's `Mask` (claimsschema.md): how a page shows a value it must not show whole.
/// `Simple` puts the mask's text over the value's leading characters ("XXX-XXX-" over a phone
/// number leaves its last digits); `Regex` replaces each match of its expression with the
/// mask's text (`(?<=.).(?=.*@)` with `*` shows `e****@contoso.com`).
package enum PolicyMask: Sendable {
    case simple(String)
    case regex(PolicyPattern.Search, replacement: String)

    init?(_ element: PolicyElement) {
        switch element["Type"]?.lowercased() {
        case "simple": self = .simple(element.text)
        case "regex": self = .regex(PolicyPattern.Search(element["Regex"] ?? ""), replacement: element.text)
        default: return nil
        }
    }

    /// The value as the page shows it. A value too long to match within limits, or a pattern
    /// that runs out of time, is shown masked whole: a mask never shows more than it should.
    package func apply(to value: String, budget: PolicyPattern.Budget) -> String {
        switch self {
        case .simple(let mask):
            let characters = Array(value)
            guard characters.count > mask.count else { return String(mask.prefix(characters.count)) }
            return mask + String(characters[mask.count...])
        case .regex(let search, let replacement):
            guard let replaced = try? PolicyPattern.replacing(in: value, search, with: replacement, budget: budget) else {
                return String(repeating: "*", count: value.count)
            }
            return replaced
        }
    }
}
