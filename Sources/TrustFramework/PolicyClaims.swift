import Foundation

/// A claim's value in a custom policy's claims bag, by the claim type's data type.
package enum PolicyClaimValue: Sendable, Codable, Equatable {
    case string(String)
    case boolean(Bool)
    case integer(Int64)
    case collection([String])

    /// The value as text, as B2C writes a claim into a string (`True`/`False` for booleans, as .NET does).
    package var text: String {
        switch self {
        case .string(let value): value
        case .boolean(let value): value ? "True" : "False"
        case .integer(let value): String(value)
        case .collection(let values): values.joined(separator: ",")
        }
    }

    /// Reads `text` as a value of `type`; nil when it is not one.
    package static func parse(_ text: String, as type: PolicyClaimType.DataType) -> PolicyClaimValue? {
        switch type {
        case .boolean:
            switch text.lowercased() {
            case "true": return .boolean(true)
            case "false": return .boolean(false)
            default: return nil
            }
        case .int, .long: return Int64(text).map(PolicyClaimValue.integer)
        case .stringCollection, .alternativeSecurityIdCollection: return .collection([text])
        case .string, .date, .dateTime, .alternativeSecurityId: return .string(text)
        case .phoneNumber: return PhoneNumbers.standard(text).map(PolicyClaimValue.string)
        }
    }
}

/// A custom policy's claims bag: what its steps and technical profiles read and write, by
/// claim type id (case-insensitive, as B2C resolves them). Kept with the journey's state.
package struct PolicyClaims: Sendable, Codable, Equatable {
    package private(set) var values: [String: PolicyClaimValue] = [:]

    package init(_ values: [String: PolicyClaimValue] = [:]) {
        for (key, value) in values { self.values[key.lowercased()] = value }
    }

    package subscript(_ claim: String) -> PolicyClaimValue? {
        get { values[claim.lowercased()] }
        set { values[claim.lowercased()] = newValue }
    }

    /// Whether the claim has a value: an empty string or collection counts as none, as B2C's
    /// `ClaimsExist` precondition treats them.
    package func has(_ claim: String) -> Bool {
        switch self[claim] {
        case nil: false
        case .string(let value)?: !value.isEmpty
        case .collection(let values)?: !values.isEmpty
        default: true
        }
    }

    package func text(_ claim: String) -> String? { self[claim]?.text }

    package func bool(_ claim: String) -> Bool? {
        if case .boolean(let value)? = self[claim] { return value }
        return self[claim].flatMap { PolicyClaimValue.parse($0.text, as: .boolean) }.flatMap { if case .boolean(let b) = $0 { b } else { nil } }
    }

    package mutating func remove(_ claim: String) { values[claim.lowercased()] = nil }

    /// The names of the claims whose values differ between `self` and `other` (for the trace).
    package func changedNames(from other: PolicyClaims) -> [String] {
        Set(values.keys).union(other.values.keys).filter { values[$0] != other.values[$0] }.sorted()
    }

    /// The values of `names` as the developer trace shows them: each as text, cut at 256
    /// characters; a secret a person typed (a `Password` input) as `(hidden)`, and so is any
    /// claim whose value holds one of `secrets` (the policy's own copy of a password, made by a
    /// transformation); a claim the step removed as `(removed)`.
    package func traceValues(of names: [String], policy: CompiledPolicy, hiding secrets: Set<String> = []) -> [String: String] {
        var shown: [String: String] = [:]
        for name in names {
            if Self.isSecret(name, policy) {
                shown[name] = "(hidden)"
            } else if let value = self[name], secrets.contains(where: { !$0.isEmpty && value.text.contains($0) }) {
                shown[name] = "(hidden)"
            } else if let value = self[name] {
                shown[name] = String(value.text.prefix(256))
            } else {
                shown[name] = "(removed)"
            }
        }
        return shown
    }

    /// Whether a claim of this name holds what a person types as a secret.
    package static func isSecret(_ name: String, _ policy: CompiledPolicy) -> Bool {
        name.lowercased() == "password" || policy.claimType(name)?.userInputType == "Password"
    }

    /// The bag without the values a person typed as secrets (claim types whose input is a
    /// `Password`): they are used within the request that carries them and never stored with
    /// the journey.
    package func removingSecrets(of policy: CompiledPolicy) -> PolicyClaims {
        var kept = self
        for key in values.keys where key == "password" || policy.claimType(key)?.userInputType == "Password" { kept.values[key] = nil }
        return kept
    }
}
