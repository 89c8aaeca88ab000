import Foundation
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys
@testable import TrustFramework

/// The claims transformations, each with the inputs and outputs of the worked examples in B2C's
/// claims-transformation reference (string, boolean, string collection, date, JSON, social).
@Suite("Claims transformations: the reference's examples")
struct ClaimsTransformationTests {
    let context = ClaimsTransformationContext(
        now: Date(timeIntervalSince1970: 1_642_160_435), tenantName: "b2cdemo.onmicrosoft.com", technicalProfileID: "Facebook-OAUTH",
        secret: { $0 == "B2C_1A_AccountTransformSecret" ? "pepper" : nil })

    /// A transformation of `method` with inputs (transformation claim type, claim), parameters
    /// (id, data type, value) and outputs.
    func transformation(
        _ method: String, inputs: [(String, String)] = [], parameters: [(String, String, String)] = [], outputs: [(String, String)] = []
    ) -> PolicyTransformation {
        func claim(_ name: String, _ pair: (String, String)) -> PolicyElement {
            PolicyElement(name: name, attributes: ["TransformationClaimType": pair.0, "ClaimTypeReferenceId": pair.1])
        }
        return PolicyTransformation(
            PolicyElement(
                name: "ClaimsTransformation", attributes: ["Id": "T", "TransformationMethod": method],
                children: [
                    PolicyElement(name: "InputClaims", children: inputs.map { claim("InputClaim", $0) }),
                    PolicyElement(
                        name: "InputParameters",
                        children: parameters.map {
                            PolicyElement(name: "InputParameter", attributes: ["Id": $0.0, "DataType": $0.1, "Value": $0.2])
                        }),
                    PolicyElement(name: "OutputClaims", children: outputs.map { claim("OutputClaim", $0) }),
                ]))
    }

    func run(_ transformation: PolicyTransformation, _ claims: [String: PolicyClaimValue]) throws -> PolicyClaims {
        var bag = PolicyClaims(claims)
        try ClaimsTransformations.run(transformation, on: &bag, context: context)
        return bag
    }

    @Test("general, string and boolean: DoesClaimExist, NullClaim, StringContains, StringJoin, StringSubstring, ParseDomain, LookupValue, SetClaimIfBooleansMatch")
    func moreStrings() throws {
        let exists = transformation("DoesClaimExist", inputs: [("inputClaim", "email")], outputs: [("outputClaim", "isEmail")])
        #expect(try run(exists, ["email": .string("someone@contoso.com")])["isEmail"] == .boolean(true))
        #expect(try run(exists, [:])["isEmail"] == .boolean(false))
        #expect(try run(transformation("NullClaim", outputs: [("claim_to_null", "email")]), ["email": .string("a@b.c")])["email"] == nil)
        let contains = transformation(
            "StringContains", inputs: [("inputClaim", "roles")], parameters: [("contains", "string", "admin"), ("ignoreCase", "string", "true")],
            outputs: [("outputClaim", "isAdmin")])
        #expect(try run(contains, ["roles": .string("Test, Admin, Reader")])["isAdmin"] == .boolean(true))
        #expect(try run(contains, ["roles": .string("Test, Reader")])["isAdmin"] == .boolean(false))
        let join = transformation(
            "StringJoin", inputs: [("inputClaim", "roles")], parameters: [("delimiter", "string", ",")], outputs: [("outputClaim", "rolesText")])
        #expect(try run(join, ["roles": .collection(["Admin", "Author", "Reader"])])["rolesText"] == .string("Admin,Author,Reader"))
        let substring = transformation(
            "StringSubstring", inputs: [("inputClaim", "phone")], parameters: [("startIndex", "int", "0"), ("length", "int", "2")],
            outputs: [("outputClaim", "prefix")])
        #expect(try run(substring, ["phone": .string("+1234567890")])["prefix"] == .string("+1"))
        #expect(throws: ClaimsTransformationFailure.self) { try run(substring, ["phone": .string("+")]) }
        let domain = transformation("ParseDomain", inputs: [("emailAddress", "email")], outputs: [("domain", "domain")])
        #expect(try run(domain, ["email": .string("joe@outlook.com")])["domain"] == .string("outlook.com"))
        let lookup = transformation(
            "LookupValue", inputs: [("inputParameterId", "countryCode")],
            parameters: [("us", "string", "United States"), ("fr", "string", "France"), ("errorOnFailedLookup", "boolean", "true")],
            outputs: [("outputClaim", "country")])
        #expect(try run(lookup, ["countryCode": .string("fr")])["country"] == .string("France"))
        #expect(throws: ClaimsTransformationFailure.self) { try run(lookup, ["countryCode": .string("de")]) }
        let booleans = transformation(
            "SetClaimIfBooleansMatch", inputs: [("claimToMatch", "hasPromotionCode")],
            parameters: [("matchTo", "string", "true"), ("outputClaimIfMatched", "string", "V1")], outputs: [("outputClaim", "code")])
        #expect(try run(booleans, ["hasPromotionCode": .boolean(true)])["code"] == .string("V1"))
        #expect(try run(booleans, ["hasPromotionCode": .boolean(false)])["code"] == nil)
    }

    @Test("integer, collection, date and JSON: AdjustNumber, AssertNumber, ConvertNumberToStringClaim, StringCollectionContainsClaim, the date conversions, IsTermsOfUseConsentRequired, the JSON readers, CreateJsonArray")
    func numbersDatesAndJSON() throws {
        let adjust = transformation("AdjustNumber", inputs: [("inputClaim", "steps")], parameters: [("Operator", "string", "INCREMENT")], outputs: [("outputClaim", "steps")])
        #expect(try run(adjust, ["steps": .integer(1)])["steps"] == .integer(2))
        #expect(try run(adjust, [:])["steps"] == .integer(1), "a null input counts as 0")
        let assertion = transformation(
            "AssertNumber", inputs: [("inputClaim", "attempts")], parameters: [("Operator", "string", "GreaterThan"), ("CompareToValue", "int", "5"), ("throwError", "boolean", "true")])
        #expect(throws: ClaimsTransformationFailure.assertion(messageKey: "AssertNumberError", defaultMessage: "The number comparison of ClaimsTransformation 'T' failed.")) {
            try run(assertion, ["attempts": .integer(10)])
        }
        _ = try run(assertion, ["attempts": .integer(3)])
        let evaluation = transformation(
            "AssertNumber", inputs: [("inputClaim", "attempts")], parameters: [("Operator", "string", "LessThan"), ("CompareToValue", "int", "5"), ("throwError", "boolean", "false")],
            outputs: [("outputClaim", "few")])
        #expect(try run(evaluation, ["attempts": .integer(3)])["few"] == .boolean(true))
        #expect(try run(transformation("ConvertNumberToStringClaim", inputs: [("inputClaim", "n")], outputs: [("outputClaim", "s")]), ["n": .integer(291_802)])["s"] == .string("291802"))
        let member = transformation(
            "StringCollectionContainsClaim", inputs: [("collection", "roles"), ("item", "role")], parameters: [("ignoreCase", "string", "true")],
            outputs: [("outputClaim", "hasRole")])
        #expect(try run(member, ["roles": .collection(["Admin", "Reader"]), "role": .string("admin")])["hasRole"] == .boolean(true))
        let toDate = transformation("ConvertDateTimeToDateClaim", inputs: [("inputClaim", "when")], outputs: [("outputClaim", "day")])
        #expect(try run(toDate, ["when": .string("2022-01-03T11:34:56.0000000Z")])["day"] == .string("2022-01-03"))
        let toDateTime = transformation("ConvertDateToDateTimeClaim", inputs: [("inputClaim", "day")], outputs: [("outputClaim", "when")])
        #expect(try run(toDateTime, ["day": .string("2022-01-03")])["when"] == .string("2022-01-03T00:00:00.0000000Z"))
        let terms = transformation(
            "IsTermsOfUseConsentRequired", inputs: [("termsOfUseConsentDateTime", "consented")],
            parameters: [("termsOfUseTextUpdateDateTime", "dateTime", "2021-11-15T00:00:00")], outputs: [("result", "required")])
        #expect(try run(terms, ["consented": .string("2021-10-15T21:34:33.0000000Z")])["required"] == .boolean(true))
        #expect(try run(terms, ["consented": .string("2021-12-01T00:00:00.0000000Z")])["required"] == .boolean(false))
        #expect(try run(terms, [:])["required"] == .boolean(true), "never consented")
        let single = transformation("GetSingleItemFromJson", inputs: [("inputJson", "json")], outputs: [("key", "k"), ("value", "v")])
        let first = try run(single, ["json": .string(#"{"zeta": "first", "alpha": 2}"#)])
        #expect(first["k"] == .string("zeta") && first["v"] == .string("first"), "the first member as written")
        let numeric = transformation("GetNumericClaimFromJson", inputs: [("inputJson", "json")], parameters: [("claimToExtract", "string", "id")], outputs: [("extractedClaim", "id")])
        #expect(try run(numeric, ["json": .string(#"{"id": 6353399}"#)])["id"] == .integer(6_353_399))
        let array = transformation("GetSingleValueFromJsonArray", inputs: [("inputJsonClaim", "json")], outputs: [("extractedClaim", "first")])
        #expect(try run(array, ["json": .string(#"["someone@example.com", "Someone", 6353399]"#)])["first"] == .string("someone@example.com"))
        #expect(throws: ClaimsTransformationFailure.self) { try run(array, ["json": .string("not json")]) }
        let create = transformation("CreateJsonArray", inputs: [("inputClaim", "email")], outputs: [("outputClaim", "list")])
        #expect(try run(create, ["email": .string("some\"one@example.com")])["list"] == .string(#"["some\"one@example.com"]"#))
    }

    @Test("the IsDateRange predicate: a date from Minimum to Maximum (a date, or Today), whole days in UTC; anything else fails")
    func dateRange() throws {
        func element(_ name: String, _ attributes: [String: String] = [:], _ children: [PolicyElement] = [], text: String = "") -> PolicyElement {
            PolicyElement(name: name, attributes: attributes, children: children, text: text)
        }
        let blocks = element("BuildingBlocks", [:], [
            element("Predicates", [:], [
                element("Predicate", ["Id": "Range", "Method": "IsDateRange", "HelpText": "Choose a date from 1970 to today."], [
                    element("Parameters", [:], [element("Parameter", ["Id": "Minimum"], text: "1970-01-01"), element("Parameter", ["Id": "Maximum"], text: "Today")])
                ])
            ]),
            element("PredicateValidations", [:], [
                element("PredicateValidation", ["Id": "InRange"], [
                    element("PredicateGroups", [:], [element("PredicateGroup", [:], [element("PredicateReferences", [:], [element("PredicateReference", ["Id": "Range"])])])])
                ])
            ]),
        ])
        let predicates = PolicyPredicates(blocks)
        let now = try #require(DateAndJSONTransformations.date("2022-01-14T11:40:35Z"))
        func problem(_ value: String) throws -> String? {
            try predicates.problem(with: value, validation: "InRange", budget: PolicyPattern.Budget(), now: now)
        }
        #expect(try problem("1970-01-01") == nil && problem("2022-01-14") == nil && problem("2000-02-29T10:00:00Z") == nil)
        #expect(try problem("1969-12-31") == "Choose a date from 1970 to today.")
        #expect(try problem("2022-01-15") == "Choose a date from 1970 to today.", "tomorrow is after Today")
        #expect(try problem("not a date") == "Choose a date from 1970 to today.")
    }

    @Test("string: copy, create, format, change case, replace, split")
    func strings() throws {
        #expect(try run(transformation("CopyClaim", inputs: [("inputClaim", "a")], outputs: [("outputClaim", "b")]), ["a": .string("bob@contoso.com")])["b"] == .string("bob@contoso.com"))
        #expect(try run(transformation("CreateStringClaim", parameters: [("value", "string", "Contoso terms of service...")], outputs: [("createdClaim", "TOS")]), [:])["tos"] == .string("Contoso terms of service..."))
        let formatted = try run(
            transformation("FormatStringClaim", inputs: [("inputClaim", "objectId")], parameters: [("stringFormat", "string", "cpim_{0}@{RelyingPartyTenantId}")], outputs: [("outputClaim", "upn")]),
            ["objectId": .string("5164db16-3eee-4629-bfda-dcc3326790e9")])
        #expect(formatted["upn"] == .string("cpim_5164db16-3eee-4629-bfda-dcc3326790e9@b2cdemo.onmicrosoft.com"))
        let multiple = try run(
            transformation("FormatStringMultipleClaims", inputs: [("inputClaim1", "givenName"), ("inputClaim2", "surname")], parameters: [("stringFormat", "string", "{0} {1}")], outputs: [("outputClaim", "displayName")]),
            ["givenName": .string("Joe"), "surname": .string("Fernando")])
        #expect(multiple["displayName"] == .string("Joe Fernando"))
        let lower = try run(
            transformation("ChangeCase", inputs: [("inputClaim1", "email")], parameters: [("toCase", "string", "LOWER")], outputs: [("outputClaim", "email")]),
            ["email": .string("SomeOne@contoso.com")])
        #expect(lower["email"] == .string("someone@contoso.com"), "the same claim in and out")
        let replaced = try run(
            transformation("StringReplace", inputs: [("inputClaim", "phoneNumber")], parameters: [("oldValue", "string", "-"), ("newValue", "string", "")], outputs: [("outputClaim", "phoneNumber")]),
            ["phoneNumber": .string("+164-411-452-054")])
        #expect(replaced["phoneNumber"] == .string("+164411452054"))
        let split = try run(
            transformation("StringSplit", inputs: [("inputClaim", "roles")], parameters: [("delimiter", "string", ",")], outputs: [("outputClaim", "list")]),
            ["roles": .string("Admin,Author,Reader"), "list": .collection(["old"])])
        #expect(split["list"] == .collection(["Admin", "Author", "Reader"]), "the output collection is replaced")
    }

    @Test("string comparisons and assertions: CompareClaims, CompareClaimToValue, SetClaimsIfStrings…, AssertStringClaimsAreEqual")
    func comparisons() throws {
        let compared = try run(
            transformation("CompareClaims", inputs: [("inputClaim1", "a"), ("inputClaim2", "b")], parameters: [("operator", "string", "NOT EQUAL"), ("ignoreCase", "string", "true")], outputs: [("outputClaim", "different")]),
            ["a": .string("someone@contoso.com"), "b": .string("someone@outlook.com")])
        #expect(compared["different"] == .boolean(true))
        let toValue = try run(
            transformation("CompareClaimToValue", inputs: [("inputClaim1", "v")], parameters: [("compareTo", "string", "V1"), ("operator", "string", "EQUAL"), ("ignoreCase", "string", "true")], outputs: [("outputClaim", "same")]),
            ["v": .string("v1")])
        #expect(toValue["same"] == .boolean(true))
        let matched = try run(
            transformation("SetClaimsIfStringsMatch", inputs: [("claimToMatch", "ageGroup")], parameters: [("matchTo", "string", "Minor"), ("stringComparison", "string", "ordinalIgnoreCase"), ("outputClaimIfMatched", "string", "B2C_V1_90001")], outputs: [("outputClaim", "isMinor"), ("stringCompareResultClaim", "isMinorResponseCode")]),
            ["ageGroup": .string("Minor")])
        #expect(matched["isMinor"] == .string("B2C_V1_90001") && matched["isMinorResponseCode"] == .boolean(true))
        let equalStrings = try run(
            transformation("SetClaimsIfStringsAreEqual", inputs: [("inputClaim", "tos")], parameters: [("matchTo", "string", "V1"), ("stringComparison", "string", "ordinalIgnoreCase"), ("stringMatchMsg", "string", "The TOS is upgraded to v2"), ("stringMatchMsgCode", "string", "B2C_V1_90005")], outputs: [("outputClaim1", "message"), ("outputClaim2", "code"), ("stringCompareResultClaim", "upgraded")]),
            ["tos": .string("v1")])
        #expect(equalStrings["message"] == .string("The TOS is upgraded to v2") && equalStrings["code"] == .string("B2C_V1_90005"))
        #expect(equalStrings["upgraded"] == .boolean(true))
        let assertion = transformation("AssertStringClaimsAreEqual", inputs: [("inputClaim1", "a"), ("inputClaim2", "b")], parameters: [("stringComparison", "string", "ordinalIgnoreCase")])
        #expect(throws: ClaimsTransformationFailure.self) { try run(assertion, ["a": .string("someone@contoso.com"), "b": .string("someone@outlook.com")]) }
        #expect(throws: Never.self) { try run(assertion, ["a": .string("Someone@contoso.com"), "b": .string("someone@CONTOSO.com")]) }
    }

    @Test("boolean: And, Or, Not, CompareBooleanClaimToValue, AssertBooleanClaimIsEqualToValue")
    func booleans() throws {
        let bag: [String: PolicyClaimValue] = ["a": .boolean(true), "b": .boolean(false)]
        #expect(try run(transformation("AndClaims", inputs: [("inputClaim1", "a"), ("inputClaim2", "b")], outputs: [("outputClaim", "r")]), bag)["r"] == .boolean(false))
        #expect(try run(transformation("OrClaims", inputs: [("inputClaim1", "a"), ("inputClaim2", "b")], outputs: [("outputClaim", "r")]), bag)["r"] == .boolean(true))
        #expect(try run(transformation("NotClaims", inputs: [("inputClaim", "b")], outputs: [("outputClaim", "b")]), bag)["b"] == .boolean(true))
        #expect(try run(transformation("CompareBooleanClaimToValue", inputs: [("inputClaim", "b")], parameters: [("valueToCompareTo", "boolean", "true")], outputs: [("compareResult", "r")]), bag)["r"] == .boolean(false))
        do {
            _ = try run(transformation("AssertBooleanClaimIsEqualToValue", inputs: [("inputClaim", "b")], parameters: [("valueToCompareTo", "boolean", "true")]), bag)
            Issue.record("a false claim passed an assertion that it is true")
        } catch let failure as ClaimsTransformationFailure {
            #expect(failure == .assertion(messageKey: "UserMessageIfClaimsTransformationBooleanValueIsNotEqual", defaultMessage: "Boolean claim value comparison failed for claim type \"b\"."))
        }
        #expect(throws: ClaimsTransformationFailure.self, "a missing boolean input is an error") {
            try run(transformation("NotClaims", inputs: [("inputClaim", "missing")], outputs: [("outputClaim", "r")]), bag)
        }
    }

    @Test("string collections: add an item or a parameter, first item, contains")
    func collections() throws {
        let added = try run(
            transformation("AddItemToStringCollection", inputs: [("item", "email"), ("collection", "otherMails")], outputs: [("collection", "otherMails")]),
            ["email": .string("admin@contoso.com"), "otherMails": .collection(["someone@outlook.com"])])
        #expect(added["otherMails"] == .collection(["someone@outlook.com", "admin@contoso.com"]))
        let parameter = try run(
            transformation("AddParameterToStringCollection", inputs: [("collection", "c")], parameters: [("item", "string", "admin@contoso.com")], outputs: [("collection", "c")]),
            ["c": .collection(["someone@outlook.com"])])
        #expect(parameter["c"] == .collection(["someone@outlook.com", "admin@contoso.com"]))
        let first = try run(
            transformation("GetSingleItemFromStringCollection", inputs: [("collection", "c")], outputs: [("extractedItem", "email")]),
            ["c": .collection(["someone@outlook.com", "someone@contoso.com"])])
        #expect(first["email"] == .string("someone@outlook.com"))
        let contains = try run(
            transformation("StringCollectionContains", inputs: [("inputClaim", "roles")], parameters: [("item", "string", "Admin"), ("ignoreCase", "string", "true")], outputs: [("outputClaim", "isAdmin")]),
            ["roles": .collection(["reader", "author", "admin"])])
        #expect(contains["isAdmin"] == .boolean(true))
    }

    @Test("dates: GetCurrentDateTime, DateTimeComparison, AssertDateTimeIsGreaterThan")
    func dates() throws {
        #expect(try run(transformation("GetCurrentDateTime", outputs: [("currentDateTime", "now")]), [:])["now"] == .string("2022-01-14T11:40:35.0000000Z"))
        let later = try run(
            transformation("DateTimeComparison", inputs: [("firstDateTime", "a"), ("secondDateTime", "b")], parameters: [("operator", "string", "later than"), ("timeSpanInSeconds", "int", "7776000")], outputs: [("result", "r")]),
            ["a": .string("2022-01-01T00:00:00.100000Z"), "b": .string("2022-03-16T00:00:00.100000Z")])
        #expect(later["r"] == .boolean(true))
        let assertion = transformation(
            "AssertDateTimeIsGreaterThan", inputs: [("leftOperand", "l"), ("rightOperand", "r")],
            parameters: [("AssertIfEqualTo", "boolean", "false"), ("AssertIfRightOperandIsNotPresent", "boolean", "true"), ("TreatAsEqualIfWithinMillseconds", "int", "300000")])
        #expect(throws: ClaimsTransformationFailure.self) { try run(assertion, ["l": .string("2022-01-01T15:00:00"), "r": .string("2022-01-22T15:00:00")]) }
        #expect(throws: Never.self) { try run(assertion, ["l": .string("2022-01-22T15:04:00"), "r": .string("2022-01-22T15:00:00")]) }
        #expect(throws: ClaimsTransformationFailure.self, "a missing right operand asserts") { try run(assertion, ["l": .string("2022-01-22T15:00:00")]) }
    }

    @Test("JSON and social: GetClaimFromJson, GenerateJson, CreateAlternativeSecurityId, Hash, CreateRandomString")
    func jsonAndSocial() throws {
        let json = #"{"emailAddress": "someone@example.com", "displayName": "Someone"}"#
        let extracted = try run(
            transformation("GetClaimFromJson", inputs: [("inputJson", "j")], parameters: [("claimToExtract", "string", "displayName")], outputs: [("extractedClaim", "name")]),
            ["j": .string(json)])
        #expect(extracted["name"] == .string("Someone"))
        let generated = try run(
            transformation(
                "GenerateJson",
                inputs: [("customerEntity.email", "email"), ("customerEntity.userObjectId", "objectId"), ("customerEntity.firstName", "givenName"), ("customerEntity.lastName", "surname")],
                parameters: [("customerEntity.role.name", "string", "Administrator"), ("customerEntity.role.id", "long", "1")], outputs: [("outputClaim", "body")]),
            ["email": .string("john.s@contoso.com"), "objectId": .string("01234567-89ab-cdef-0123-456789abcdef"), "givenName": .string("John"), "surname": .string("Smith")])
        // The reference's example, member for member and in its order: claims, then parameters as written.
        #expect(
            generated.text("body")
                == #"{"customerEntity":{"email":"john.s@contoso.com","userObjectId":"01234567-89ab-cdef-0123-456789abcdef","firstName":"John","lastName":"Smith","role":{"name":"Administrator","id":1}}}"#)
        let partial = try run(
            transformation("GenerateJson", inputs: [("a", "given"), ("b", "missing")], outputs: [("outputClaim", "body")]), ["given": .string("x")])
        #expect(partial.text("body") == #"{"a":"x"}"#, "a claim the journey does not hold is left out")
        let object = try JSONSerialization.jsonObject(with: Data((generated.text("body") ?? "").utf8)) as? [String: Any]
        let entity = object?["customerEntity"] as? [String: Any]
        #expect(entity?["email"] as? String == "john.s@contoso.com" && entity?["lastName"] as? String == "Smith")
        #expect((entity?["role"] as? [String: Any])?["id"] as? Int == 1, "a long parameter is a number")
        #expect((entity?["role"] as? [String: Any])?["name"] as? String == "Administrator")
        let arrays = try run(
            transformation("GenerateJson", inputs: [("emails.0.name", "n0"), ("emails.1.name", "n1")], outputs: [("outputClaim", "body")]),
            ["n0": .string("Joni"), "n1": .string("Emily")])
        #expect(arrays.text("body") == #"{"emails":[{"name":"Joni"},{"name":"Emily"}]}"#)
        let alternative = try run(
            transformation("CreateAlternativeSecurityId", inputs: [("key", "id"), ("identityProvider", "idp")], outputs: [("alternativeSecurityId", "alt")]),
            ["id": .string("12345"), "idp": .string("Facebook.com")])
        #expect(alternative.text("alt") == #"{"issuer":"facebook.com","issuerUserId":"MTIzNDU="}"#)
        let hashed = try run(
            transformation("Hash", inputs: [("plaintext", "p"), ("salt", "s")], parameters: [("randomizerSecret", "string", "B2C_1A_AccountTransformSecret")], outputs: [("hash", "h")]),
            ["p": .string("someone@contoso.com"), "s": .string("487624568")])
        #expect(hashed.text("h")?.count == 44, "base64 of a SHA-256 digest")
        #expect(throws: ClaimsTransformationFailure.self, "no secret, no hash") {
            try run(transformation("Hash", parameters: [("randomizerSecret", "string", "B2C_1A_Missing")], outputs: [("hash", "h")]), [:])
        }
        let otp = try run(
            transformation("CreateRandomString", parameters: [("randomGeneratorType", "string", "INTEGER"), ("maximumNumber", "int", "1000"), ("stringFormat", "string", "OTP_{0}"), ("base64", "boolean", "false")], outputs: [("outputClaim", "otp")]),
            [:])
        let number = Int(otp.text("otp")?.dropFirst(4) ?? "") ?? -1
        #expect(otp.text("otp")?.hasPrefix("OTP_") == true && (0...1000).contains(number))
        let guid = try run(transformation("CreateRandomString", parameters: [("randomGeneratorType", "string", "GUID")], outputs: [("outputClaim", "g")]), [:])
        #expect(UUID(uuidString: guid.text("g") ?? "") != nil && guid.text("g") == guid.text("g")?.lowercased())
    }

    @Test("every method the upload check accepts is one the engine runs")
    func everyAcceptedMethodRuns() {
        for method in PolicySchema.transformations {
            do {
                _ = try run(transformation(method), [:])
            } catch ClaimsTransformationFailure.invalidInput(let message) {
                #expect(!message.contains("not supported"), "\(method): \(message)")
            } catch {}
        }
    }
}
