import Foundation
import WireCoding

/// More of the reference's claims transformations: general (`DoesClaimExist`, `NullClaim`),
/// string (`StringContains`, `StringJoin`, `StringSubstring`, `ParseDomain`, `LookupValue`),
/// boolean (`SetClaimIfBooleansMatch`), integer (`AdjustNumber`, `AssertNumber`,
/// `ConvertNumberToStringClaim`), string collection (`StringCollectionContainsClaim`), date
/// (`ConvertDateTimeToDateClaim`, `ConvertDateToDateTimeClaim`, `IsTermsOfUseConsentRequired`)
/// and JSON (`GetSingleItemFromJson`, `GetNumericClaimFromJson`, `GetSingleValueFromJsonArray`,
/// `CreateJsonArray`), each as its page of Microsoft's reference describes it.
enum GeneralTransformations {
    static let methods: Set<String> = [
        "DoesClaimExist", "NullClaim", "StringContains", "StringJoin", "StringSubstring", "ParseDomain", "LookupValue",
        "SetClaimIfBooleansMatch", "AdjustNumber", "AssertNumber", "ConvertNumberToStringClaim", "StringCollectionContainsClaim",
        "ConvertDateTimeToDateClaim", "ConvertDateToDateTimeClaim", "IsTermsOfUseConsentRequired", "GetSingleItemFromJson",
        "GetNumericClaimFromJson", "GetSingleValueFromJsonArray", "CreateJsonArray",
    ]

    /// The outputs of `method`, or nil when it is not one of these.
    static func evaluate(_ method: String, _ io: TransformationIO, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> [(
        String, PolicyClaimValue?
    )]? {
        switch method {
        case "DoesClaimExist":
            // Whether the bag holds the claim: one a page generated empty
            // (`AllowGenerationOfClaimsWithNullValues`) exists, as the community's unit test of
            // that metadata shows on B2C.
            let present = io.value("inputClaim", claims) != nil
            return [("outputClaim", .boolean(present))]
        case "NullClaim": return [("claim_to_null", nil)]
        case "StringContains":
            let value = io.text("inputClaim", claims)
            let part = io.parameter("contains") ?? ""
            let found = io.flag("ignoreCase") ? value.lowercased().contains(part.lowercased()) : value.contains(part)
            return [("outputClaim", .boolean(!part.isEmpty && found))]
        case "StringJoin":
            return [("outputClaim", .string(io.collection("inputClaim", claims).joined(separator: io.parameter("delimiter") ?? ",")))]
        case "StringSubstring":
            // .NET's `Substring(startIndex, length)`: outside the string is an error, not a shorter result.
            let characters = Array(io.text("inputClaim", claims))
            let start = Int(io.parameter("startIndex") ?? "0") ?? -1
            let length = Int(io.parameter("length") ?? "") ?? (characters.count - max(0, start))
            guard start >= 0, length >= 0, start <= characters.count, length <= characters.count - start else {
                throw .invalidInput("StringSubstring: startIndex \(start) and length \(length) are outside the input claim's \(characters.count) characters.")
            }
            return [("outputClaim", .string(String(characters[start..<(start + length)])))]
        case "ParseDomain":
            let address = io.text("emailAddress", claims)
            guard let at = address.lastIndex(of: "@") else { return [("domain", nil)] }
            return [("domain", .string(String(address[address.index(after: at)...])))]
        case "LookupValue":
            let key = io.text("inputParameterId", claims)
            let table = io.transformation.parameters.filter { $0.key.lowercased() != "erroronfailedlookup" }
            let found = table[key] ?? table.first { $0.key.lowercased() == key.lowercased() }?.value
            guard let found else {
                if io.flag("errorOnFailedLookup") {
                    throw .assertion(
                        messageKey: "UserMessageIfClaimsTransformationLookupValueFailed",
                        defaultMessage: "The value '\(key)' was not found in the lookup of ClaimsTransformation '\(io.transformation.id)'.")
                }
                return [("outputClaim", nil)]
            }
            return [("outputClaim", .string(found.value))]
        case "SetClaimIfBooleansMatch":
            let matches = try io.bool("claimToMatch", claims) == io.flag("matchTo")
            return matches ? [("outputClaim", .string(io.parameter("outputClaimIfMatched") ?? ""))] : []
        case "AdjustNumber":
            let value = integer(io.value("inputClaim", claims)) ?? 0
            let decrement = io.parameter("Operator")?.uppercased() == "DECREMENT"
            return [("outputClaim", .integer(decrement ? value &- 1 : value &+ 1))]
        case "AssertNumber":
            guard let value = integer(io.value("inputClaim", claims)) else {
                throw .invalidInput("AssertNumber: the input claim '\(io.reference("inputClaim")?.claimType ?? "inputClaim")' has no number.")
            }
            let other = Int64(io.parameter("CompareToValue") ?? "") ?? 0
            let result: Bool =
                switch io.parameter("Operator")?.lowercased() {
                case "greaterthan": value > other
                case "greaterthanorequal": value >= other
                case "lessthan": value < other
                case "lessthanorequal": value <= other
                case "notequal": value != other
                default: value == other
                }
            // Assertion mode (the default): a true comparison is the error.
            if io.parameter("throwError")?.lowercased() != "false", result {
                throw .assertion(
                    messageKey: "AssertNumberError",
                    defaultMessage: "The number comparison of ClaimsTransformation '\(io.transformation.id)' failed.")
            }
            return [("outputClaim", .boolean(result))]
        case "ConvertNumberToStringClaim":
            return [("outputClaim", integer(io.value("inputClaim", claims)).map { .string(String($0)) })]
        case "StringCollectionContainsClaim":
            let item = io.text("item", claims)
            let found = io.collection("collection", claims).contains { ClaimsTransformations.equals($0, item, ignoreCase: io.flag("ignoreCase")) }
            return [("outputClaim", .boolean(found))]
        case "ConvertDateTimeToDateClaim":
            guard let date = DateAndJSONTransformations.date(io.text("inputClaim", claims)) else {
                throw .invalidInput("ConvertDateTimeToDateClaim: the input claim is not a dateTime.")
            }
            return [("outputClaim", .string(String(DateAndJSONTransformations.format(date).prefix(10))))]
        case "ConvertDateToDateTimeClaim":
            guard let date = DateAndJSONTransformations.date(io.text("inputClaim", claims)) else {
                throw .invalidInput("ConvertDateToDateTimeClaim: the input claim is not a date.")
            }
            return [("outputClaim", .string(DateAndJSONTransformations.format(date)))]
        case "IsTermsOfUseConsentRequired":
            // Required when the account never consented, or consented before the terms changed.
            guard let updated = DateAndJSONTransformations.date(io.parameter("termsOfUseTextUpdateDateTime") ?? "") else {
                throw .invalidInput("IsTermsOfUseConsentRequired: termsOfUseTextUpdateDateTime is not a dateTime.")
            }
            let consented = DateAndJSONTransformations.date(io.text("termsOfUseConsentDateTime", claims))
            return [("result", .boolean(consented.map { $0 < updated } ?? true))]
        case "GetSingleItemFromJson":
            let text = io.text("inputJson", claims)
            guard let object = Self.object(text) else { throw .invalidInput("GetSingleItemFromJson: inputJson is not a JSON object.") }
            // The first property as written (a decoded object has no order).
            guard let key = Self.firstKey(text), let value = object[key] else { return [("key", nil), ("value", nil)] }
            return [("key", .string(key)), ("value", Self.scalarText(value).map(PolicyClaimValue.string))]
        case "GetNumericClaimFromJson":
            guard let object = Self.object(io.text("inputJson", claims)) else {
                throw .invalidInput("GetNumericClaimFromJson: inputJson is not a JSON object.")
            }
            guard case .number(let number)? = object[io.parameter("claimToExtract") ?? ""], let value = Int64(exactly: number) else {
                return [("extractedClaim", nil)]
            }
            return [("extractedClaim", .integer(value))]
        case "GetSingleValueFromJsonArray":
            let text = io.collection("inputJsonClaim", claims).joined(separator: ",")
            guard let array = try? JSONDecoder().decode([JSONValue].self, from: Data(text.utf8)) else {
                throw .invalidInput("GetSingleValueFromJsonArray: inputJsonClaim is not a JSON array.")
            }
            return [("extractedClaim", array.first.flatMap(Self.scalarText).map(PolicyClaimValue.string))]
        case "CreateJsonArray":
            return [("outputClaim", .string(JSONText.array([.string(io.text("inputClaim", claims))]).serialized))]
        default: return nil
        }
    }

    /// A JSON object's text decoded, or nil when it is not one.
    static func object(_ text: String) -> [String: JSONValue]? {
        guard case .object(let members)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else { return nil }
        return members
    }

    /// The first member's name of a JSON object's text, as written.
    static func firstKey(_ text: String) -> String? {
        var rest = Substring(text).drop { $0.isWhitespace }
        guard rest.first == "{" else { return nil }
        rest = rest.dropFirst().drop { $0.isWhitespace }
        guard rest.first == "\"" else { return nil }
        var end = rest.index(after: rest.startIndex)
        var escaped = false
        while end < rest.endIndex {
            let character = rest[end]
            if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { break }
            end = rest.index(after: end)
        }
        guard end < rest.endIndex else { return nil }
        return try? JSONDecoder().decode(String.self, from: Data(rest[...end].utf8))
    }

    /// A JSON scalar as a claim's text: a string as it is, a whole number without a fraction.
    static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): text
        case .number(let number): Int64(exactly: number).map(String.init) ?? String(number)
        case .bool(let flag): flag ? "true" : "false"
        default: nil
        }
    }

    /// An int or long claim, or one written as digits.
    private static func integer(_ value: PolicyClaimValue?) -> Int64? {
        switch value {
        case .integer(let number)?: number
        case .string(let text)?: Int64(text.trimmingCharacters(in: .whitespaces))
        default: nil
        }
    }
}
