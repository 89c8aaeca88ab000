import Foundation
import Testing

@testable import TrustFramework

/// The rest of the reference's transformations, each with the worked examples of its page
/// (string, social, JSON), run on a policy compiled from XML written here: outputs typed by the
/// policy's claim types, localized strings read by content definition and `ui_locales`, and the
/// pattern transformations within their budget.
@Suite("Claims transformations: the rest of the reference")
struct ReferenceTransformationTests {
    static let claimTypes = """
        <ClaimType Id="text"><DisplayName>Text</DisplayName><DataType>string</DataType></ClaimType>
        <ClaimType Id="displayName"><DisplayName>Name</DisplayName><DataType>string</DataType></ClaimType>
        <ClaimType Id="membershipID"><DisplayName>Member</DisplayName><DataType>int</DataType></ClaimType>
        <ClaimType Id="active"><DisplayName>Active</DisplayName><DataType>boolean</DataType></ClaimType>
        <ClaimType Id="birthDate"><DisplayName>Born</DisplayName><DataType>dateTime</DataType></ClaimType>
        <ClaimType Id="ids"><DisplayName>Identities</DisplayName><DataType>alternativeSecurityIdCollection</DataType></ClaimType>
        <ClaimType Id="jsons"><DisplayName>JSON items</DisplayName><DataType>stringCollection</DataType></ClaimType>
        <ClaimType Id="phone"><DisplayName>Phone</DisplayName><DataType>string</DataType>
          <PredicateValidationReference Id="phoneShape" /></ClaimType>
        <ClaimType Id="message"><DisplayName>Message</DisplayName><DataType>string</DataType>
          <Restriction><Enumeration Text="M1" Value="Default one" /><Enumeration Text="M2" Value="Default two" /></Restriction></ClaimType>
        <ClaimType Id="masked"><DisplayName>Masked</DisplayName><DataType>string</DataType>
          <Mask Type="Regex" Regex="(?&lt;=.).(?=.*@)">*</Mask></ClaimType>
        <ClaimType Id="maskedPhone"><DisplayName>Masked phone</DisplayName><DataType>string</DataType><Mask Type="Simple">XXX-XXX-</Mask></ClaimType>
        """

    /// A policy of `transformations` over ``claimTypes``, with a content definition `page`
    /// localized in English (the default) and Spanish.
    static func policy(_ transformations: String) throws -> CompiledPolicy {
        let xml = """
            <TrustFrameworkPolicy xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicyId="B2C_1A_t" TenantId="t">
            <BuildingBlocks>
              <ClaimsSchema>\(claimTypes)</ClaimsSchema>
              <Predicates><Predicate Id="phoneDigits" Method="MatchesRegex"><Parameters>
                <Parameter Id="RegularExpression">^\\+?[0-9]{4,16}$</Parameter></Parameters></Predicate></Predicates>
              <PredicateValidations><PredicateValidation Id="phoneShape"><PredicateGroups><PredicateGroup>
                <PredicateReferences><PredicateReference Id="phoneDigits" /></PredicateReferences></PredicateGroup></PredicateGroups>
              </PredicateValidation></PredicateValidations>
              <ClaimsTransformations>\(transformations)</ClaimsTransformations>
              <ContentDefinitions><ContentDefinition Id="page"><DataUri>urn:com:microsoft:aad:b2c:elements:contract:selfasserted:2.1.7</DataUri>
                <LocalizedResourcesReferences>
                  <LocalizedResourcesReference Language="en" LocalizedResourcesReferenceId="page.en" />
                  <LocalizedResourcesReference Language="es" LocalizedResourcesReferenceId="page.es" />
                </LocalizedResourcesReferences></ContentDefinition></ContentDefinitions>
              <Localization Enabled="true">
                <SupportedLanguages DefaultLanguage="en"><SupportedLanguage>en</SupportedLanguage><SupportedLanguage>es</SupportedLanguage></SupportedLanguages>
                <LocalizedResources Id="page.en">
                  <LocalizedStrings>
                    <LocalizedString ElementType="GetLocalizedStringsTransformationClaimType" StringId="subject">Your code</LocalizedString>
                    <LocalizedString ElementType="FormatLocalizedStringTransformationClaimType" StringId="exists">The email '{0}' is taken, {1}.</LocalizedString>
                  </LocalizedStrings>
                  <LocalizedCollections><LocalizedCollection ElementType="ClaimType" ElementId="message" TargetCollection="Restriction">
                    <Item Text="M1" Value="First message" /></LocalizedCollection></LocalizedCollections>
                </LocalizedResources>
                <LocalizedResources Id="page.es">
                  <LocalizedStrings>
                    <LocalizedString ElementType="GetLocalizedStringsTransformationClaimType" StringId="subject">Su código</LocalizedString>
                    <LocalizedString ElementType="FormatLocalizedStringTransformationClaimType" StringId="exists">El correo '{0}' ya existe, {1}.</LocalizedString>
                  </LocalizedStrings>
                  <LocalizedCollections><LocalizedCollection ElementType="ClaimType" ElementId="message" TargetCollection="Restriction">
                    <Item Text="M1" Value="Primer mensaje" /></LocalizedCollection></LocalizedCollections>
                </LocalizedResources>
              </Localization>
            </BuildingBlocks>
            </TrustFrameworkPolicy>
            """
        return CompiledPolicy(try PolicyXML.parse(Data(xml.utf8)))
    }

    /// One transformation `T` of `method`: `inputs` and `outputs` as (transformation claim type
    /// or nil, claim), `parameters` as (id, value).
    static func one(
        _ method: String, inputs: [(String?, String)] = [], parameters: [(String, String)] = [], outputs: [(String?, String)] = []
    ) -> String {
        func claim(_ name: String, _ pair: (String?, String)) -> String {
            "<\(name) ClaimTypeReferenceId=\"\(pair.1)\"\(pair.0.map { " TransformationClaimType=\"\($0)\"" } ?? "") />"
        }
        let escaped = parameters.map { ($0.0, $0.1.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: "\"", with: "&quot;")) }
        return """
            <ClaimsTransformation Id="T" TransformationMethod="\(method)">
              <InputClaims>\(inputs.map { claim("InputClaim", $0) }.joined())</InputClaims>
              <InputParameters>\(escaped.map { "<InputParameter Id=\"\($0.0)\" DataType=\"string\" Value=\"\($0.1)\" />" }.joined())</InputParameters>
              <OutputClaims>\(outputs.map { claim("OutputClaim", $0) }.joined())</OutputClaims>
            </ClaimsTransformation>
            """
    }

    func run(
        _ transformation: String, _ claims: [String: PolicyClaimValue], uiLocales: String? = nil, budget: PolicyPattern.Budget? = PolicyPattern.Budget()
    ) throws -> PolicyClaims {
        let policy = try Self.policy(transformation)
        var context = ClaimsTransformationContext(
            now: Date(), tenantName: "Contoso demo", technicalProfileID: "Page", policy: policy, contentDefinition: "page", uiLocales: uiLocales)
        context.budget = budget
        var bag = PolicyClaims(claims)
        try ClaimsTransformations.run(try #require(policy.transformation("T")), on: &bag, context: context)
        return bag
    }

    @Test("social: AddItemToAlternativeSecurityIdCollection (once per identity), GetIdentityProvidersFrom…, RemoveAlternativeSecurityIdByIdentityProvider (the first of the provider)")
    func alternativeSecurityIdCollections() throws {
        let live = #"{"issuer":"live.com","issuerUserId":"MTA4MTQ2MDgyOTI3MDUyNTYzMjcw"}"#
        let facebook = #"{"issuer":"facebook.com","issuerUserId":"MTIzNDU="}"#
        let add = Self.one(
            "AddItemToAlternativeSecurityIdCollection", inputs: [("item", "text"), ("collection", "ids")], outputs: [("collection", "ids")])
        #expect(try run(add, ["text": .string(facebook), "ids": .collection([live])])["ids"] == .collection([live, facebook]))
        #expect(try run(add, ["text": .string(facebook)])["ids"] == .collection([facebook]), "no collection yet: one item")
        #expect(try run(add, ["text": .string(facebook), "ids": .collection([facebook])])["ids"] == .collection([facebook]))
        #expect(throws: ClaimsTransformationFailure.self) { try run(add, ["text": .string("not an identity")]) }
        let issuers = Self.one(
            "GetIdentityProvidersFromAlternativeSecurityIdCollectionTransformation", inputs: [("alternativeSecurityIdCollection", "ids")],
            outputs: [("identityProvidersCollection", "jsons")])
        #expect(try run(issuers, ["ids": .collection([live, facebook])])["jsons"] == .collection(["live.com", "facebook.com"]))
        let remove = Self.one(
            "RemoveAlternativeSecurityIdByIdentityProvider", inputs: [("identityProvider", "text"), ("collection", "ids")], outputs: [("collection", "ids")])
        #expect(try run(remove, ["text": .string("Facebook.com"), "ids": .collection([live, facebook])])["ids"] == .collection([live]))
        #expect(try run(remove, ["text": .string("google.com"), "ids": .collection([live])])["ids"] == .collection([live]))
    }

    @Test("JSON: GetClaimsFromJsonArray and V2 write claims named by their claim types, typed as declared; includeEmptyClaims, errorOnMissingClaims; not JSON is an error")
    func claimsFromJSONArrays() throws {
        let parameters = [("jsonSourceKeyName", "key"), ("jsonSourceValueName", "value"), ("includeEmptyClaims", "false"), ("errorOnMissingClaims", "false")]
        let outputs: [(String?, String)] = [(nil, "displayName"), (nil, "membershipID"), (nil, "active"), (nil, "birthDate"), (nil, "text")]
        let array = Self.one("GetClaimsFromJsonArray", inputs: [("jsonSource", "text")], parameters: parameters, outputs: outputs)
        let json = #"[{"key":"displayName","value":"Someone"},{"key":"membershipID","value":6353399},{"key":"active","value":true},{"key":"birthDate","value":"2005-09-23T00:00:00Z"},{"key":"text","value":""}]"#
        let read = try run(array, ["text": .string(json)])
        #expect(read["displayName"] == .string("Someone") && read["membershipID"] == .integer(6_353_399) && read["active"] == .boolean(true))
        #expect(read["birthDate"] == .string("2005-09-23T00:00:00Z"))
        #expect(read["text"] == .string(json), "an empty value is left out: the claim keeps what it had")
        let withEmpty = Self.one(
            "GetClaimsFromJsonArray", inputs: [("jsonSource", "text")], parameters: parameters.map { $0.0 == "includeEmptyClaims" ? ($0.0, "true") : $0 },
            outputs: outputs)
        #expect(try run(withEmpty, ["text": .string(json)])["text"] == .string(""))
        let strict = Self.one(
            "GetClaimsFromJsonArray", inputs: [("jsonSource", "text")], parameters: parameters.map { $0.0 == "errorOnMissingClaims" ? ($0.0, "true") : $0 },
            outputs: [(nil, "displayName"), (nil, "phone")])
        #expect(throws: ClaimsTransformationFailure.self) { try run(strict, ["text": .string(json)]) }
        let mistyped = #"[{"key":"membershipID","value":"six"}]"#
        #expect(throws: ClaimsTransformationFailure.self) { try run(array, ["text": .string(mistyped)]) }
        #expect(throws: ClaimsTransformationFailure.self) { try run(array, ["text": .string("{not json")]) }

        let v2 = Self.one("GetClaimsFromJsonArrayV2", inputs: [("jsonSource", "jsons")], parameters: parameters, outputs: outputs)
        let items = [#"{"key":"active","value":false}"#, #"{"key":"membershipID","value":42}"#]
        let fromCollection = try run(v2, ["jsons": .collection(items)])
        #expect(fromCollection["active"] == .boolean(false) && fromCollection["membershipID"] == .integer(42) && fromCollection["displayName"] == nil)
    }

    @Test("JSON: XmlStringToJsonString writes the reference's example; repeated elements are arrays, attributes @-named; a DOCTYPE or an oversized document is an error")
    func xmlToJSON() throws {
        let convert = Self.one("XmlStringToJsonString", inputs: [("xml", "text")], outputs: [("json", "displayName")])
        let user = "<user><name>Someone</name><email>someone@example.com</email></user>"
        #expect(try run(convert, ["text": .string(user)])["displayName"] == .string(#"{"user":{"name":"Someone","email":"someone@example.com"}}"#))
        let list = #"<roles kind="app"><role>a</role><role>b</role><empty/></roles>"#
        #expect(try run(convert, ["text": .string(list)])["displayName"] == .string(#"{"roles":{"@kind":"app","role":["a","b"],"empty":null}}"#))
        let entity = #"<!DOCTYPE x [<!ENTITY e "boom">]><x>&e;</x>"#
        #expect(throws: ClaimsTransformationFailure.self) { try run(convert, ["text": .string(entity)]) }
        let huge = "<x>" + String(repeating: "a", count: CollectionTransformations.maximumDocument) + "</x>"
        #expect(throws: ClaimsTransformationFailure.self) { try run(convert, ["text": .string(huge)]) }
        #expect(throws: ClaimsTransformationFailure.self) { try run(convert, ["text": .string("<a><b></a>")]) }
    }

    @Test("string: BuildUri writes the reference's TOTP URI; CreateOtpSecret 80 random bits in base32")
    func totpPair() throws {
        let build = Self.one(
            "BuildUri", inputs: [("path", "text"), ("query.secret", "displayName")],
            parameters: [("scheme", "otpauth"), ("host", "totp"), ("query.issuer", "{AuthenticatorIssuer}")], outputs: [("outputClaim", "text")])
        let uri = try run(build, ["text": .string("emily@fabrikam.com"), "displayName": .string("fay2lj7ynpntjgqa")])["text"]
        #expect(uri == .string("otpauth://totp/Contoso%20demo:emily@fabrikam.com?secret=fay2lj7ynpntjgqa&issuer=Contoso+demo"))
        let create = Self.one("CreateOtpSecret", outputs: [("outputClaim", "text")])
        let first = try run(create, [:])["text"]?.text ?? ""
        let second = try run(create, [:])["text"]?.text ?? ""
        #expect(first.count == 16 && first.allSatisfy { "abcdefghijklmnopqrstuvwxyz234567".contains($0) } && first != second, "\(first) \(second)")
        #expect(StringTransformations.base32(Array("foobar".utf8)) == "MZXW6YTBOI", "RFC 4648's test vector")
    }

    @Test("patterns: SetClaimsIfRegexMatch (searching, with named groups), CopyClaimIfPredicateMatch (the output claim type's predicate); both need a budget, and a pattern that runs past it is an error, not a miss")
    func patternTransformations() throws {
        let regex = Self.one(
            "SetClaimsIfRegexMatch", inputs: [("claimToMatch", "text")],
            parameters: [("matchTo", "(?<alias>.*)@(.*)$"), ("outputClaimIfMatched", "isEmail"), ("extractGroups", "true")],
            outputs: [("outputClaim", "displayName"), ("regexCompareResultClaim", "active"), (nil, "alias")])
        let matched = try run(regex, ["text": .string("emily@contoso.com")])
        #expect(matched["displayName"] == .string("isEmail") && matched["active"] == .boolean(true) && matched["alias"] == .string("emily"))
        let missed = try run(regex, ["text": .string("emily"), "displayName": .string("before")])
        #expect(missed["displayName"] == nil && missed["active"] == .boolean(false) && missed["alias"] == nil)
        #expect(throws: ClaimsTransformationFailure.self) { try run(regex, ["text": .string("a@b")], budget: nil) }
        let backtracking = Self.one(
            "SetClaimsIfRegexMatch", inputs: [("claimToMatch", "text")], parameters: [("matchTo", "^(a+)+$"), ("outputClaimIfMatched", "x")],
            outputs: [("regexCompareResultClaim", "active")])
        #expect(throws: ClaimsTransformationFailure.self) {
            try run(backtracking, ["text": .string(String(repeating: "a", count: 40) + "!")], budget: PolicyPattern.Budget(.milliseconds(20)))
        }
        #expect(throws: ClaimsTransformationFailure.self) { try run(regex, ["text": .string(String(repeating: "a", count: 300) + "@b")]) }

        let copy = Self.one("CopyClaimIfPredicateMatch", inputs: [("inputClaim", "text")], outputs: [("outputClaim", "phone")])
        #expect(try run(copy, ["text": .string("+11234567890")])["phone"] == .string("+11234567890"))
        #expect(try run(copy, ["text": .string("bob@contoso.com"), "phone": .string("+1999")])["phone"] == .string("+1999"), "no match: unchanged")
        #expect(throws: ClaimsTransformationFailure.self) { try run(copy, ["text": .string("+1234")], budget: nil) }
    }

    @Test("localized strings: GetLocalizedStringsTransformation, FormatLocalizedString and GetMappedValueFromLocalizedCollection read the content definition's resources in the ui_locales language, else the default")
    func localizedStrings() throws {
        let strings = Self.one("GetLocalizedStringsTransformation", outputs: [("subject", "text")])
        #expect(try run(strings, [:])["text"] == .string("Your code"))
        #expect(try run(strings, [:], uiLocales: "es-MX")["text"] == .string("Su código"), "a regional tag reads its language")
        #expect(try run(strings, [:], uiLocales: "fr")["text"] == .string("Your code"), "a language the policy lacks reads the default")
        let format = Self.one(
            "FormatLocalizedString", inputs: [(nil, "displayName"), (nil, "text")], parameters: [("stringFormatId", "exists")],
            outputs: [("outputClaim", "message")])
        let claims: [String: PolicyClaimValue] = ["displayName": .string("sarah@contoso.com"), "text": .string("Sarah")]
        #expect(try run(format, claims, uiLocales: "es")["message"] == .string("El correo 'sarah@contoso.com' ya existe, Sarah."))
        let unknown = Self.one("FormatLocalizedString", parameters: [("stringFormatId", "nothing")], outputs: [("outputClaim", "message")])
        #expect(throws: ClaimsTransformationFailure.self) { try run(unknown, [:]) }
        let mapped = Self.one("GetMappedValueFromLocalizedCollection", inputs: [("mapFromClaim", "text")], outputs: [("restrictionValueClaim", "message")])
        #expect(try run(mapped, ["text": .string("M1")], uiLocales: "es")["message"] == .string("Primer mensaje"))
        #expect(try run(mapped, ["text": .string("M1")])["message"] == .string("First message"))
        #expect(throws: ClaimsTransformationFailure.self) { try run(mapped, ["text": .string("M9")]) }
    }

    @Test("Mask: Simple covers the leading characters, Regex replaces each match; a value past the matching limits is masked whole")
    func masks() throws {
        let policy = try Self.policy("")
        let budget = PolicyPattern.Budget()
        let regex = try #require(policy.claimType("masked")?.mask)
        #expect(regex.apply(to: "emily@contoso.com", budget: budget) == "e****@contoso.com")
        let long = String(repeating: "a", count: 300) + "@b"
        #expect(regex.apply(to: long, budget: budget) == String(repeating: "*", count: long.count))
        let simple = try #require(policy.claimType("maskedPhone")?.mask)
        #expect(simple.apply(to: "425-555-1212", budget: budget) == "XXX-XXX-1212")
        #expect(simple.apply(to: "12", budget: budget) == "XX", "shorter than the mask: nothing of it shows")
    }
}
