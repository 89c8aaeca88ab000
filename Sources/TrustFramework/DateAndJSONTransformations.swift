import Foundation
import WireCoding

/// The date, JSON and social claims transformations of B2C's reference (`date-transformations.md`,
/// `json-transformations.md`, `social-transformations.md`).
package enum DateAndJSONTransformations {
    static func evaluate(_ method: String, _ io: TransformationIO, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> [(
        String, PolicyClaimValue?
    )] {
        switch method {
        case "GetCurrentDateTime": return [("currentDateTime", .string(format(io.context.now)))]
        case "DateTimeComparison":
            // A missing first date is an error; a missing second one is now.
            guard let first = date(io.text("firstDateTime", claims)) else {
                throw .invalidInput("DateTimeComparison: firstDateTime has no date.")
            }
            let second = date(io.text("secondDateTime", claims)) ?? io.context.now
            let shifted = first.addingTimeInterval(TimeInterval(Int(io.parameter("timeSpanInSeconds") ?? "") ?? 0))
            let result: Bool
            switch io.parameter("operator")?.lowercased() {
            case "later than"?: result = shifted > second
            case "earlier than"?: result = shifted < second
            case "same"?: result = abs(shifted.timeIntervalSince(second)) < 0.001
            default: throw .invalidInput("DateTimeComparison: operator must be same, later than or earlier than.")
            }
            return [("result", .boolean(result))]
        case "AssertDateTimeIsGreaterThan":
            guard let left = date(io.text("leftOperand", claims)) else {
                throw .invalidInput("AssertDateTimeIsGreaterThan: leftOperand has no date.")
            }
            let failure = ClaimsTransformationFailure.assertion(
                messageKey: "DateTimeGreaterThan",
                defaultMessage: "Claim value comparison failed: The provided left operand is greater than the right operand.")
            guard let right = date(io.text("rightOperand", claims)) else {
                if io.parameter("AssertIfRightOperandIsNotPresent")?.lowercased() == "true" { throw failure }
                return []
            }
            let tolerance = TimeInterval(Int(io.parameter("TreatAsEqualIfWithinMillseconds") ?? "") ?? 0) / 1000
            let equal = abs(left.timeIntervalSince(right)) <= tolerance
            // AssertIfEqualTo defaults to true.
            if equal { if io.parameter("AssertIfEqualTo")?.lowercased() != "false" { throw failure } } else if right > left { throw failure }
            return []
        case "GetClaimFromJson":
            let name = io.parameter("claimToExtract") ?? ""
            guard let object = GeneralTransformations.object(io.text("inputJson", claims)) else {
                throw .invalidInput("GetClaimFromJson: inputJson is not a JSON object.")
            }
            switch object[name] {
            case .bool(let value)?: return [("extractedClaim", .boolean(value))]
            case let value?: return [("extractedClaim", GeneralTransformations.scalarText(value).map(PolicyClaimValue.string))]
            default: return [("extractedClaim", nil)]
            }
        case "GenerateJson": return [("outputClaim", .string(try generateJSON(io, claims)))]
        case "CreateAlternativeSecurityId":
            // The issuer lower-cased, the user id base64 (the reference's example shows both).
            let json = JSONText.object([
                ("issuer", .string(io.text("identityProvider", claims).lowercased())),
                ("issuerUserId", .string(Data(io.text("key", claims).utf8).base64EncodedString())),
            ])
            return [("alternativeSecurityId", .string(json.serialized))]
        default: return try PhoneNumbers.evaluate(method, io, claims)
        }
    }

    /// `2022-01-14T11:40:35.0000000Z`, as B2C writes a dateTime claim.
    package static func format(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        let ticks = (parts.nanosecond ?? 0) / 100
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%07dZ", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0, parts.hour ?? 0,
            parts.minute ?? 0, parts.second ?? 0, ticks)
    }

    /// A date or dateTime claim's value: ISO 8601 with or without a fraction or a zone (UTC
    /// when none), or a bare date.
    static func date(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        var normalized = trimmed
        // Seven fractional digits are .NET's; ISO8601DateFormatter reads three.
        if let dot = normalized.firstIndex(of: ".") {
            let digits = normalized[normalized.index(after: dot)...].prefix { $0.isNumber }
            let rest = normalized[normalized.index(after: dot)...].dropFirst(digits.count)
            normalized = String(normalized[..<dot]) + "." + String((digits + "000").prefix(3)) + rest
        }
        if normalized.count == 10 { normalized += "T00:00:00" }
        if !(normalized.hasSuffix("Z") || normalized.range(of: #"[+-]\d\d:?\d\d$"#, options: .regularExpression) != nil) { normalized += "Z" }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = normalized.contains(".") ? [.withInternetDateTime, .withFractionalSeconds] : [.withInternetDateTime]
        return formatter.date(from: normalized)
    }

    /// `GenerateJson`: each input claim's transformation claim type and each parameter's id is a
    /// dot path (number segments index arrays); claims first, then parameters, each in the
    /// policy's order (json-transformations.md's examples); a `long` parameter is a JSON number.
    /// A claim the journey does not hold is left out: the reference's examples write no empty
    /// members, and a member of `""` would tell the receiving API a value was given.
    static func generateJSON(_ io: TransformationIO, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> String {
        var root = JSONTree.object([])
        for reference in io.transformation.inputClaims {
            guard let path = reference.transformationClaimType, let text = claims.text(reference.claimType) else { continue }
            root.set(path.split(separator: ".").map(String.init), .string(text))
        }
        for id in io.transformation.parameterOrder {
            guard let parameter = io.transformation.parameters[id] else { continue }
            let value: JSONText =
                parameter.dataType.lowercased() == "long" || parameter.dataType.lowercased() == "int"
                ? Int64(parameter.value).map(JSONText.int) ?? .string(parameter.value) : .string(parameter.value)
            root.set(id.split(separator: ".").map(String.init), value)
        }
        return root.json.serialized
    }
}

/// A JSON document built by paths, keeping the order members were first set in.
private indirect enum JSONTree {
    /// Array indexes above it are object keys, so a path cannot make a huge array.
    static let maximumIndex = 100
    case leaf(JSONText)
    case object([(String, JSONTree)])
    case array([JSONTree])

    mutating func set(_ path: [String], _ value: JSONText) {
        guard let head = path.first else {
            self = .leaf(value)
            return
        }
        let rest = Array(path.dropFirst())
        if let index = Int(head), (0...JSONTree.maximumIndex).contains(index) {
            var items: [JSONTree] = if case .array(let existing) = self { existing } else { [] }
            while items.count <= index { items.append(.object([])) }
            items[index].set(rest, value)
            self = .array(items)
        } else {
            var members: [(String, JSONTree)] = if case .object(let existing) = self { existing } else { [] }
            if let position = members.firstIndex(where: { $0.0 == head }) {
                members[position].1.set(rest, value)
            } else {
                var child = JSONTree.object([])
                child.set(rest, value)
                members.append((head, child))
            }
            self = .object(members)
        }
    }

    var json: JSONText {
        switch self {
        case .leaf(let value): value
        case .object(let members): .object(members.map { ($0.0, $0.1.json) })
        case .array(let items): .array(items.map(\.json))
        }
    }
}
