import Crypto
import Foundation
import WireCoding

/// Why a claims transformation stopped the journey: an assertion that failed (the page shows the
/// message the technical profile's metadata names, or B2C's default), or an input it cannot use.
package enum ClaimsTransformationFailure: Error, Equatable {
    case assertion(messageKey: String, defaultMessage: String)
    case invalidInput(String)
}

/// What a transformation may need beyond the claims: the clock, the tenant names its string
/// expressions stand for, a policy key's secret (`Hash`).
package struct ClaimsTransformationContext: Sendable {
    package var now: Date
    /// `{RelyingPartyTenantId}` and `{TrustFrameworkTenantId}`: the tenant's name.
    package var tenantName: String
    /// `{TechnicalProfileId}`: the profile running the transformation.
    package var technicalProfileID: String
    package var secret: @Sendable (String) -> String?
    /// The policy running the transformation: its claim types (outputs typed by claim type,
    /// `CopyClaimIfPredicateMatch`'s predicate) and its localized strings.
    package var policy: CompiledPolicy?
    /// The content definition of the page the transformation runs for (its profile's, or the
    /// self-asserted profile's that runs it as a validation profile): where localized strings are read.
    package var contentDefinition: String?
    /// The app's `ui_locales`: the language localized strings are read in.
    package var uiLocales: String?
    /// The time the transformation's pattern matching may take (``ClaimsTransformations/matchesPatterns(_:)``):
    /// set where it runs on the pattern threads; without one, such a transformation is refused.
    package var budget: PolicyPattern.Budget?

    package init(
        now: Date, tenantName: String, technicalProfileID: String = "", secret: @escaping @Sendable (String) -> String? = { _ in nil },
        policy: CompiledPolicy? = nil, contentDefinition: String? = nil, uiLocales: String? = nil
    ) {
        self.now = now
        self.tenantName = tenantName
        self.technicalProfileID = technicalProfileID
        self.secret = secret
        self.policy = policy
        self.contentDefinition = contentDefinition
        self.uiLocales = uiLocales
    }
}

/// The claims transformations of B2C's reference (string, boolean, string collection, date,
/// JSON, social), run on a claims bag. Names and semantics follow the reference pages
/// (`string-transformations.md` and its siblings); where a page contradicts itself, the
/// choice is said at the method.
package enum ClaimsTransformations {
    package static func run(
        _ transformation: PolicyTransformation, on claims: inout PolicyClaims, context: ClaimsTransformationContext
    ) throws(ClaimsTransformationFailure) {
        let io = TransformationIO(transformation: transformation, context: context)
        let outputs = try evaluate(transformation.method, io, claims)
        for (name, value) in outputs {
            // An output without a transformation claim type is named by its claim type
            // (`GetClaimsFromJsonArray`'s claims, `SetClaimsIfRegexMatch`'s groups).
            for reference in transformation.outputClaims
            where reference.transformationClaimType.map { $0 == name } ?? (reference.claimType.lowercased() == name.lowercased()) {
                if let value { claims[reference.claimType] = value } else { claims.remove(reference.claimType) }
            }
        }
    }

    /// Whether `method` matches regular expressions, so runs on the pattern threads with a budget.
    package static func matchesPatterns(_ transformation: PolicyTransformation) -> Bool {
        StringTransformations.patternMethods.contains(transformation.method)
    }

    /// The outputs, by transformation claim type (a nil value clears the claim).
    private static func evaluate(_ method: String, _ io: TransformationIO, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> [(
        String, PolicyClaimValue?
    )] {
        switch method {
        case "CopyClaim": return [("outputClaim", io.value("inputClaim", claims))]
        case "CreateStringClaim": return [("createdClaim", .string(io.expand(io.parameter("value") ?? "")))]
        case "FormatStringClaim":
            return [("outputClaim", .string(format(io.expand(io.parameter("stringFormat") ?? "{0}"), [io.text("inputClaim", claims)])))]
        case "FormatStringMultipleClaims":
            let values = [io.text("inputClaim1", claims), io.text("inputClaim2", claims)]
            return [("outputClaim", .string(format(io.expand(io.parameter("stringFormat") ?? "{0} {1}"), values)))]
        case "ChangeCase":
            let value = io.text("inputClaim1", claims)
            return [("outputClaim", .string(io.parameter("toCase")?.uppercased() == "UPPER" ? value.uppercased() : value.lowercased()))]
        case "StringReplace":
            let value = io.text("inputClaim", claims)
            let old = io.parameter("oldValue") ?? ""
            return [("outputClaim", .string(old.isEmpty ? value : value.replacingOccurrences(of: old, with: io.parameter("newValue") ?? "")))]
        case "StringSplit":
            let delimiter = io.parameter("delimiter") ?? ","
            let parts = io.text("inputClaim", claims).components(separatedBy: delimiter).filter { !$0.isEmpty }
            return [("outputClaim", .collection(parts))]
        case "CompareClaims":
            let equal = equals(io.text("inputClaim1", claims), io.text("inputClaim2", claims), ignoreCase: io.flag("ignoreCase"))
            return [("outputClaim", .boolean(io.notEqualOperator ? !equal : equal))]
        case "CompareClaimToValue":
            let equal = equals(io.text("inputClaim1", claims), io.parameter("compareTo") ?? "", ignoreCase: io.flag("ignoreCase"))
            return [("outputClaim", .boolean(io.notEqualOperator ? !equal : equal))]
        case "AssertStringClaimsAreEqual":
            let ignoreCase = io.parameter("stringComparison")?.lowercased() == "ordinalignorecase"
            guard equals(io.text("inputClaim1", claims), io.text("inputClaim2", claims), ignoreCase: ignoreCase) else {
                throw .assertion(
                    messageKey: "UserMessageIfClaimsTransformationStringsAreNotEqual",
                    defaultMessage: "Claim value comparison failed using StringComparison \"\(ignoreCase ? "OrdinalIgnoreCase" : "Ordinal")\".")
            }
            return []
        case "SetClaimsIfStringsAreEqual":
            // The reference's table (outputClaim1 the message, outputClaim2 the code) over its
            // example, which swaps them.
            let ignoreCase = io.parameter("stringComparison")?.lowercased() == "ordinalignorecase"
            let equal = equals(io.text("inputClaim", claims), io.parameter("matchTo") ?? "", ignoreCase: ignoreCase)
            return [
                ("outputClaim1", equal ? .string(io.parameter("stringMatchMsg") ?? "") : nil),
                ("outputClaim2", equal ? .string(io.parameter("stringMatchMsgCode") ?? "") : nil), ("stringCompareResultClaim", .boolean(equal)),
            ]
        case "SetClaimsIfStringsMatch":
            let ignoreCase = io.parameter("stringComparison")?.lowercased() == "ordinalignorecase"
            let equal = equals(io.text("claimToMatch", claims), io.parameter("matchTo") ?? "", ignoreCase: ignoreCase)
            return [("outputClaim", equal ? .string(io.parameter("outputClaimIfMatched") ?? "") : nil), ("stringCompareResultClaim", .boolean(equal))]
        case "CreateRandomString": return [("outputClaim", .string(try randomString(io)))]
        case "Hash":
            guard let name = io.parameter("randomizerSecret"), let secret = io.context.secret(name) else {
                throw .invalidInput("Hash needs the policy key named by randomizerSecret, with an active secret.")
            }
            let digest = SHA256.hash(data: Data((io.text("plaintext", claims) + io.text("salt", claims) + secret).utf8))
            return [("hash", .string(Data(digest).base64EncodedString()))]
        case "AndClaims", "OrClaims":
            let (a, b) = (try io.bool("inputClaim1", claims), try io.bool("inputClaim2", claims))
            return [("outputClaim", .boolean(method == "AndClaims" ? a && b : a || b))]
        case "NotClaims": return [("outputClaim", .boolean(!(try io.bool("inputClaim", claims))))]
        case "CompareBooleanClaimToValue":
            return [("compareResult", .boolean(try io.bool("inputClaim", claims) == (io.flag("valueToCompareTo"))))]
        case "AssertBooleanClaimIsEqualToValue":
            guard try io.bool("inputClaim", claims) == io.flag("valueToCompareTo") else {
                let claim = io.reference("inputClaim")?.claimType ?? "inputClaim"
                throw .assertion(
                    messageKey: "UserMessageIfClaimsTransformationBooleanValueIsNotEqual",
                    defaultMessage: "Boolean claim value comparison failed for claim type \"\(claim)\".")
            }
            return []
        case "AddItemToStringCollection":
            return [("collection", .collection(appending(io.collection("collection", claims), io.text("item", claims))))]
        case "AddParameterToStringCollection":
            return [("collection", .collection(appending(io.collection("collection", claims), io.parameter("item") ?? "")))]
        case "GetSingleItemFromStringCollection":
            return [("extractedItem", io.collection("collection", claims).first.map(PolicyClaimValue.string))]
        case "StringCollectionContains":
            let item = io.parameter("item") ?? ""
            let found = io.collection("inputClaim", claims).contains { equals($0, item, ignoreCase: io.flag("ignoreCase")) }
            return [("outputClaim", .boolean(found))]
        default:
            if let outputs = try GeneralTransformations.evaluate(method, io, claims) { return outputs }
            if let outputs = try StringTransformations.evaluate(method, io, claims) { return outputs }
            if let outputs = try CollectionTransformations.evaluate(method, io, claims) { return outputs }
            return try DateAndJSONTransformations.evaluate(method, io, claims)
        }
    }

    /// .NET `String.Format` for `{0}`, `{1}`… (no format specifiers in B2C's uses).
    static func format(_ template: String, _ values: [String]) -> String {
        // One pass over the template: a value that contains `{1}` is not formatted again.
        var result = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            result += rest[..<open]
            let after = rest[rest.index(after: open)...]
            if let close = after.firstIndex(of: "}"), let index = Int(after[..<close]), values.indices.contains(index) {
                result += values[index]
                rest = after[after.index(after: close)...]
            } else {
                result.append("{")
                rest = after
            }
        }
        return result + rest
    }

    static func equals(_ a: String, _ b: String, ignoreCase: Bool) -> Bool { ignoreCase ? a.lowercased() == b.lowercased() : a == b }

    /// The collection with `item` added at the end, once: B2C adds "new unique values".
    private static func appending(_ collection: [String], _ item: String) -> [String] {
        item.isEmpty || collection.contains(item) ? collection : collection + [item]
    }

    private static func randomString(_ io: TransformationIO) throws(ClaimsTransformationFailure) -> String {
        var value: String
        switch io.parameter("randomGeneratorType")?.uppercased() {
        case "GUID"?: value = UUID().uuidString.lowercased()
        case "INTEGER"?:
            let maximum = Int(io.parameter("maximumNumber") ?? "") ?? Int(Int32.max)
            value = String(Int.random(in: 0...max(0, maximum)))
        default: throw .invalidInput("CreateRandomString needs randomGeneratorType GUID or INTEGER.")
        }
        if let format = io.parameter("stringFormat") { value = Self.format(format, [value]) }
        if io.flag("base64") { value = Data(value.utf8).base64EncodedString() }
        return value
    }
}

/// A transformation's inputs and parameters, read by their transformation claim types and ids.
struct TransformationIO {
    let transformation: PolicyTransformation
    let context: ClaimsTransformationContext

    func reference(_ name: String) -> PolicyClaimReference? { transformation.inputClaims.first { $0.transformationClaimType == name } }
    func value(_ name: String, _ claims: PolicyClaims) -> PolicyClaimValue? { reference(name).flatMap { claims[$0.claimType] } }
    func text(_ name: String, _ claims: PolicyClaims) -> String { value(name, claims)?.text ?? "" }
    func collection(_ name: String, _ claims: PolicyClaims) -> [String] {
        switch value(name, claims) {
        case .collection(let values)?: values
        case .string(let value)? where !value.isEmpty: [value]
        default: []
        }
    }
    func bool(_ name: String, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> Bool {
        guard let claim = reference(name)?.claimType, let value = claims.bool(claim) else {
            throw .invalidInput("The boolean input claim '\(reference(name)?.claimType ?? name)' has no value.")
        }
        return value
    }
    func parameter(_ id: String) -> String? { transformation.parameters[id]?.value }
    func flag(_ id: String) -> Bool { parameter(id)?.lowercased() == "true" }
    var notEqualOperator: Bool { parameter("operator")?.uppercased() == "NOT EQUAL" }

    /// The string expressions `{TechnicalProfileId}`, `{RelyingPartyTenantId}`, `{TrustFrameworkTenantId}`.
    func expand(_ text: String) -> String {
        text.replacingOccurrences(of: "{TechnicalProfileId}", with: context.technicalProfileID)
            .replacingOccurrences(of: "{RelyingPartyTenantId}", with: context.tenantName)
            .replacingOccurrences(of: "{TrustFrameworkTenantId}", with: context.tenantName)
    }
}
