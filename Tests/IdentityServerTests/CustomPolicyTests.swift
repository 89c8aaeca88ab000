import Foundation
@testable import IdentityDirectory
import Testing

@testable import IdentityServer
@testable import TrustFramework
@testable import UserJourneys

/// Custom policies' reading, merging and checking (SPEC §2.12), on policies written for these
/// tests (``PolicyFixtures``): no database.
@Suite("Custom policies: the XML reader, the inheritance merge and the upload checks")
struct CustomPolicyTests {
    func parse(_ text: String) throws -> PolicyElement { try PolicyXML.parse(Data(text.utf8)) }

    func effective(_ texts: [String]) throws -> PolicyElement {
        var parsed: [String: PolicyElement] = [:]
        for text in texts {
            let root = try parse(text)
            parsed[root["PolicyId"]!.lowercased()] = root
        }
        let leaf = try parse(texts[0])["PolicyId"]!.lowercased()
        return PolicyMerge.effective(try CustomPolicyLibrary.chain(of: leaf, in: parsed))
    }

    func profile(_ policy: PolicyElement, _ id: String) -> PolicyElement? {
        policy.child("ClaimsProviders")?.children("ClaimsProvider").flatMap { $0.items("TechnicalProfiles", "TechnicalProfile") }
            .first { $0["Id"]?.lowercased() == id.lowercased() }
    }

    @Test("the reader keeps elements, attributes, text and lines, and strips the IEF namespace")
    func reads() throws {
        let root = try parse(PolicyFixtures.base())
        #expect(root.name == "TrustFrameworkPolicy" && root["PolicyId"] == "B2C_1A_TestBase")
        #expect(root.attributes["xmlns"] == nil, "namespace declarations are not attributes")
        let email = root.child("BuildingBlocks")?.items("ClaimsSchema", "ClaimType").first { $0["Id"] == "email" }
        #expect(email?.child("UserInputType")?.text == "TextBox")
        #expect(email?.child("Restriction")?.child("Pattern")?["RegularExpression"] == "^[^@]+@[^@]+$")
        #expect((email?.line ?? 0) > 5)
    }

    @Test("a document type declaration, entities, deep nesting, a huge file, a foreign namespace and broken XML are refused")
    func readerLimits() throws {
        let laughs = """
            <?xml version="1.0"?>
            <!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
            <TrustFrameworkPolicy xmlns="\(PolicyXML.namespace)">&lol2;</TrustFrameworkPolicy>
            """
        #expect(throws: PolicyXML.Failure.self) { try parse(laughs) }
        let external = """
            <?xml version="1.0"?><!DOCTYPE x SYSTEM "file:///etc/passwd"><TrustFrameworkPolicy xmlns="\(PolicyXML.namespace)"/>
            """
        #expect(throws: PolicyXML.Failure.self) { try parse(external) }
        let deep = "<TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\">" + String(repeating: "<A>", count: 40)
            + String(repeating: "</A>", count: 40) + "</TrustFrameworkPolicy>"
        do {
            _ = try parse(deep)
            Issue.record("a 41-level document was read")
        } catch let failure as PolicyXML.Failure {
            #expect(failure.message.contains("deeper than 32"))
        }
        let huge = "<TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\">" + String(repeating: " ", count: PolicyXML.maximumBytes)
            + "</TrustFrameworkPolicy>"
        #expect(throws: PolicyXML.Failure.self) { try parse(huge) }
        #expect(throws: PolicyXML.Failure.self) { try parse("<TrustFrameworkPolicy xmlns=\"urn:other\"/>") }
        do {
            _ = try parse("<TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\">\n<BasePolicy></TrustFrameworkPolicy>")
            Issue.record("broken XML was read")
        } catch let failure as PolicyXML.Failure {
            #expect(failure.message.contains("not well-formed"))
        }
    }

    @Test("the merge changes a base profile from another provider by id in any case, metadata by key, and adds claims")
    func mergesProfiles() throws {
        let merged = try effective(PolicyFixtures.set)
        #expect(merged["PolicyId"] == "B2C_1A_test_signup", "the relying party's root attributes win")
        let form = try #require(profile(merged, "Form-SignUp"))
        let metadata = Dictionary(uniqueKeysWithValues: form.items("Metadata", "Item").map { ($0["Key"]!, $0.text) })
        #expect(metadata["setting.showCancelButton"] == "false", "the child's item wins")
        #expect(metadata["EnforceEmailVerification"] == "false", "a new item is added")
        #expect(metadata["ContentDefinitionReferenceId"] == "page.form", "the base's other items stay")
        #expect(form.items("OutputClaims", "OutputClaim").map { $0["ClaimTypeReferenceId"]! } == ["email", "password", "DisplayName"])
        #expect(form.child("Protocol")?["Name"] == "Proprietary", "what the child does not restate stays")
        let providers = merged.child("ClaimsProviders")?.children("ClaimsProvider") ?? []
        #expect(providers.count == 2, "a changed profile stays in its base provider: \(providers.map { $0.child("DisplayName")?.text ?? "" })")
        #expect(merged.child("RelyingParty")?.child("DefaultUserJourney")?["ReferenceId"] == "SignUp")
        #expect(PolicyCheck.effective(merged).isEmpty, "\(PolicyCheck.effective(merged))")
    }

    @Test("an orchestration step of the same order is replaced whole; ReplaceAll replaces a list; a new profile joins a new provider")
    func mergesSteps() throws {
        let child = PolicyFixtures.policy(
            "B2C_1A_Child", base: "B2C_1A_TestBase",
            body: """
                  <ClaimsProviders><ClaimsProvider><DisplayName>Mine</DisplayName><TechnicalProfiles>
                    <TechnicalProfile Id="Form-Other"><Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine" />
                      <Metadata MergeBehavior="ReplaceAll"><Item Key="ContentDefinitionReferenceId">page.signin</Item></Metadata></TechnicalProfile>
                    <TechnicalProfile Id="Form-SignUp"><Metadata MergeBehavior="ReplaceAll"><Item Key="ContentDefinitionReferenceId">page.signin</Item></Metadata></TechnicalProfile>
                  </TechnicalProfiles></ClaimsProvider></ClaimsProviders>
                  <UserJourneys><UserJourney Id="SignUp"><OrchestrationSteps>
                    <OrchestrationStep Order="2" Type="ClaimsExchange">
                      <ClaimsExchanges><ClaimsExchange Id="Other" TechnicalProfileReferenceId="Form-Other" /></ClaimsExchanges>
                    </OrchestrationStep>
                  </OrchestrationSteps></UserJourney></UserJourneys>
                """)
        let merged = try effective([child, PolicyFixtures.base()])
        let steps = merged.child("UserJourneys")?.child("UserJourney")?.items("OrchestrationSteps", "OrchestrationStep") ?? []
        #expect(steps.map { $0["Order"]! } == ["1", "2", "3"])
        #expect(steps[1].child("Preconditions") == nil, "the replaced step keeps none of the base step's parts")
        #expect(steps[1].child("ClaimsExchanges")?.child("ClaimsExchange")?["TechnicalProfileReferenceId"] == "Form-Other")
        let form = try #require(profile(merged, "Form-SignUp"))
        #expect(form.items("Metadata", "Item").map { $0["Key"]! } == ["ContentDefinitionReferenceId"])
        #expect(form.items("Metadata", "Item").first?.text == "page.signin")
        #expect(merged.child("ClaimsProviders")?.children("ClaimsProvider").map { $0.child("DisplayName")?.text } == [
            "Local accounts", "Token issuer", "Mine",
        ])
        #expect(PolicyCheck.effective(merged).isEmpty, "\(PolicyCheck.effective(merged))")
    }

    @Test("references that lead nowhere are named with the kind, the id and the line")
    func danglingReferences() throws {
        let broken = PolicyFixtures.extensions(
            extra: """
                <TechnicalProfile Id="Broken">
                  <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.ClaimsTransformationProtocolProvider, Web.TPEngine" />
                  <Metadata><Item Key="ContentDefinitionReferenceId">page.missing</Item></Metadata>
                  <InputClaims><InputClaim ClaimTypeReferenceId="shoeSize" /></InputClaims>
                  <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="NoSuchTransformation" /></OutputClaimsTransformations>
                  <ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="NoSuchProfile" /></ValidationTechnicalProfiles>
                </TechnicalProfile>
                """)
        let problems = PolicyCheck.effective(try effective([broken, PolicyFixtures.base()]))
        for expected in [
            "ClaimType with id 'shoeSize'", "ClaimsTransformation with id 'NoSuchTransformation'", "TechnicalProfile with id 'NoSuchProfile'",
            "ContentDefinition with id 'page.missing'",
        ] {
            #expect(problems.contains { $0.contains(expected) && $0.contains("(line ") }, "\(expected) in \(problems)")
        }
        #expect(problems.count == 4, "\(problems)")
        let party = PolicyCheck.effective(try effective([PolicyFixtures.relyingParty(journey: "Nowhere"), PolicyFixtures.extensions(), PolicyFixtures.base()]))
        #expect(party.count == 1 && party[0].contains("UserJourney with id 'Nowhere'"), "\(party)")
    }

    @Test("a Mask of an unknown Type, a Mask Regex or a SetClaimsIfRegexMatch matchTo that is no regular expression is refused at upload, by name")
    func brokenPatterns() throws {
        let base = PolicyFixtures.base()
            .replacingOccurrences(
                of: #"<ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType>"#,
                with: #"""
                    <ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType><Mask Type="Blur">*</Mask></ClaimType>
                    <ClaimType Id="hidden"><DisplayName>Hidden</DisplayName><DataType>string</DataType><Mask Type="Regex" Regex="(unclosed">*</Mask></ClaimType>
                    <ClaimType Id="bare"><DisplayName>Bare</DisplayName><DataType>string</DataType><Mask Type="Regex">*</Mask></ClaimType>
                    """#)
            .replacingOccurrences(
                of: #"<ClaimsTransformation Id="MakeGreeting" TransformationMethod="FormatStringClaim">"#,
                with: #"""
                    <ClaimsTransformation Id="Match" TransformationMethod="SetClaimsIfRegexMatch">
                      <InputClaims><InputClaim ClaimTypeReferenceId="greeting" TransformationClaimType="claimToMatch" /></InputClaims>
                      <InputParameters><InputParameter Id="matchTo" DataType="string" Value="[a-" />
                        <InputParameter Id="outputClaimIfMatched" DataType="string" Value="x" /></InputParameters>
                      <OutputClaims><OutputClaim ClaimTypeReferenceId="hidden" TransformationClaimType="outputClaim" /></OutputClaims>
                    </ClaimsTransformation>
                    <ClaimsTransformation Id="MakeGreeting" TransformationMethod="FormatStringClaim">
                    """#)
        let problems = PolicyCheck.effective(try parse(base))
        #expect(problems.contains { $0.contains("'greeting'") && $0.contains("Mask") && $0.contains("'Blur'") }, "\(problems)")
        #expect(problems.contains { $0.contains("'hidden'") && $0.contains("Regex is not a valid regular expression") }, "\(problems)")
        #expect(problems.contains { $0.contains("'Match'") && $0.contains("matchTo that is not a valid regular expression") }, "\(problems)")
        #expect(problems.contains { $0.contains("'bare'") && $0.contains("Regex is not a valid regular expression") }, "a Regex mask needs its Regex: \(problems)")
        #expect(problems.count == 4, "\(problems)")
    }

    @Test("step types, protocols, handlers, transformations, data types and elements outside the supported set are named")
    func unsupported() throws {
        let base = PolicyFixtures.base(
            claimsProviderExtra: """
                <TechnicalProfile Id="Saml"><Protocol Name="SAML2" /></TechnicalProfile>
                <TechnicalProfile Id="Odd"><Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.PhoneFactorProtocolProvider, Web.TPEngine" /></TechnicalProfile>
                """,
            stepExtra: #"<OrchestrationStep Order="9" Type="UserDialog" />"#)
            .replacingOccurrences(of: "TransformationMethod=\"FormatStringClaim\"", with: "TransformationMethod=\"EncryptClaimWithKey\"")
            .replacingOccurrences(of: "<DataType>boolean</DataType>", with: "<DataType>phoneNumberish</DataType>")
        let problems = PolicyCheck.effective(try parse(base))
        for expected in ["'SAML2'", "PhoneFactorProtocolProvider", "'UserDialog'", "'EncryptClaimWithKey'", "'phoneNumberish'"] {
            #expect(problems.contains { $0.contains(expected) && $0.contains("not supported") }, "\(expected) in \(problems)")
        }
        let withDisplayControl = PolicyFixtures.base().replacingOccurrences(
            of: "<ClaimsSchema>", with: "<DisplayControls><DisplayControl Id=\"x\" UserInterfaceControlType=\"VerificationControl\"/></DisplayControls><ClaimsSchema>")
        let fileProblems = PolicyCheck.file(try parse(withDisplayControl), tenantName: PolicyFixtures.tenant)
        #expect(fileProblems.count == 1 && fileProblems[0].contains("'DisplayControls' in 'BuildingBlocks'"), "\(fileProblems)")
    }

    @Test("a transformation declared against its method's signature is refused: an unknown or missing claim, a wrong type, a missing parameter")
    func transformationSignatures() throws {
        let wrongName = PolicyFixtures.base().replacingOccurrences(of: #"TransformationClaimType="inputClaim""#, with: #"TransformationClaimType="inputClaimX""#)
        let problems = PolicyCheck.effective(try parse(wrongName))
        #expect(problems.contains { $0.contains("The InputClaims mismatched in ClaimsTransformation with id \"MakeGreeting\"") && $0.contains("'inputClaimX'") })
        #expect(problems.contains { $0.contains("'inputClaim' the method needs is not declared") })
        let noParameter = PolicyFixtures.base().replacingOccurrences(of: #"<InputParameter Id="stringFormat" DataType="string" Value="Hello {0}" />"#, with: "")
        #expect(PolicyCheck.effective(try parse(noParameter)).contains { $0.contains("needs the input parameter 'stringFormat'") })
        let wrongType = PolicyFixtures.base().replacingOccurrences(of: #"TransformationMethod="FormatStringClaim""#, with: #"TransformationMethod="NotClaims""#)
            .replacingOccurrences(of: #"<InputParameters><InputParameter Id="stringFormat" DataType="string" Value="Hello {0}" /></InputParameters>"#, with: "")
        let typed = PolicyCheck.effective(try parse(wrongType))
        #expect(typed.contains { $0.contains("needs a boolean claim; 'displayName' is string") }, "\(typed)")
        #expect(PolicyCheck.effective(try parse(PolicyFixtures.base())).isEmpty)
    }

    @Test("a policy of another tenant, a bad id or schema version is refused at the file")
    func fileChecks() throws {
        let other = PolicyFixtures.base().replacingOccurrences(of: PolicyFixtures.tenant, with: "contoso.onmicrosoft.com")
        #expect(PolicyCheck.file(try parse(other), tenantName: PolicyFixtures.tenant).contains { $0.contains("'contoso.onmicrosoft.com' is not this tenant") })
        #expect(PolicyCheck.file(try parse(PolicyFixtures.base()), tenantName: "TODOB2C.onmicrosoft.com").isEmpty, "tenant names ignore case")
        let badID = PolicyFixtures.base(id: "MyPolicy")
        #expect(PolicyCheck.file(try parse(badID), tenantName: PolicyFixtures.tenant).contains { $0.contains("must start with B2C_1A_") })
        let version = PolicyFixtures.base().replacingOccurrences(of: "PolicySchemaVersion=\"0.3.0.0\"", with: "PolicySchemaVersion=\"9\"")
        #expect(PolicyCheck.file(try parse(version), tenantName: PolicyFixtures.tenant).contains { $0.contains("PolicySchemaVersion") })
    }

    @Test("a missing base, a cycle and more than ten levels of bases are refused")
    func chains() throws {
        var policies: [String: PolicyElement] = [:]
        let orphan = try parse(PolicyFixtures.relyingParty(base: "B2C_1A_Missing"))
        policies["b2c_1a_test_signup"] = orphan
        #expect(throws: CustomPolicyLibrary.ChainProblem.self) { try CustomPolicyLibrary.chain(of: "b2c_1a_test_signup", in: policies) }
        policies = [
            "b2c_1a_a": try parse(PolicyFixtures.policy("B2C_1A_A", base: "B2C_1A_B", body: "")),
            "b2c_1a_b": try parse(PolicyFixtures.policy("B2C_1A_B", base: "B2C_1A_A", body: "")),
        ]
        do {
            _ = try CustomPolicyLibrary.chain(of: "b2c_1a_a", in: policies)
            Issue.record("a cycle was followed")
        } catch let problem as CustomPolicyLibrary.ChainProblem {
            #expect(problem.message.contains("cycle"))
        }
        policies = ["b2c_1a_l0": try parse(PolicyFixtures.policy("B2C_1A_L0", body: ""))]
        for level in 1...10 {
            policies["b2c_1a_l\(level)"] = try parse(PolicyFixtures.policy("B2C_1A_L\(level)", base: "B2C_1A_L\(level - 1)", body: ""))
        }
        #expect(try CustomPolicyLibrary.chain(of: "b2c_1a_l9", in: policies).count == 10)
        #expect(throws: CustomPolicyLibrary.ChainProblem.self) { try CustomPolicyLibrary.chain(of: "b2c_1a_l10", in: policies) }
    }

    @Test("a .NET pattern runs under ICU: '[' and '&' in a class are literal, the pattern is searched for as .NET does; a pattern that backtracks badly stops at its deadline")
    func patterns() throws {
        #expect(PolicyPattern.icu(#"^[A-Z[\]{}&]+$"#) == #"^[A-Z\[\]{}\&]+$"#)
        #expect(PolicyPattern.icu(#"[^[]"#) == #"[^\[]"#)
        // The shape of the starter pack's password rule: lookaheads, then a class with `[\]{}`.
        let password = #"^((?=.*[a-z])(?=.*[A-Z])(?=.*\d))([A-Za-z\d@#$%^&*\-_+=[\]{}|\\:',?/`~"();!]|\.(?!@)){8,16}$"#
        #expect(try PolicyPattern.matches("Starter-Pass1", password))
        #expect(try PolicyPattern.matches("Has[Bracket]9", password))
        #expect(try !PolicyPattern.matches("short1A", password))
        #expect(try !PolicyPattern.matches("no-upper-case-1", password))
        #expect(try !PolicyPattern.matches(String(repeating: "A", count: PolicyPattern.maximumInput + 1), "A*"), "too long to try")
        // B2C searches for the pattern (`Regex.IsMatch`): `\d` accepts `20`, and only the
        // pattern's own anchors hold a value to its whole length.
        #expect(try PolicyPattern.matches("20", #"\d"#))
        #expect(try PolicyPattern.matches("id-7", #"\d"#))
        #expect(try !PolicyPattern.matches("seven", #"\d"#))
        #expect(try !PolicyPattern.matches("20", #"^\d$"#))
        // Exponential backtracking: without the deadline this would not finish.
        #expect(try !PolicyPattern.matches(String(repeating: "a", count: 60) + "!", "(a+)+$"))
        #expect(PolicyPattern.compile("(unclosed") == nil)
    }

    /// A group of predicates: a cheap length predicate that passes, then a backtracking pattern.
    static func group(matchAtLeast: Int?) throws -> PolicyPredicates {
        let xml = """
            <BuildingBlocks xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06">
              <Predicates>
                <Predicate Id="Short" Method="IsLengthRange"><Parameters><Parameter Id="Minimum">1</Parameter><Parameter Id="Maximum">100</Parameter></Parameters></Predicate>
                <Predicate Id="Evil" Method="MatchesRegex"><Parameters><Parameter Id="RegularExpression">(a+)+$</Parameter></Parameters></Predicate>
              </Predicates>
              <PredicateValidations><PredicateValidation Id="V"><PredicateGroups><PredicateGroup Id="G">
                <PredicateReferences\(matchAtLeast.map { " MatchAtLeast=\"\($0)\"" } ?? "")><PredicateReference Id="Short" /><PredicateReference Id="Evil" /></PredicateReferences>
              </PredicateGroup></PredicateGroups></PredicateValidation></PredicateValidations>
            </BuildingBlocks>
            """
        return PolicyPredicates(try PolicyXML.parse(Data(xml.utf8)))
    }

    @Test("one budget for a submission's matches: past it the submission is refused; a group stops once MatchAtLeast is decided")
    func patternBudget() throws {
        let evil = String(repeating: "a", count: 60) + "!"
        // Each match stops at its own 50 ms; the second of two under a 60 ms budget finds it spent.
        let budget = PolicyPattern.Budget(.milliseconds(60))
        #expect(try !PolicyPattern.matches(evil, "(a+)+$", budget: budget))
        #expect(throws: PolicyPattern.BudgetExhausted.self) { try PolicyPattern.matches(evil, "(a+)+$", budget: budget) }
        // MatchAtLeast 1 is met by the length predicate: the pattern never runs, so a spent budget
        // does not matter. Both needed: the pattern runs and the budget refuses the submission.
        let spent = PolicyPattern.Budget(.zero)
        #expect(try Self.group(matchAtLeast: 1).problem(with: evil, validation: "V", budget: spent) == nil)
        #expect(throws: PolicyPattern.BudgetExhausted.self) { try Self.group(matchAtLeast: nil).problem(with: evil, validation: "V", budget: spent) }
    }

    @Test("at upload: a group of more than 16 predicate references, and a MatchesRegex that does not compile, are refused")
    func predicateLimits() throws {
        let references = String(repeating: #"<PredicateReference Id="Short" />"#, count: PolicyPredicates.maximumReferencesPerGroup + 1)
        let base = PolicyFixtures.base().replacingOccurrences(
            of: "<ClaimsTransformations>",
            with: """
                <Predicates>
                  <Predicate Id="Short" Method="IsLengthRange"><Parameters><Parameter Id="Minimum">1</Parameter></Parameters></Predicate>
                  <Predicate Id="Broken" Method="MatchesRegex"><Parameters><Parameter Id="RegularExpression">(unclosed</Parameter></Parameters></Predicate>
                </Predicates>
                <PredicateValidations><PredicateValidation Id="Many"><PredicateGroups><PredicateGroup Id="G">
                  <PredicateReferences MatchAtLeast="1">\(references)</PredicateReferences></PredicateGroup></PredicateGroups></PredicateValidation></PredicateValidations>
                <ClaimsTransformations>
                """)
        let problems = PolicyCheck.effective(try PolicyXML.parse(Data(base.utf8)))
        #expect(problems.contains { $0.contains("more than 16 PredicateReferences") }, "\(problems)")
        #expect(problems.contains { $0.contains("'Broken' has a RegularExpression that is not a valid") }, "\(problems)")
    }
}

/// Limits on what a policy or a claim value can make the service do.
@Suite("Custom policies: limits on outside input")
struct CustomPolicyLimitTests {
    @Test("a tag with too many attributes is refused before libxml2 reads it; '=' inside values does not count")
    func attributes() throws {
        let many = (0...PolicyXML.maximumAttributes).map { "a\($0)=\"x\"" }.joined(separator: " ")
        #expect(throws: PolicyXML.Failure.self) {
            try PolicyXML.parse(Data("<TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\" \(many)/>".utf8))
        }
        let equals = String(repeating: "(?=a)", count: 200)
        let element = try PolicyXML.parse(Data("<TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\" p=\"\(equals)\"><!-- a=b c=d --></TrustFrameworkPolicy>".utf8))
        #expect(element["p"] == equals)
        #expect(PolicyXML.attributesOverLimit(Data("<a\n b=\"1\"/>".utf8)) == nil)
        #expect(throws: PolicyXML.Failure.self, "UTF-16 is refused") {
            try PolicyXML.parse("<TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\"/>".data(using: .utf16)!)
        }
        // Encodings libxml2 would decode past the byte checks: each refused, naming UTF-8.
        let root = "<TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\" \(many)/>"
        let utf7 = "<?xml version=\"1.0\" encoding=\"UTF-7\"?>+ADw-+ACE-DOCTYPE x +AFs-+ADw-+ACE-ENTITY a \"b\"+AD4-+AF0-+AD4-" + "<x/>"
        let encodings: [(String, Data)] = [
            ("UTF-7 declared", Data(utf7.utf8)),
            ("UTF-16LE without a byte-order mark", ("<?xml version=\"1.0\" encoding=\"UTF-16\"?>" + root).data(using: .utf16LittleEndian)!),
            ("UTF-32 byte-order mark", Data([0x00, 0x00, 0xFE, 0xFF]) + Data(root.utf8)),
            ("ISO-8859-1 declared", Data(("<?xml version='1.0' encoding='ISO-8859-1'?>" + "<x/>").utf8)),
        ]
        for (name, data) in encodings {
            do {
                _ = try PolicyXML.parse(data)
                Issue.record("accepted: \(name)")
            } catch let failure as PolicyXML.Failure {
                #expect(failure.message.contains("UTF-8"), "\(name): \(failure.message)")
            }
        }
        // A UTF-8 byte-order mark and declaration are fine.
        let declared = Data([0xEF, 0xBB, 0xBF]) + Data("<?xml version=\"1.0\" encoding=\"utf-8\"?><TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\"/>".utf8)
        #expect(try PolicyXML.parse(declared).name == "TrustFrameworkPolicy")
    }

    @Test("numbers and paths from claim values cannot crash or blow up a transformation")
    func transformationInputs() throws {
        func transformation(_ method: String, _ inputs: [(String, String)], _ parameters: [(String, String, String)]) -> PolicyTransformation {
            PolicyTransformation(
                PolicyElement(
                    name: "ClaimsTransformation", attributes: ["Id": "T", "TransformationMethod": method],
                    children: [
                        PolicyElement(
                            name: "InputClaims",
                            children: inputs.map { PolicyElement(name: "InputClaim", attributes: ["TransformationClaimType": $0.0, "ClaimTypeReferenceId": $0.1]) }),
                        PolicyElement(
                            name: "InputParameters",
                            children: parameters.map { PolicyElement(name: "InputParameter", attributes: ["Id": $0.0, "DataType": $0.1, "Value": $0.2]) }),
                        PolicyElement(
                            name: "OutputClaims",
                            children: [PolicyElement(name: "OutputClaim", attributes: ["TransformationClaimType": method == "GenerateJson" ? "outputClaim" : "extractedClaim", "ClaimTypeReferenceId": "out"])]),
                    ]))
        }
        let context = ClaimsTransformationContext(now: Date(), tenantName: "t")
        var claims = PolicyClaims(["json": .string(#"{"n": 1e300, "m": -99999999999999999999, "i": 42}"#)])
        for (name, expected) in [("n", "1e+300"), ("i", "42")] {
            try ClaimsTransformations.run(transformation("GetClaimFromJson", [("inputJson", "json")], [("claimToExtract", "string", name)]), on: &claims, context: context)
            #expect(claims.text("out") == expected)
        }
        try ClaimsTransformations.run(transformation("GetClaimFromJson", [("inputJson", "json")], [("claimToExtract", "string", "m")]), on: &claims, context: context)
        #expect(claims.text("out") != nil)
        claims["v"] = .string("x")
        try ClaimsTransformations.run(transformation("GenerateJson", [("a.-1", "v"), ("b.100000000", "v")], []), on: &claims, context: context)
        #expect(claims.text("out") == #"{"a":{"-1":"x"},"b":{"100000000":"x"}}"#, "an index out of range is a key")
        #expect(ClaimsTransformations.format("{0} and {1}", ["{1}", "B"]) == "{1} and B", "a value is not formatted again")
    }
}
