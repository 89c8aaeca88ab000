import Foundation
import Testing

@testable import TrustFramework

/// The phone number claims transformations with the worked examples of B2C's reference
/// (`phone-number-claims-transformations.md`), and their upload signatures.
@Suite("Claims transformations: phone numbers")
struct PhoneTransformationTests {
    let examples = ClaimsTransformationTests()

    @Test("ConvertStringToPhoneNumberClaim: an international number, a national one with its country; an invalid one is the profile's message")
    func convertString() throws {
        let international = examples.transformation(
            "ConvertStringToPhoneNumberClaim", inputs: [("phoneNumberString", "phoneString")], outputs: [("outputClaim", "phoneNumber")])
        #expect(try examples.run(international, ["phoneString": .string("+1 (123) 456-7890")])["phoneNumber"] == .string("+11234567890"))
        let national = examples.transformation(
            "ConvertStringToPhoneNumberClaim", inputs: [("phoneNumberString", "phoneString"), ("country", "countryCode")],
            outputs: [("outputClaim", "phoneNumber")])
        #expect(
            try examples.run(national, ["phoneString": .string("033 456-7890"), "countryCode": .string("DK")])["phoneNumber"]
                == .string("+450334567890"))
        // The reference's first name for the input claim.
        let older = examples.transformation("ConvertStringToPhoneNumberClaim", inputs: [("inputClaim", "p")], outputs: [("outputClaim", "n")])
        #expect(try examples.run(older, ["p": .string("+1 (123) 456-7890")])["n"] == .string("+11234567890"))
        for bad in ["123 456", "+1 (123) 456-78x0", "+999 1234567", "+12", "+1234567890123456", "033 456-7890"] {
            #expect(throws: ClaimsTransformationFailure.assertion(
                messageKey: "UserMessageIfClaimsTransformationInvalidPhoneNumber", defaultMessage: "The phone number you provided is not valid.")) {
                try examples.run(international, ["phoneString": .string(bad)])
            }
        }
        #expect(throws: ClaimsTransformationFailure.self) {
            try examples.run(national, ["phoneString": .string("033 456-7890"), "countryCode": .string("ZZ")])
        }
    }

    @Test("ConvertPhoneNumberClaimToString and GetNationalNumberAndCountryCodeFromPhoneNumberString, ISO3166 and CallingCode")
    func convertAndSplit() throws {
        let toString = examples.transformation(
            "ConvertPhoneNumberClaimToString", inputs: [("phoneNumber", "cellPhoneNumber")], outputs: [("phoneNumberString", "cellPhone")])
        #expect(try examples.run(toString, ["cellPhoneNumber": .string("+11234567890")])["cellPhone"] == .string("+11234567890"))
        func split(_ type: String, throwing: String = "false") -> PolicyTransformation {
            examples.transformation(
                "GetNationalNumberAndCountryCodeFromPhoneNumberString", inputs: [("phoneNumber", "phoneNumber")],
                parameters: [("throwExceptionOnFailure", "boolean", throwing), ("countryCodeType", "string", type)],
                outputs: [("nationalNumber", "nationalNumber"), ("countryCode", "countryCode")])
        }
        let iso = try examples.run(split("ISO3166"), ["phoneNumber": .string("+49 (123) 456-7890")])
        #expect(iso["nationalNumber"] == .string("1234567890") && iso["countryCode"] == .string("DE"))
        let calling = try examples.run(split("CallingCode"), ["phoneNumber": .string("+49 (123) 456-7890")])
        #expect(calling["nationalNumber"] == .string("1234567890") && calling["countryCode"] == .string("+49"))
        let ones = try examples.run(split("ISO3166"), ["phoneNumber": .string("+1 (123) 456-7890")])
        #expect(ones["countryCode"] == .string("US"), "+1's main region")
        // Not valid, no exception asked for: the outputs stay as they were.
        let kept = try examples.run(split("ISO3166"), ["phoneNumber": .string("0123 456"), "nationalNumber": .string("earlier")])
        #expect(kept["nationalNumber"] == .string("earlier") && kept["countryCode"] == nil)
        #expect(throws: ClaimsTransformationFailure.assertion(
            messageKey: "UserMessageIfPhoneNumberParseFailure", defaultMessage: "The phone number you provided is not valid.")) {
            try examples.run(split("ISO3166", throwing: "true"), ["phoneNumber": .string("0123 456")])
        }
    }

    @Test("the calling codes are prefix-free and every region maps back to its code")
    func table() {
        let codes = PhoneNumbers.regions.map(\.code)
        #expect(Set(codes).count == codes.count)
        for code in codes { #expect(!codes.contains { $0 != code && $0.hasPrefix(code) }, "\(code) is a prefix of another code") }
        for entry in PhoneNumbers.regions { for region in entry.regions { #expect(PhoneNumbers.regionCodes[region] == entry.code, "\(region)") } }
        #expect(PhoneNumbers.standard("+44 20 7946 0958") == "+442079460958" && PhoneNumbers.split("+7 495 123-45-67")?.callingCode == "7")
    }

    @Test("a phone transformation declared against its signature is refused at upload")
    func signatures() throws {
        func problems(_ xml: String) throws -> [String] {
            let element = try PolicyXML.parse(Data(#"<ClaimsTransformations xmlns="\#(PolicyXML.namespace)">\#(xml)</ClaimsTransformations>"#.utf8))
            return TransformationSignatures.problems(element.children[0]) { ["phone": .phoneNumber, "text": .string][$0.lowercased()] }
        }
        let both = """
            <ClaimsTransformation Id="T" TransformationMethod="ConvertStringToPhoneNumberClaim">
              <InputClaims><InputClaim ClaimTypeReferenceId="text" TransformationClaimType="phoneNumberString" />
                <InputClaim ClaimTypeReferenceId="text" TransformationClaimType="inputClaim" /></InputClaims>
              <OutputClaims><OutputClaim ClaimTypeReferenceId="phone" TransformationClaimType="outputClaim" /></OutputClaims>
            </ClaimsTransformation>
            """
        #expect(try problems(both).contains { $0.contains("Exactly one of the input claims") })
        let wrongType = """
            <ClaimsTransformation Id="T" TransformationMethod="ConvertPhoneNumberClaimToString">
              <InputClaims><InputClaim ClaimTypeReferenceId="text" TransformationClaimType="phoneNumber" /></InputClaims>
              <OutputClaims><OutputClaim ClaimTypeReferenceId="text" TransformationClaimType="phoneNumberString" /></OutputClaims>
            </ClaimsTransformation>
            """
        #expect(try problems(wrongType).contains { $0.contains("needs a phoneNumber claim; 'text' is string") })
    }
}
