/// Each claims transformation's signature, as B2C checks it at upload: the transformation claim
/// types of its inputs and outputs (with the data type a claim must have where the method needs
/// one) and its required parameters. A policy whose transformation declares a claim the method
/// does not take, leaves out one it needs, or gives a claim of the wrong type is refused with
/// B2C's "The InputClaims mismatched in ClaimsTransformation…" wording.
enum TransformationSignatures {
    typealias Claim = (name: String, type: PolicyClaimType.DataType?)

    struct Signature {
        var inputs: [Claim]
        var optionalInputs: [Claim] = []
        var parameters: [String] = []
        var outputs: [Claim]
        /// Outputs a policy may leave out (`AssertNumber`'s result, used in evaluation mode).
        var optionalOutputs: [Claim] = []
        /// Any transformation claim type is an input (`GenerateJson`'s paths).
        var anyInputs = false
        /// Exactly one of these inputs must be declared (a claim the reference renamed).
        var oneOfInputs: [String] = []
        /// Any output is allowed, named by its claim type or its own transformation claim type
        /// (`GetClaimsFromJsonArray`'s claims, a regular expression's groups, localized strings).
        var anyOutputs = false
    }

    private static let string: PolicyClaimType.DataType? = nil
    private static func s(_ name: String) -> Claim { (name, nil) }
    private static func b(_ name: String) -> Claim { (name, .boolean) }
    private static func c(_ name: String) -> Claim { (name, .stringCollection) }
    private static func p(_ name: String) -> Claim { (name, .phoneNumber) }
    private static func a(_ name: String) -> Claim { (name, .alternativeSecurityIdCollection) }

    static let table: [String: Signature] = [
        "CopyClaim": Signature(inputs: [s("inputClaim")], outputs: [s("outputClaim")]),
        "CreateStringClaim": Signature(inputs: [], parameters: ["value"], outputs: [s("createdClaim")]),
        "FormatStringClaim": Signature(inputs: [s("inputClaim")], parameters: ["stringFormat"], outputs: [s("outputClaim")]),
        "FormatStringMultipleClaims": Signature(
            inputs: [s("inputClaim1"), s("inputClaim2")], parameters: ["stringFormat"], outputs: [s("outputClaim")]),
        "ChangeCase": Signature(inputs: [s("inputClaim1")], parameters: ["toCase"], outputs: [s("outputClaim")]),
        "StringReplace": Signature(inputs: [s("inputClaim")], parameters: ["oldValue", "newValue"], outputs: [s("outputClaim")]),
        "StringSplit": Signature(inputs: [s("inputClaim")], parameters: ["delimiter"], outputs: [c("outputClaim")]),
        "CompareClaims": Signature(inputs: [s("inputClaim1"), s("inputClaim2")], parameters: ["operator"], outputs: [b("outputClaim")]),
        "CompareClaimToValue": Signature(inputs: [s("inputClaim1")], parameters: ["compareTo", "operator"], outputs: [b("outputClaim")]),
        "AssertStringClaimsAreEqual": Signature(inputs: [s("inputClaim1"), s("inputClaim2")], outputs: []),
        "SetClaimsIfStringsAreEqual": Signature(
            inputs: [s("inputClaim")], parameters: ["matchTo", "stringComparison", "stringMatchMsg", "stringMatchMsgCode"],
            outputs: [s("outputClaim1"), s("outputClaim2"), b("stringCompareResultClaim")]),
        "SetClaimsIfStringsMatch": Signature(
            inputs: [s("claimToMatch")], parameters: ["matchTo", "stringComparison", "outputClaimIfMatched"],
            outputs: [s("outputClaim"), b("stringCompareResultClaim")]),
        "CreateRandomString": Signature(inputs: [], parameters: ["randomGeneratorType"], outputs: [s("outputClaim")]),
        "Hash": Signature(inputs: [s("plaintext"), s("salt")], parameters: ["randomizerSecret"], outputs: [s("hash")]),
        "AndClaims": Signature(inputs: [b("inputClaim1"), b("inputClaim2")], outputs: [b("outputClaim")]),
        "OrClaims": Signature(inputs: [b("inputClaim1"), b("inputClaim2")], outputs: [b("outputClaim")]),
        "NotClaims": Signature(inputs: [b("inputClaim")], outputs: [b("outputClaim")]),
        "CompareBooleanClaimToValue": Signature(inputs: [b("inputClaim")], parameters: ["valueToCompareTo"], outputs: [b("compareResult")]),
        "AssertBooleanClaimIsEqualToValue": Signature(inputs: [b("inputClaim")], parameters: ["valueToCompareTo"], outputs: []),
        "AddItemToStringCollection": Signature(inputs: [s("item"), c("collection")], outputs: [c("collection")]),
        "AddParameterToStringCollection": Signature(inputs: [c("collection")], parameters: ["item"], outputs: [c("collection")]),
        "GetSingleItemFromStringCollection": Signature(inputs: [c("collection")], outputs: [s("extractedItem")]),
        "StringCollectionContains": Signature(inputs: [c("inputClaim")], parameters: ["item"], outputs: [b("outputClaim")]),
        "GetCurrentDateTime": Signature(inputs: [], outputs: [s("currentDateTime")]),
        "DateTimeComparison": Signature(
            inputs: [s("firstDateTime"), s("secondDateTime")], parameters: ["operator", "timeSpanInSeconds"], outputs: [b("result")]),
        "AssertDateTimeIsGreaterThan": Signature(inputs: [s("leftOperand"), s("rightOperand")], outputs: []),
        "GetClaimFromJson": Signature(inputs: [s("inputJson")], parameters: ["claimToExtract"], outputs: [s("extractedClaim")]),
        "GenerateJson": Signature(inputs: [], outputs: [s("outputClaim")], anyInputs: true),
        "CreateAlternativeSecurityId": Signature(inputs: [s("key"), s("identityProvider")], outputs: [s("alternativeSecurityId")]),
        "ConvertPhoneNumberClaimToString": Signature(inputs: [p("phoneNumber")], outputs: [s("phoneNumberString")]),
        "ConvertStringToPhoneNumberClaim": Signature(
            inputs: [], optionalInputs: [s("phoneNumberString"), s("inputClaim"), s("country")], outputs: [p("outputClaim")],
            oneOfInputs: ["phoneNumberString", "inputClaim"]),
        "GetNationalNumberAndCountryCodeFromPhoneNumberString": Signature(
            inputs: [s("phoneNumber")], outputs: [s("nationalNumber"), s("countryCode")]),
        "DoesClaimExist": Signature(inputs: [s("inputClaim")], outputs: [b("outputClaim")]),
        "NullClaim": Signature(inputs: [], outputs: [s("claim_to_null")]),
        "StringContains": Signature(inputs: [s("inputClaim")], parameters: ["contains"], outputs: [b("outputClaim")]),
        "StringJoin": Signature(inputs: [c("inputClaim")], outputs: [s("outputClaim")]),
        "StringSubstring": Signature(inputs: [s("inputClaim")], parameters: ["startIndex"], outputs: [s("outputClaim")]),
        "ParseDomain": Signature(inputs: [s("emailAddress")], outputs: [s("domain")]),
        "LookupValue": Signature(inputs: [s("inputParameterId")], outputs: [s("outputClaim")]),
        "SetClaimIfBooleansMatch": Signature(
            inputs: [b("claimToMatch")], parameters: ["matchTo", "outputClaimIfMatched"], outputs: [s("outputClaim")]),
        "AdjustNumber": Signature(inputs: [s("inputClaim")], outputs: [s("outputClaim")]),
        "AssertNumber": Signature(inputs: [s("inputClaim")], parameters: ["Operator", "CompareToValue"], outputs: [], optionalOutputs: [b("outputClaim")]),
        "ConvertNumberToStringClaim": Signature(inputs: [s("inputClaim")], outputs: [s("outputClaim")]),
        "StringCollectionContainsClaim": Signature(inputs: [c("collection"), s("item")], outputs: [b("outputClaim")]),
        "ConvertDateTimeToDateClaim": Signature(inputs: [s("inputClaim")], outputs: [s("outputClaim")]),
        "ConvertDateToDateTimeClaim": Signature(inputs: [s("inputClaim")], outputs: [s("outputClaim")]),
        "IsTermsOfUseConsentRequired": Signature(
            inputs: [], optionalInputs: [s("termsOfUseConsentDateTime")], parameters: ["termsOfUseTextUpdateDateTime"], outputs: [b("result")]),
        "GetSingleItemFromJson": Signature(inputs: [s("inputJson")], outputs: [s("key"), s("value")]),
        "GetNumericClaimFromJson": Signature(inputs: [s("inputJson")], parameters: ["claimToExtract"], outputs: [s("extractedClaim")]),
        "GetSingleValueFromJsonArray": Signature(inputs: [s("inputJsonClaim")], outputs: [s("extractedClaim")]),
        "CreateJsonArray": Signature(inputs: [s("inputClaim")], outputs: [s("outputClaim")]),
        "AddItemToAlternativeSecurityIdCollection": Signature(inputs: [s("item")], optionalInputs: [a("collection")], outputs: [a("collection")]),
        "GetIdentityProvidersFromAlternativeSecurityIdCollectionTransformation": Signature(
            inputs: [a("alternativeSecurityIdCollection")], outputs: [c("identityProvidersCollection")]),
        "RemoveAlternativeSecurityIdByIdentityProvider": Signature(
            inputs: [s("identityProvider"), a("collection")], outputs: [a("collection")]),
        "GetClaimsFromJsonArray": Signature(inputs: [s("jsonSource")], outputs: [], anyOutputs: true),
        "GetClaimsFromJsonArrayV2": Signature(inputs: [c("jsonSource")], outputs: [], anyOutputs: true),
        "XmlStringToJsonString": Signature(inputs: [s("xml")], outputs: [s("json")]),
        "BuildUri": Signature(inputs: [s("path")], parameters: ["scheme", "host"], outputs: [s("outputClaim")], anyInputs: true),
        "CreateOtpSecret": Signature(inputs: [], outputs: [s("outputClaim")]),
        "CopyClaimIfPredicateMatch": Signature(inputs: [s("inputClaim")], outputs: [s("outputClaim")]),
        "SetClaimsIfRegexMatch": Signature(
            inputs: [s("claimToMatch")], parameters: ["matchTo", "outputClaimIfMatched"], outputs: [],
            optionalOutputs: [s("outputClaim"), b("regexCompareResultClaim")], anyOutputs: true),
        "GetLocalizedStringsTransformation": Signature(inputs: [], outputs: [], anyOutputs: true),
        "FormatLocalizedString": Signature(inputs: [], parameters: ["stringFormatId"], outputs: [s("outputClaim")], anyInputs: true),
        "GetMappedValueFromLocalizedCollection": Signature(inputs: [s("mapFromClaim")], outputs: [s("restrictionValueClaim")]),
    ]

    /// What is wrong with a transformation's declaration; `claimType` gives a claim's data type.
    static func problems(_ transformation: PolicyElement, claimType: (String) -> PolicyClaimType.DataType?) -> [String] {
        let id = transformation["Id"] ?? ""
        let method = transformation["TransformationMethod"] ?? ""
        guard let signature = table[method] else { return [] }
        var problems: [String] = []
        let prefix = "The InputClaims mismatched in ClaimsTransformation with id \"\(id)\" with TransformationMethod \"\(method)\"."
        func check(_ declared: [PolicyElement], _ expected: [Claim], optional: [Claim], kind: String, any: Bool) {
            let names = Set((expected + optional).map(\.name))
            for element in declared {
                let name = element["TransformationClaimType"] ?? ""
                if !any, !names.contains(name) {
                    problems.append("\(prefix) The \(kind) '\(name)' (line \(element.line)) is not one the method takes.")
                }
                if let wanted = (expected + optional).first(where: { $0.name == name })?.type,
                    let claim = element["ClaimTypeReferenceId"], let actual = claimType(claim), actual != wanted
                {
                    problems.append("\(prefix) The \(kind) '\(name)' needs a \(wanted.rawValue) claim; '\(claim)' is \(actual.rawValue).")
                }
            }
            for claim in expected where !declared.contains(where: { $0["TransformationClaimType"] == claim.name }) {
                problems.append("\(prefix) The \(kind) '\(claim.name)' the method needs is not declared.")
            }
        }
        check(transformation.items("InputClaims", "InputClaim"), signature.inputs, optional: signature.optionalInputs, kind: "input claim", any: signature.anyInputs)
        check(
            transformation.items("OutputClaims", "OutputClaim"), signature.outputs, optional: signature.optionalOutputs, kind: "output claim",
            any: signature.anyOutputs)
        if !signature.oneOfInputs.isEmpty {
            let declared = transformation.items("InputClaims", "InputClaim").compactMap { $0["TransformationClaimType"] }
            if declared.filter(signature.oneOfInputs.contains).count != 1 {
                problems.append("\(prefix) Exactly one of the input claims \(signature.oneOfInputs.map { "'\($0)'" }.joined(separator: " or ")) is needed.")
            }
        }
        let parameters = Set(transformation.items("InputParameters", "InputParameter").compactMap { $0["Id"] })
        for parameter in signature.parameters where !parameters.contains(parameter) {
            problems.append("ClaimsTransformation \"\(id)\" (\(method)) needs the input parameter '\(parameter)'.")
        }
        return problems
    }
}
