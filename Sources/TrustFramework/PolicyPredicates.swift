import Foundation

/// B2C's `Predicates` and `PredicateValidations` (SPEC §2.12): the rules a claim type names with
/// `PredicateValidationReference`, as custom policies state password complexity. A validation
/// passes when every group does; a group when at least `MatchAtLeast` of its predicates do (all
/// by default). Methods: `IsLengthRange` (`Minimum`, `Maximum`), `MatchesRegex`
/// (`RegularExpression`, .NET syntax as in ``PolicyPattern``), `IncludesCharacters`
/// (`CharacterSet`, with ranges such as `a-z`), `IsDateRange` (`Minimum`, `Maximum`: a date
/// `yyyy-MM-dd` or `Today`).
package struct PolicyPredicates: Sendable {
    static let methods: Set<String> = ["IsLengthRange", "MatchesRegex", "IncludesCharacters", "IsDateRange"]
    /// The most `PredicateReference`s one group may hold (refused at upload beyond): each may be
    /// a pattern, and an anonymous submission evaluates the group.
    package static let maximumReferencesPerGroup = 16

    struct Predicate: Sendable {
        var method: String
        var helpText: String?
        var parameters: [String: String]
        /// A `MatchesRegex` predicate's pattern, compiled with the policy.
        var pattern: PolicyPattern.Compiled?
    }

    struct Group: Sendable {
        var helpText: String?
        var predicates: [String]
        var matchAtLeast: Int?
    }

    let predicates: [String: Predicate]
    let validations: [String: [Group]]

    init(_ blocks: PolicyElement?) {
        var predicates: [String: Predicate] = [:]
        for element in blocks?.items("Predicates", "Predicate") ?? [] {
            guard let id = element["Id"] else { continue }
            var parameters: [String: String] = [:]
            for parameter in element.items("Parameters", "Parameter") { if let id = parameter["Id"] { parameters[id] = parameter.text } }
            let method = element["Method"] ?? ""
            predicates[id.lowercased()] = Predicate(
                method: method, helpText: element["HelpText"] ?? element.child("UserHelpText")?.text, parameters: parameters,
                pattern: method == "MatchesRegex" ? PolicyPattern.Compiled(parameters["RegularExpression"] ?? "") : nil)
        }
        var validations: [String: [Group]] = [:]
        for element in blocks?.items("PredicateValidations", "PredicateValidation") ?? [] {
            guard let id = element["Id"] else { continue }
            validations[id.lowercased()] = element.items("PredicateGroups", "PredicateGroup").map { group in
                let references = group.child("PredicateReferences")
                return Group(
                    helpText: group.child("UserHelpText")?.text, predicates: (references?.children("PredicateReference") ?? []).compactMap { $0["Id"] },
                    matchAtLeast: references?["MatchAtLeast"].flatMap(Int.init))
            }
        }
        self.predicates = predicates
        self.validations = validations
    }

    /// The message of the first group `value` fails in `validation`, or nil when it passes. A
    /// group stops as soon as `MatchAtLeast` is decided either way, in document order.
    package func problem(with value: String, validation: String, budget: PolicyPattern.Budget, now: Date = Date()) throws -> String? {
        for group in validations[validation.lowercased()] ?? [] {
            let count = group.predicates.count
            let needed = min(group.matchAtLeast ?? count, count)
            var passed = 0
            var failed = 0
            var firstFailing: String?
            for id in group.predicates {
                guard passed < needed, failed <= count - needed else { break }
                if try predicates[id.lowercased()].map({ try Self.holds($0, value, budget: budget, now: now) }) ?? false {
                    passed += 1
                } else {
                    failed += 1
                    if firstFailing == nil { firstFailing = id }
                }
            }
            if passed < needed {
                let failing = firstFailing.flatMap { predicates[$0.lowercased()]?.helpText }
                return group.helpText ?? failing ?? "The value does not meet the requirements."
            }
        }
        return nil
    }

    static func holds(_ predicate: Predicate, _ value: String, budget: PolicyPattern.Budget, now: Date = Date()) throws -> Bool {
        switch predicate.method {
        case "IsLengthRange":
            let minimum = predicate.parameters["Minimum"].flatMap(Int.init) ?? 0
            let maximum = predicate.parameters["Maximum"].flatMap(Int.init) ?? Int.max
            return (minimum...max(minimum, maximum)).contains(value.count)
        case "MatchesRegex": return try predicate.pattern.map { try PolicyPattern.matches(value, $0, budget: budget) } ?? false
        case "IncludesCharacters":
            let set = characters(in: predicate.parameters["CharacterSet"] ?? "")
            return value.unicodeScalars.contains { set.contains($0) }
        case "IsDateRange":
            // Whole days, in UTC: the value and each bound as `yyyy-MM-dd` (a dateTime's day counts).
            func day(_ text: String) -> String? {
                if text.lowercased() == "today" { return String(DateAndJSONTransformations.format(now).prefix(10)) }
                return DateAndJSONTransformations.date(text).map { String(DateAndJSONTransformations.format($0).prefix(10)) }
            }
            guard let date = day(value) else { return false }
            if let minimum = predicate.parameters["Minimum"].flatMap(day), date < minimum { return false }
            if let maximum = predicate.parameters["Maximum"].flatMap(day), date > maximum { return false }
            return true
        default: return false
        }
    }

    /// `a-z`, `A-Z`, `0-9` and literal characters (backslash escapes one) as a set.
    static func characters(in text: String) -> Set<Unicode.Scalar> {
        var set = Set<Unicode.Scalar>()
        let scalars = Array(text.unicodeScalars)
        var index = 0
        while index < scalars.count {
            var current = scalars[index]
            if current == "\\", index + 1 < scalars.count {
                index += 1
                current = scalars[index]
            } else if index + 2 < scalars.count, scalars[index + 1] == "-", current.value <= scalars[index + 2].value,
                scalars[index + 2].value - current.value < 128
            {
                for value in current.value...scalars[index + 2].value { if let scalar = Unicode.Scalar(value) { set.insert(scalar) } }
                index += 3
                continue
            }
            set.insert(current)
            index += 1
        }
        return set
    }
}
