import Foundation

/// A claim type's `Restriction/Pattern`: a .NET regular expression, run here by ICU
/// (NSRegularExpression) after the one translation the two dialects need — inside a character
/// class .NET reads `[` and `&` literally, where ICU starts a nested set or an intersection
/// (Microsoft's starter pack's password pattern has `[\]{}` in a class). Matching has limits:
/// at most ``maximumInput`` characters, and a deadline checked as ICU reports progress, so a
/// pattern that backtracks badly cannot hold a request.
package enum PolicyPattern {
    package static let maximumInput = 256
    static let deadline: TimeInterval = 0.05

    /// The ICU form of a .NET pattern.
    static func icu(_ pattern: String) -> String {
        var result = ""
        var inClass = false
        var escaped = false
        var classStart = false
        for character in pattern {
            if escaped {
                result.append(character)
                escaped = false
                classStart = false
                continue
            }
            switch character {
            case "\\":
                escaped = true
                result.append(character)
                continue
            case "[" where inClass:
                result += "\\["
            case "&" where inClass:
                result += "\\&"
            case "[":
                inClass = true
                classStart = true
                result.append(character)
                continue
            case "]" where inClass && !classStart:
                inClass = false
                result.append(character)
            case "^" where classStart:
                result.append(character)
                continue
            default:
                result.append(character)
            }
            classStart = false
        }
        return result
    }

    /// The compiled pattern, or nil when ICU cannot read it (refused at upload).
    static func compile(_ pattern: String) -> NSRegularExpression? {
        try? NSRegularExpression(pattern: "^(?:\(icu(pattern)))$")
    }

    /// Whether `value` matches the whole pattern; false for a value that is too long or a
    /// match that runs past the deadline.
    package static func matches(_ value: String, _ pattern: String) -> Bool {
        guard value.count <= maximumInput, let expression = compile(pattern) else { return false }
        let started = Date()
        var matched = false
        let range = NSRange(value.startIndex..., in: value)
        expression.enumerateMatches(in: value, options: [.reportProgress], range: range) { result, _, stop in
            if result != nil {
                matched = true
                stop.pointee = true
            } else if Date().timeIntervalSince(started) > deadline {
                stop.pointee = true
            }
        }
        return matched
    }
}
