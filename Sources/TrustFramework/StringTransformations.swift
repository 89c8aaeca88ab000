import Foundation

/// The rest of the reference's string claims transformations (`string-transformations.md`):
/// `BuildUri` and `CreateOtpSecret` (the TOTP pair), the two that match patterns
/// (`SetClaimsIfRegexMatch`, `CopyClaimIfPredicateMatch`) and the three that read the policy's
/// `Localization` (`GetLocalizedStringsTransformation`, `FormatLocalizedString`,
/// `GetMappedValueFromLocalizedCollection`).
enum StringTransformations {
    static let patternMethods: Set<String> = ["SetClaimsIfRegexMatch", "CopyClaimIfPredicateMatch"]
    static let methods: Set<String> = patternMethods.union([
        "BuildUri", "CreateOtpSecret", "GetLocalizedStringsTransformation", "FormatLocalizedString", "GetMappedValueFromLocalizedCollection",
    ])
    /// `FormatLocalizedString`'s most characters ("the maximum length of the formatted string is 4000").
    static let maximumFormatted = 4000

    static func evaluate(_ method: String, _ io: TransformationIO, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> [(
        String, PolicyClaimValue?
    )]? {
        switch method {
        case "BuildUri": return [("outputClaim", .string(buildURI(io, claims)))]
        case "CreateOtpSecret": return [("outputClaim", .string(otpSecret()))]
        case "SetClaimsIfRegexMatch":
            guard let search = io.transformation.search else { throw .invalidInput("SetClaimsIfRegexMatch has no matchTo pattern.") }
            let groups = try patterned(io) { budget in try PolicyPattern.firstMatch(in: io.text("claimToMatch", claims), search, budget: budget) }
            var outputs: [(String, PolicyClaimValue?)] = [
                ("outputClaim", groups == nil ? nil : .string(io.parameter("outputClaimIfMatched") ?? "")),
                ("regexCompareResultClaim", .boolean(groups != nil)),
            ]
            if io.flag("extractGroups"), let groups {
                // A group the match left out clears its claim, as a null group value does in .NET.
                for name in io.transformation.search?.groupNames ?? [] { outputs.append((name, groups[name].map(PolicyClaimValue.string))) }
            }
            return outputs
        case "CopyClaimIfPredicateMatch":
            // The value is checked against the output claim type's own rules: its
            // `PredicateValidationReference` and its `Restriction/Pattern`.
            guard let value = io.value("inputClaim", claims) else { return [] }
            guard let output = io.transformation.outputClaims.first(where: { $0.transformationClaimType == "outputClaim" }),
                let type = io.context.policy?.claimType(output.claimType)
            else { return [("outputClaim", value)] }
            let policy = io.context.policy
            let now = io.context.now
            let holds = try patterned(io) { budget in
                if let pattern = type.pattern, try !PolicyPattern.matches(value.text, pattern.expression, budget: budget) { return false }
                if let validation = type.predicateValidation,
                    try policy?.predicates.problem(with: value.text, validation: validation, budget: budget, now: now) != nil
                {
                    return false
                }
                return true
            }
            return holds ? [("outputClaim", value)] : []
        case "GetLocalizedStringsTransformation":
            let resources = localized(io)
            return io.transformation.outputClaims.compactMap { reference in
                guard let id = reference.transformationClaimType,
                    let text = string(resources, type: "GetLocalizedStringsTransformationClaimType", id: id)
                else { return nil }
                return (id, .string(text))
            }
        case "FormatLocalizedString":
            let id = io.parameter("stringFormatId") ?? ""
            guard let format = string(localized(io), type: "FormatLocalizedStringTransformationClaimType", id: id) else {
                throw .invalidInput("FormatLocalizedString: no localized string '\(id)' of type FormatLocalizedStringTransformationClaimType.")
            }
            let formatted = ClaimsTransformations.format(format, io.transformation.inputClaims.map { claims.text($0.claimType) ?? "" })
            guard formatted.count <= maximumFormatted else {
                throw .invalidInput("FormatLocalizedString: the formatted string is longer than \(maximumFormatted) characters.")
            }
            return [("outputClaim", .string(formatted))]
        case "GetMappedValueFromLocalizedCollection":
            let key = io.text("mapFromClaim", claims)
            guard let output = io.transformation.outputClaims.first(where: { $0.transformationClaimType == "restrictionValueClaim" }) else { return [] }
            // The claim type's localized collection, else its own `Restriction` items.
            let items =
                localized(io).lazy.compactMap { $0.collections[output.claimType.lowercased()] }.first
                ?? io.context.policy?.claimType(output.claimType)?.enumeration ?? []
            guard let item = items.first(where: { $0.text == key }) else {
                throw .invalidInput("GetMappedValueFromLocalizedCollection: '\(key)' is not an item of the claim type '\(output.claimType)'.")
            }
            return [("restrictionValueClaim", .string(item.value))]
        default: return nil
        }
    }

    /// `work` with the budget the runner gave: a pattern that outruns it, or a value too long to
    /// match, is an error rather than "no match".
    private static func patterned<T>(_ io: TransformationIO, _ work: (PolicyPattern.Budget) throws -> T) throws(ClaimsTransformationFailure) -> T {
        guard let budget = io.context.budget else {
            throw .invalidInput("\(io.transformation.method) matches patterns and must run with a matching budget.")
        }
        do {
            return try work(budget)
        } catch {
            throw .invalidInput(
                "\(io.transformation.method) '\(io.transformation.id)': the value is longer than \(PolicyPattern.maximumInput) characters or took too long to match.")
        }
    }

    private static func localized(_ io: TransformationIO) -> [PolicyLocalization.Resources] {
        io.context.policy?.localizedResources(contentDefinition: io.context.contentDefinition, uiLocales: io.context.uiLocales) ?? []
    }

    private static func string(_ resources: [PolicyLocalization.Resources], type: String, id: String) -> String? {
        resources.lazy.compactMap { $0.strings[PolicyLocalization.Resources.key(type, nil, id)] }.first
    }

    /// `scheme://host/label?query`: the `path` input is the label (after `issuer:` when a
    /// `query.issuer` is given, as authenticator apps expect: Key Uri Format), each `query.*`
    /// input and parameter a query parameter (inputs first, as declared). The reference's example:
    /// `otpauth://totp/Contoso%20demo:emily@fabrikam.com?secret=fay2lj7ynpntjgqa&issuer=Contoso+demo`.
    static func buildURI(_ io: TransformationIO, _ claims: PolicyClaims) -> String {
        var query: [(String, String)] = []
        for reference in io.transformation.inputClaims {
            guard let name = reference.transformationClaimType, name.hasPrefix("query.") else { continue }
            query.append((String(name.dropFirst(6)), claims.text(reference.claimType) ?? ""))
        }
        for (id, parameter) in io.transformation.parameters.sorted(by: { $0.key < $1.key }) where id.hasPrefix("query.") {
            query.append((String(id.dropFirst(6)), expand(io, parameter.value)))
        }
        var label = io.text("path", claims).addingPercentEncoding(withAllowedCharacters: labelAllowed) ?? ""
        if let issuer = query.first(where: { $0.0 == "issuer" })?.1 {
            label = (issuer.addingPercentEncoding(withAllowedCharacters: labelAllowed.subtracting(CharacterSet(charactersIn: ":"))) ?? "") + ":" + label
        }
        let scheme = io.parameter("scheme") ?? "otpauth"
        let host = io.parameter("host") ?? "totp"
        let encodedQuery = query.map { "\(formEncoded($0.0))=\(formEncoded($0.1))" }.joined(separator: "&")
        return "\(scheme)://\(host)/\(label)" + (encodedQuery.isEmpty ? "" : "?\(encodedQuery)")
    }

    private static let labelAllowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~@:!$'()*,;=+"))
        .intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))

    private static func formEncoded(_ text: String) -> String {
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~ ")
        return (text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "").replacingOccurrences(of: " ", with: "+")
    }

    /// The string expressions and `{AuthenticatorIssuer}`, which B2C fills with the tenant's name.
    private static func expand(_ io: TransformationIO, _ text: String) -> String {
        io.expand(text).replacingOccurrences(of: "{AuthenticatorIssuer}", with: io.context.tenantName)
    }

    /// A TOTP secret as B2C writes one: 80 random bits in lower-case base32 (16 characters,
    /// RFC 4648's alphabet), from the system's cryptographic generator.
    static func otpSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<10).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return base32(bytes).lowercased()
    }

    /// RFC 4648 base32 without padding.
    static func base32(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var result = ""
        var buffer = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | Int(byte)
            bits += 8
            while bits >= 5 {
                result.append(alphabet[(buffer >> (bits - 5)) & 31])
                bits -= 5
            }
        }
        if bits > 0 { result.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return result
    }
}
