import Foundation

/// A claim type's `Restriction/Pattern`: a .NET regular expression, run here by ICU
/// (NSRegularExpression) after the one translation the two dialects need — inside a character
/// class .NET reads `[` and `&` literally, where ICU starts a nested set or an intersection
/// (Microsoft's starter pack's password pattern has `[\]{}` in a class). Matching has limits:
/// at most ``maximumInput`` characters, and a deadline checked as ICU reports progress, so a
/// pattern that backtracks badly cannot hold a request; and each submission's matches share a
/// ``Budget``, so a page of many fields or a group of many predicates cannot either.
package enum PolicyPattern {
    package static let maximumInput = 256
    static let deadline: Duration = .milliseconds(50)

    /// A pattern compiled once, when its policy is: `NSRegularExpression` is immutable and safe
    /// to use from any thread (Apple's documentation of the class), hence `@unchecked Sendable`.
    package final class Compiled: @unchecked Sendable {
        package let source: String
        let expression: NSRegularExpression?
        init(_ source: String) {
            self.source = source
            expression = PolicyPattern.compile(source)
        }
    }

    /// The time all the matches of one submission may take together: past it the submission is
    /// refused (``BudgetExhausted``), not answered as if a value had failed.
    package struct Budget: Sendable {
        package static let perSubmission: Duration = .milliseconds(250)
        let deadline: ContinuousClock.Instant
        package init(_ total: Duration = perSubmission) { deadline = ContinuousClock.now + total }
    }

    package struct BudgetExhausted: Error {}

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

    /// The compiled pattern, or nil when ICU cannot read it (refused at upload). Not anchored:
    /// B2C tests a value as .NET's `Regex.IsMatch` and its pages' script's `RegExp.test` do, by
    /// searching for the pattern, which is why the policies people write anchor their own
    /// (`^…$`). The community's `CT_AssertNumber` unit test keeps `20` against the pattern `\d`.
    static func compile(_ pattern: String) -> NSRegularExpression? {
        try? NSRegularExpression(pattern: icu(pattern))
    }

    /// Whether the pattern occurs in `value`; false for a value that is too long or a
    /// match that runs past its own deadline. Throws ``BudgetExhausted`` when the submission's
    /// budget ran out first.
    package static func matches(_ value: String, _ pattern: Compiled, budget: Budget) throws -> Bool {
        guard value.count <= maximumInput, let expression = pattern.expression else { return false }
        guard ContinuousClock.now < budget.deadline else { throw BudgetExhausted() }
        let ownDeadline = ContinuousClock.now + deadline
        let stopAt = min(ownDeadline, budget.deadline)
        var matched = false
        var stopped = false
        let range = NSRange(value.startIndex..., in: value)
        expression.enumerateMatches(in: value, options: [.reportProgress], range: range) { result, _, stop in
            if result != nil {
                matched = true
                stop.pointee = true
            } else if ContinuousClock.now > stopAt {
                stopped = true
                stop.pointee = true
            }
        }
        if stopped, !matched, stopAt == budget.deadline, ownDeadline > budget.deadline { throw BudgetExhausted() }
        return matched
    }

    /// ``matches(_:_:budget:)`` for a pattern given as text, compiled here (tests and checks).
    package static func matches(_ value: String, _ pattern: String, budget: Budget = Budget()) throws -> Bool {
        try matches(value, Compiled(pattern), budget: budget)
    }

    /// A pattern that searches rather than matches the whole value, as .NET's `Regex.Match` and
    /// `Regex.Replace` do (`SetClaimsIfRegexMatch`, a claim type's `Regex` mask), with the names
    /// of its named groups (`(?<name>…)`). Compiled once, with its policy.
    package final class Search: @unchecked Sendable {
        package let source: String
        let expression: NSRegularExpression?
        /// The named groups, in the order the pattern opens them.
        let groupNames: [String]

        init(_ source: String) {
            self.source = source
            expression = try? NSRegularExpression(pattern: PolicyPattern.icu(source))
            var names: [String] = []
            var rest = Substring(source)
            while let open = rest.range(of: "(?<") {
                let after = rest[open.upperBound...]
                // `(?<=` and `(?<!` are lookbehinds, not names.
                let name = after.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
                if !name.isEmpty, after.dropFirst(name.count).first == ">" { names.append(String(name)) }
                rest = after
            }
            groupNames = names
        }
    }

    /// The first match of `search` in `value`: nil when there is none, the named groups' values
    /// when there is. Throws ``BudgetExhausted`` when the budget or the match's own deadline ran
    /// out first, or the value is longer than ``maximumInput``: an unanswered search is not "no match".
    package static func firstMatch(in value: String, _ search: Search, budget: Budget) throws -> [String: String]? {
        var groups: [String: String]?
        try enumerate(value, search, budget: budget) { result in
            var found: [String: String] = [:]
            for name in search.groupNames {
                let range = result.range(withName: name)
                if range.location != NSNotFound, let text = Range(range, in: value) { found[name] = String(value[text]) }
            }
            groups = found
            return false
        }
        return groups
    }

    /// `value` with every match of `search` replaced by `replacement` (taken literally).
    package static func replacing(in value: String, _ search: Search, with replacement: String, budget: Budget) throws -> String {
        var result = ""
        var last = value.startIndex
        try enumerate(value, search, budget: budget) { match in
            guard let range = Range(match.range, in: value) else { return true }
            result += value[last..<range.lowerBound] + replacement
            last = range.upperBound
            return true
        }
        return result + value[last...]
    }

    /// Each match in order until `each` returns false, within the deadlines.
    private static func enumerate(_ value: String, _ search: Search, budget: Budget, _ each: (NSTextCheckingResult) -> Bool) throws {
        guard value.count <= maximumInput, let expression = search.expression else { throw BudgetExhausted() }
        guard ContinuousClock.now < budget.deadline else { throw BudgetExhausted() }
        let stopAt = min(ContinuousClock.now + deadline, budget.deadline)
        var stopped = false
        // Foundation on Linux declares the block escaping; it runs only during the call.
        withoutActuallyEscaping(each) { each in
            expression.enumerateMatches(in: value, options: [.reportProgress], range: NSRange(value.startIndex..., in: value)) { result, _, stop in
                if let result {
                    if !each(result) { stop.pointee = true }
                } else if ContinuousClock.now > stopAt {
                    stopped = true
                    stop.pointee = true
                }
            }
        }
        if stopped { throw BudgetExhausted() }
    }
}
