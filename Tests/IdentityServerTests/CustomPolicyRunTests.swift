import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import TrustFramework
@testable import UserJourneys

/// A custom policy run by the journey engine (SPEC §2.12): sign in through the combined page,
/// sign up with a verified email through a self-asserted page, tokens with the relying party's
/// claims, on the policy's own URL.
@Suite("Custom policies: running a sign-up-or-sign-in policy")
struct CustomPolicyRunTests {
    static let policy = "B2C_1A_test_susi"

    static func upload(_ h: IdentityHarness) async throws {
        try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
        try await h.server.administration.uploadCustomPolicies(try PolicyFixtures.localAccounts(), tenant: h.tenant)
    }

    /// The local base and `policy`, with the harness's public app allowed the implicit flow (a
    /// journey that signs nobody in answers with an ID token only); an `id_token` attempt at it.
    static func uploadForIDToken(_ h: IdentityHarness, _ policy: Data, id: String) async throws -> AuthorizationAttempt {
        try await upload(h)
        try await h.server.administration.uploadCustomPolicies([policy], tenant: h.tenant)
        var app = h.seed.publicApp
        app.allowImplicit = true
        try await h.server.tenants.save(app, now: h.clock.now)
        var attempt = AuthorizationAttempt(harness: h, policy: id, scope: "openid")
        attempt.responseType = "id_token"
        return attempt
    }

    @Test("discovery answers on the policy's URL; a base policy is not a relying party", arguments: TestDatabase.engines)
    func discovery(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            let document = try await driver.get(h.path(Self.policy, "v2.0/.well-known/openid-configuration"))
            #expect(document.status == .ok, "\(document.text)")
            #expect((document.json["authorization_endpoint"] as? String)?.contains(Self.policy) == true)
            try await h.server.administration.uploadCustomPolicies([Data(PolicyFixtures.base().utf8)], tenant: h.tenant)
            let base = try await driver.get(h.path("B2C_1A_TestBase", "v2.0/.well-known/openid-configuration"))
            #expect(base.status == .notFound)
        }
    }

    @Test("sign in through the combined page: the password checked in-process, the token has the relying party's claims", arguments: TestDatabase.engines)
    func signIn(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            let user = try await h.addUser("carol@example.com", name: "Carol")
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            let page = try await driver.start(attempt, harness: h)
            #expect(page.status == .ok && page.text.contains("id=\"signInName\""), "\(page.text)")
            let wrong = try await driver.submit(page, [("signInName", "carol@example.com"), ("password", "wrong-Passw0rd")])
            #expect(wrong.status == .badRequest && wrong.text.contains("Your password is incorrect."))
            #expect(wrong.field("signInName") == "carol@example.com", "the typed sign-in name stays on the page, as B2C keeps it")
            let done = try await driver.submit(wrong, [("signInName", "carol@example.com"), ("password", "Passw0rd!")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text)")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(tokens.status == .ok, "\(tokens.text)")
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["sub"] as? String == user.objectID)
            #expect(claims["name"] as? String == "Carol")
            #expect(claims["greeting"] as? String == "Hello Carol", "the read profile's output transformation ran")
            #expect(claims["tid"] as? String == h.tenant.guid, "{Policy:TenantObjectId}")
            #expect(claims["tfp"] as? String == Self.policy)
            #expect(claims["email"] as? String == "carol@example.com")
            #expect(claims["newUser"] == nil, "no new user on a sign-in")
            #expect(tokens.json["expires_in"] as? Int == 1800, "the issuer's token_lifetime_secs")
            // The journey's trace names each orchestration step and the policy claims it changed, with their values.
            let journeys = try await h.database.rows("SELECT journey FROM authorization_requests WHERE journey IS NOT NULL", [])
            let stored = try journeys.map { try $0.text("journey") }
            let traces = try stored.map { text in
                let state = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                return String(decoding: try JSONSerialization.data(withJSONObject: state?["trace"] ?? []), as: UTF8.self)
            }.joined()
            #expect(traces.contains("SignUpOrSignIn#3") && traces.contains("greeting"), "\(traces)")
            #expect(traces.contains("Hello Carol"), "the transformation's result, for the developer trace")
            #expect(!stored.joined().contains("wrong-Passw0rd") && !stored.joined().contains("Passw0rd!"), "no typed password is stored with the journey")
        }
    }

    /// A relying party on the local base with one more page after the sign-in: its DisplayClaims
    /// (a required city, the read-only greeting, a nickname that is shown but not an output claim).
    static func displayClaimsPolicy(tenant: String) -> Data {
        PolicyFixtures.onLocalBase(
            id: "B2C_1A_test_display", tenant: tenant,
            claimTypes: """
                <ClaimType Id="city"><DisplayName>City</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType></ClaimType>
                <ClaimType Id="nickname"><DisplayName>Nickname</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType></ClaimType>
                <ClaimType Id="greetingShown"><DisplayName>Greeting</DisplayName><DataType>string</DataType><UserInputType>Readonly</UserInputType></ClaimType>
                """,
            page: (
                "Form-Details",
                """
                <InputClaims><InputClaim ClaimTypeReferenceId="greetingShown" DefaultValue="Welcome back" /></InputClaims>
                <DisplayClaims>
                  <DisplayClaim ClaimTypeReferenceId="nickname" />
                  <DisplayClaim ClaimTypeReferenceId="greetingShown" />
                  <DisplayClaim ClaimTypeReferenceId="city" Required="true" />
                </DisplayClaims>
                <OutputClaims><OutputClaim ClaimTypeReferenceId="city" /><OutputClaim ClaimTypeReferenceId="displayName" /></OutputClaims>
                """),
            signsIn: true,
            relyingPartyClaims: """
                <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" />
                <OutputClaim ClaimTypeReferenceId="city" />
                <OutputClaim ClaimTypeReferenceId="nickname" />
                <OutputClaim ClaimTypeReferenceId="displayName" />
                """)
    }

    @Test(
        "DisplayClaims: the page shows them in their order and no other output claim; Required is enforced; a display claim that is no output claim is not kept; a display control is refused by name",
        arguments: TestDatabase.engines)
    func displayClaims(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            try await h.server.administration.uploadCustomPolicies([Self.displayClaimsPolicy(tenant: h.tenant.name)], tenant: h.tenant)
            let user = try await h.addUser("erin@example.com", name: "Erin")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_display")
            let signIn = try await driver.start(attempt, harness: h)
            let page = try await driver.submit(signIn, [("signInName", "erin@example.com"), ("password", "Passw0rd!")])
            #expect(page.status == .ok, "\(page.status) \(page.text)")
            let order = ["id=\"nickname\"", "id=\"greetingShown\"", "id=\"city\""].map { page.text.range(of: $0)?.lowerBound }
            #expect(order.allSatisfy { $0 != nil } && order[0]! < order[1]! && order[1]! < order[2]!, "\(page.text)")
            #expect(!page.text.contains("id=\"displayName\""), "an output claim not displayed is not on the page")
            #expect(page.field("greetingShown") == "Welcome back")
            let missing = try await driver.submit(page, [("nickname", "Ez"), ("city", "")])
            #expect(missing.status == .badRequest && missing.text.contains("City is required."), "\(missing.text)")
            let done = try await driver.submit(missing, [("nickname", "Ez"), ("city", "Oslo"), ("greetingShown", "forged")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text)")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["sub"] as? String == user.objectID && claims["city"] as? String == "Oslo")
            #expect(claims["nickname"] == nil, "shown, but not an output claim of the page")
            #expect(claims["name"] as? String == "Erin", "an output claim the page did not display keeps its value")

            let withControl = String(decoding: Self.displayClaimsPolicy(tenant: h.tenant.name), as: UTF8.self)
                .replacingOccurrences(of: "<DisplayClaim ClaimTypeReferenceId=\"nickname\" />", with: "<DisplayClaim DisplayControlReferenceId=\"emailVerificationControl\" />")
            await #expect(throws: PolicyRejection.self) {
                try await h.server.administration.uploadCustomPolicies([Data(withControl.utf8)], tenant: h.tenant)
            }
            do {
                try await h.server.administration.uploadCustomPolicies([Data(withControl.utf8)], tenant: h.tenant)
            } catch let rejection as PolicyRejection {
                #expect(rejection.description.contains("display control 'emailVerificationControl'"), "\(rejection.description)")
            }
        }
    }

    /// A relying party in the shape of the B2C community's unit tests: one page, then the
    /// token, with `sub` from an `objectId` default; nobody signs in.
    static func subjectOnlyPolicy(tenant: String, subject: String = "1234") -> Data {
        PolicyFixtures.onLocalBase(
            id: "B2C_1A_test_nobody", tenant: tenant,
            claimTypes: """
                <ClaimType Id="word"><DisplayName>A word</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType></ClaimType>
                <ClaimType Id="shout"><DisplayName>Shout</DisplayName><DataType>string</DataType></ClaimType>
                """,
            transformations: """
                <ClaimsTransformation Id="Shout" TransformationMethod="ChangeCase">
                  <InputClaims><InputClaim ClaimTypeReferenceId="word" TransformationClaimType="inputClaim1" /></InputClaims>
                  <InputParameters><InputParameter Id="toCase" DataType="string" Value="UPPER" /></InputParameters>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="shout" TransformationClaimType="outputClaim" /></OutputClaims>
                </ClaimsTransformation>
                """,
            page: (
                "Experiment",
                """
                <DisplayClaims><DisplayClaim ClaimTypeReferenceId="word" Required="true" /></DisplayClaims>
                <OutputClaims><OutputClaim ClaimTypeReferenceId="word" /></OutputClaims>
                <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="Shout" /></OutputClaimsTransformations>
                """),
            signsIn: false,
            relyingPartyClaims: """
                <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" DefaultValue="\(subject)" />
                <OutputClaim ClaimTypeReferenceId="shout" />
                """)
    }

    /// A journey on the local base whose page asks for a word, then invokes a `Call` sub-journey
    /// (a claims transformation) and, where the word is `stop`, a `Transfer` sub-journey that ends
    /// with the OAuth2 error profile; otherwise the token. `extraSubJourneys` are added as given.
    static func subJourneyPolicy(tenant: String, extraSubJourneys: String = "") -> Data {
        Data(
            """
            <TrustFrameworkPolicy xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicySchemaVersion="0.3.0.0"
              TenantId="\(tenant)" PolicyId="B2C_1A_test_sub" PublicPolicyUri="http://\(tenant)/B2C_1A_test_sub">
            <BasePolicy><TenantId>\(tenant)</TenantId><PolicyId>B2C_1A_LocalBase</PolicyId></BasePolicy>
            <BuildingBlocks>
              <ClaimsSchema>
                <ClaimType Id="word"><DisplayName>A word</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType></ClaimType>
                <ClaimType Id="shout"><DisplayName>Shout</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="echo"><DisplayName>Echo</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="errorCode"><DisplayName>Code</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="errorMessage"><DisplayName>Message</DisplayName><DataType>string</DataType></ClaimType>
              </ClaimsSchema>
              <ClaimsTransformations>
                <ClaimsTransformation Id="Shout" TransformationMethod="ChangeCase">
                  <InputClaims><InputClaim ClaimTypeReferenceId="word" TransformationClaimType="inputClaim1" /></InputClaims>
                  <InputParameters><InputParameter Id="toCase" DataType="string" Value="UPPER" /></InputParameters>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="shout" TransformationClaimType="outputClaim" /></OutputClaims>
                </ClaimsTransformation>
                <ClaimsTransformation Id="Echo" TransformationMethod="CopyClaim">
                  <InputClaims><InputClaim ClaimTypeReferenceId="shout" TransformationClaimType="inputClaim" /></InputClaims>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="echo" TransformationClaimType="outputClaim" /></OutputClaims>
                </ClaimsTransformation>
              </ClaimsTransformations>
            </BuildingBlocks>
            <ClaimsProviders><ClaimsProvider><DisplayName>Steps</DisplayName><TechnicalProfiles>
              <TechnicalProfile Id="Ask">
                <DisplayName>A word</DisplayName>
                <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                <Metadata><Item Key="ContentDefinitionReferenceId">form</Item></Metadata>
                <OutputClaims><OutputClaim ClaimTypeReferenceId="word" Required="true" /></OutputClaims>
              </TechnicalProfile>
              <TechnicalProfile Id="MakeShout">
                <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.ClaimsTransformationProtocolProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                <OutputClaims><OutputClaim ClaimTypeReferenceId="shout" /></OutputClaims>
                <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="Shout" /></OutputClaimsTransformations>
              </TechnicalProfile>
              <TechnicalProfile Id="MakeEcho">
                <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.ClaimsTransformationProtocolProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                <OutputClaims><OutputClaim ClaimTypeReferenceId="echo" /></OutputClaims>
                <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="Echo" /></OutputClaimsTransformations>
              </TechnicalProfile>
              <TechnicalProfile Id="ReturnOAuth2Error">
                <Protocol Name="None" />
                <OutputTokenFormat>OAuth2Error</OutputTokenFormat>
                <CryptographicKeys><Key Id="issuer_secret" StorageReferenceId="B2C_1A_TokenSigningKeyContainer" /></CryptographicKeys>
                <InputClaims>
                  <InputClaim ClaimTypeReferenceId="errorCode" DefaultValue="4711" />
                  <InputClaim ClaimTypeReferenceId="errorMessage" DefaultValue="Stopped by the policy" />
                </InputClaims>
              </TechnicalProfile>
            </TechnicalProfiles></ClaimsProvider></ClaimsProviders>
            <UserJourneys><UserJourney Id="Journey" DefaultCpimIssuerTechnicalProfileReferenceId="Issuer"><OrchestrationSteps>
              <OrchestrationStep Order="1" Type="ClaimsExchange">
                <ClaimsExchanges><ClaimsExchange Id="AskExchange" TechnicalProfileReferenceId="Ask" /></ClaimsExchanges>
              </OrchestrationStep>
              <OrchestrationStep Order="2" Type="InvokeSubJourney">
                <!-- Decided when the journey reaches it: the sub-journey's first step sets shout, its second still runs. -->
                <Preconditions><Precondition Type="ClaimsExist" ExecuteActionsIf="true">
                  <Value>shout</Value><Action>SkipThisOrchestrationStep</Action></Precondition></Preconditions>
                <JourneyList><Candidate SubJourneyReferenceId="Loud" /></JourneyList>
              </OrchestrationStep>
              <OrchestrationStep Order="3" Type="InvokeSubJourney">
                <Preconditions><Precondition Type="ClaimEquals" ExecuteActionsIf="false">
                  <Value>word</Value><Value>stop</Value><Action>SkipThisOrchestrationStep</Action></Precondition></Preconditions>
                <JourneyList><Candidate SubJourneyReferenceId="Refuse" /></JourneyList>
              </OrchestrationStep>
              <OrchestrationStep Order="4" Type="SendClaims" />
            </OrchestrationSteps></UserJourney></UserJourneys>
            <SubJourneys>
              <SubJourney Id="Loud" Type="Call"><OrchestrationSteps>
                <OrchestrationStep Order="1" Type="ClaimsExchange">
                  <ClaimsExchanges><ClaimsExchange Id="ShoutExchange" TechnicalProfileReferenceId="MakeShout" /></ClaimsExchanges>
                </OrchestrationStep>
                <OrchestrationStep Order="2" Type="ClaimsExchange">
                  <ClaimsExchanges><ClaimsExchange Id="EchoExchange" TechnicalProfileReferenceId="MakeEcho" /></ClaimsExchanges>
                </OrchestrationStep>
              </OrchestrationSteps></SubJourney>
              <SubJourney Id="Refuse" Type="Transfer"><OrchestrationSteps>
                <OrchestrationStep Order="1" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="ReturnOAuth2Error" />
              </OrchestrationSteps></SubJourney>
              \(extraSubJourneys)
            </SubJourneys>
            <RelyingParty>
              <DefaultUserJourney ReferenceId="Journey" />
              <TechnicalProfile Id="PolicyProfile">
                <Protocol Name="OpenIdConnect" />
                <OutputClaims>
                  <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" DefaultValue="1234" />
                  <OutputClaim ClaimTypeReferenceId="shout" />
                  <OutputClaim ClaimTypeReferenceId="echo" />
                </OutputClaims>
                <SubjectNamingInfo ClaimType="sub" />
              </TechnicalProfile>
            </RelyingParty>
            </TrustFrameworkPolicy>
            """.utf8)
    }

    @Test(
        "sub-journeys: a Call sub-journey returns to its caller; a Transfer one ends the journey, here with the OAuth2 error profile's access_denied AAD_Custom_ error; a cycle is refused at upload by name",
        arguments: TestDatabase.engines)
    func subJourneys(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let attempt = try await Self.uploadForIDToken(h, Self.subJourneyPolicy(tenant: h.tenant.name), id: "B2C_1A_test_sub")
            let page = try await driver.start(attempt, harness: h)
            let called = try await driver.submit(page, [("word", "hello")])
            let claims = DecodedJWT(try #require(called.redirectParameters["id_token"], "\(called.status) \(called.text)")).claims
            #expect(claims["shout"] as? String == "HELLO" && claims["sub"] as? String == "1234", "the Call sub-journey ran and returned: \(claims)")
            #expect(claims["echo"] as? String == "HELLO", "the invocation's precondition is decided once: its second step ran after the first set shout")

            let refused = try await driver.submit(try await driver.start(attempt, harness: h), [("word", "stop")])
            #expect(refused.redirectParameters["id_token"] == nil, "a Transfer sub-journey's error is the journey's end: \(refused.redirectParameters)")
            #expect(refused.redirectParameters["error"] == "access_denied", "\(refused.status) \(refused.redirectParameters)")
            // The fragment is form-encoded, as B2C's example shows (`AAD_Custom_1234%3a+My+custom…`).
            let description = (refused.redirectParameters["error_description"] ?? "").replacingOccurrences(of: "+", with: " ")
            #expect(description.hasPrefix("AAD_Custom_4711: Stopped by the policy\r\nCorrelation ID: "), "\(description)")
            #expect(refused.redirectParameters["state"] == attempt.state)

            let cycle = """
                <SubJourney Id="Ping" Type="Call"><OrchestrationSteps><OrchestrationStep Order="1" Type="InvokeSubJourney">
                  <JourneyList><Candidate SubJourneyReferenceId="Pong" /></JourneyList></OrchestrationStep></OrchestrationSteps></SubJourney>
                <SubJourney Id="Pong" Type="Call"><OrchestrationSteps><OrchestrationStep Order="1" Type="InvokeSubJourney">
                  <JourneyList><Candidate SubJourneyReferenceId="Ping" /></JourneyList></OrchestrationStep></OrchestrationSteps></SubJourney>
                """
            do {
                try await h.server.administration.uploadCustomPolicies(
                    [Self.subJourneyPolicy(tenant: h.tenant.name, extraSubJourneys: cycle)], tenant: h.tenant)
                Issue.record("a sub-journey cycle uploaded")
            } catch let rejection as PolicyRejection {
                #expect(rejection.description.contains("Ping → Pong → Ping") && rejection.description.contains("cycle"), "\(rejection.description)")
            }
            // Each invocation writes its sub-journey out again: a chain that multiplies past the
            // limit is refused at upload, as is a Type other than Call or Transfer.
            let invokeB = String(repeating: "", count: 0) + (1...40).map {
                #"<OrchestrationStep Order="\#($0)" Type="InvokeSubJourney"><JourneyList><Candidate SubJourneyReferenceId="Wide" /></JourneyList></OrchestrationStep>"#
            }.joined()
            let wide = """
                <SubJourney Id="Wider" Type="Call"><OrchestrationSteps>\(invokeB)</OrchestrationSteps></SubJourney>
                <SubJourney Id="Wide" Type="Call"><OrchestrationSteps>\(invokeB.replacingOccurrences(of: "\"Wide\"", with: "\"Leaf\""))</OrchestrationSteps></SubJourney>
                <SubJourney Id="Leaf" Type="Call"><OrchestrationSteps><OrchestrationStep Order="1" Type="ClaimsExchange">
                  <ClaimsExchanges><ClaimsExchange Id="LeafExchange" TechnicalProfileReferenceId="MakeShout" /></ClaimsExchanges>
                </OrchestrationStep></OrchestrationSteps></SubJourney>
                """
            let multiplied = String(decoding: Self.subJourneyPolicy(tenant: h.tenant.name, extraSubJourneys: wide), as: UTF8.self)
                .replacingOccurrences(of: #"<Candidate SubJourneyReferenceId="Loud" />"#, with: #"<Candidate SubJourneyReferenceId="Wider" />"#)
            do {
                try await h.server.administration.uploadCustomPolicies([Data(multiplied.utf8)], tenant: h.tenant)
                Issue.record("a journey of 3,000 steps uploaded")
            } catch let rejection as PolicyRejection {
                #expect(rejection.description.contains("more than 1000 steps with its sub-journeys written out"), "\(rejection.description)")
            }
            let lowerCase = String(decoding: Self.subJourneyPolicy(tenant: h.tenant.name), as: UTF8.self)
                .replacingOccurrences(of: #"<SubJourney Id="Refuse" Type="Transfer">"#, with: #"<SubJourney Id="Refuse" Type="transfer">"#)
            do {
                try await h.server.administration.uploadCustomPolicies([Data(lowerCase.utf8)], tenant: h.tenant)
                Issue.record("a lower-case sub-journey type uploaded")
            } catch let rejection as PolicyRejection {
                #expect(rejection.description.contains("has the Type 'transfer'; the types are Call and Transfer"), "\(rejection.description)")
            }
            let missing = String(decoding: Self.subJourneyPolicy(tenant: h.tenant.name), as: UTF8.self)
                .replacingOccurrences(of: #"<Candidate SubJourneyReferenceId="Loud" />"#, with: #"<Candidate SubJourneyReferenceId="Nowhere" />"#)
            do {
                try await h.server.administration.uploadCustomPolicies([Data(missing.utf8)], tenant: h.tenant)
                Issue.record("a missing sub-journey uploaded")
            } catch let rejection as PolicyRejection {
                #expect(rejection.description.contains("SubJourney with id 'Nowhere'"), "\(rejection.description)")
            }
        }
    }

    @Test(
        "a temporary password is replaced before whichever SendClaims issues the tokens: one skipped before the sign-in leaves the change in front of the one that runs",
        arguments: TestDatabase.engines)
    func forcedChangeBeforeLaterTokens(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            let tenant = h.tenant.name
            let policy = """
                <TrustFrameworkPolicy xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicySchemaVersion="0.3.0.0"
                  TenantId="\(tenant)" PolicyId="B2C_1A_test_late" PublicPolicyUri="http://\(tenant)/B2C_1A_test_late">
                <BasePolicy><TenantId>\(tenant)</TenantId><PolicyId>B2C_1A_LocalBase</PolicyId></BasePolicy>
                <UserJourneys><UserJourney Id="Late"><OrchestrationSteps>
                  <OrchestrationStep Order="1" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer">
                    <Preconditions><Precondition Type="ClaimsExist" ExecuteActionsIf="false">
                      <Value>objectId</Value><Action>SkipThisOrchestrationStep</Action></Precondition></Preconditions>
                  </OrchestrationStep>
                  <OrchestrationStep Order="2" Type="CombinedSignInAndSignUp" ContentDefinitionReferenceId="unified">
                    <ClaimsProviderSelections><ClaimsProviderSelection ValidationClaimsExchangeId="SignInExchange" /></ClaimsProviderSelections>
                    <ClaimsExchanges><ClaimsExchange Id="SignInExchange" TechnicalProfileReferenceId="Form-SignIn" /></ClaimsExchanges>
                  </OrchestrationStep>
                  <OrchestrationStep Order="3" Type="ClaimsExchange">
                    <ClaimsExchanges><ClaimsExchange Id="ReadExchange" TechnicalProfileReferenceId="Directory-Read" /></ClaimsExchanges>
                  </OrchestrationStep>
                  <OrchestrationStep Order="4" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />
                </OrchestrationSteps></UserJourney></UserJourneys>
                <RelyingParty><DefaultUserJourney ReferenceId="Late" />
                  <TechnicalProfile Id="PolicyProfile"><Protocol Name="OpenIdConnect" />
                    <OutputClaims><OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" /></OutputClaims>
                    <SubjectNamingInfo ClaimType="sub" /></TechnicalProfile></RelyingParty>
                </TrustFrameworkPolicy>
                """
            try await h.server.administration.uploadCustomPolicies([Data(policy.utf8)], tenant: h.tenant)
            let user = try await h.addUser("pat@example.com", name: "Pat")
            var changes = AccountChanges()
            changes.password = "Temp-Pass1"
            changes.forcePasswordChange = true
            try await h.server.administration.updateUser(user, changes)
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_late")
            let signIn = try await driver.start(attempt, harness: h)
            let asked = try await driver.submit(signIn, [("signInName", "pat@example.com"), ("password", "Temp-Pass1")])
            #expect(asked.redirectParameters["code"] == nil, "no code before the temporary password is replaced")
            #expect(asked.text.contains("id=\"changePassword\""), "\(asked.status) \(asked.text.prefix(300))")
            let done = try await driver.submit(asked, [("newPassword", "Chosen-Pass1"), ("reenterPassword", "Chosen-Pass1")])
            #expect(done.redirectParameters["code"] != nil, "\(done.status) \(done.redirectParameters)")
        }
    }

    /// A unit-test-shaped policy (nobody signs in) whose page shows a masked read-only claim and
    /// whose output transformations match a pattern (with a named group) and read a localized string.
    static func wordsPolicy(tenant: String) -> Data {
        PolicyFixtures.onLocalBase(
            id: "B2C_1A_test_words", tenant: tenant,
            claimTypes: """
                <ClaimType Id="word"><DisplayName>A word</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType></ClaimType>
                <ClaimType Id="contact"><DisplayName>Contact</DisplayName><DataType>string</DataType><UserInputType>Readonly</UserInputType>
                  <Mask Type="Regex" Regex="(?&lt;=.).(?=.*@)">*</Mask></ClaimType>
                <ClaimType Id="isNumber"><DisplayName>Number</DisplayName><DataType>boolean</DataType></ClaimType>
                <ClaimType Id="lead"><DisplayName>Lead</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="bannedWord"><DisplayName>Banned</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="wordIsBanned"><DisplayName>Banned?</DisplayName><DataType>boolean</DataType></ClaimType>
                """,
            transformations: """
                <ClaimsTransformation Id="Digits" TransformationMethod="SetClaimsIfRegexMatch">
                  <InputClaims><InputClaim ClaimTypeReferenceId="word" TransformationClaimType="claimToMatch" /></InputClaims>
                  <InputParameters>
                    <InputParameter Id="matchTo" DataType="string" Value="^(?&lt;lead&gt;[0-9]{2})[0-9]*$" />
                    <InputParameter Id="outputClaimIfMatched" DataType="string" Value="yes" />
                    <InputParameter Id="extractGroups" DataType="boolean" Value="true" />
                  </InputParameters>
                  <OutputClaims>
                    <OutputClaim ClaimTypeReferenceId="isNumber" TransformationClaimType="regexCompareResultClaim" />
                    <OutputClaim ClaimTypeReferenceId="lead" />
                  </OutputClaims>
                </ClaimsTransformation>
                <ClaimsTransformation Id="Banned" TransformationMethod="CreateStringClaim">
                  <InputParameters><InputParameter Id="value" DataType="string" Value="banned" /></InputParameters>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="bannedWord" TransformationClaimType="createdClaim" /></OutputClaims>
                </ClaimsTransformation>
                <ClaimsTransformation Id="IsBanned" TransformationMethod="CompareClaims">
                  <InputClaims>
                    <InputClaim ClaimTypeReferenceId="word" TransformationClaimType="inputClaim1" />
                    <InputClaim ClaimTypeReferenceId="bannedWord" TransformationClaimType="inputClaim2" />
                  </InputClaims>
                  <InputParameters>
                    <InputParameter Id="operator" DataType="string" Value="EQUAL" />
                    <InputParameter Id="ignoreCase" DataType="string" Value="true" />
                  </InputParameters>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="wordIsBanned" TransformationClaimType="outputClaim" /></OutputClaims>
                </ClaimsTransformation>
                <ClaimsTransformation Id="NotBanned" TransformationMethod="AssertBooleanClaimIsEqualToValue">
                  <InputClaims><InputClaim ClaimTypeReferenceId="wordIsBanned" TransformationClaimType="inputClaim" /></InputClaims>
                  <InputParameters><InputParameter Id="valueToCompareTo" DataType="boolean" Value="false" /></InputParameters>
                </ClaimsTransformation>
                <ClaimsTransformation Id="Greeting" TransformationMethod="GetLocalizedStringsTransformation">
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="greeting" TransformationClaimType="hello" /></OutputClaims>
                </ClaimsTransformation>
                """,
            buildingBlocks: """
                <ContentDefinitions><ContentDefinition Id="form"><LocalizedResourcesReferences>
                  <LocalizedResourcesReference Language="en" LocalizedResourcesReferenceId="form.en" />
                  <LocalizedResourcesReference Language="es" LocalizedResourcesReferenceId="form.es" />
                </LocalizedResourcesReferences></ContentDefinition></ContentDefinitions>
                <Localization Enabled="true">
                  <SupportedLanguages DefaultLanguage="en"><SupportedLanguage>en</SupportedLanguage><SupportedLanguage>es</SupportedLanguage></SupportedLanguages>
                  <LocalizedResources Id="form.en"><LocalizedStrings>
                    <LocalizedString ElementType="GetLocalizedStringsTransformationClaimType" StringId="hello">Hello</LocalizedString>
                  </LocalizedStrings></LocalizedResources>
                  <LocalizedResources Id="form.es"><LocalizedStrings>
                    <LocalizedString ElementType="GetLocalizedStringsTransformationClaimType" StringId="hello">Hola</LocalizedString>
                    <LocalizedString ElementType="ClaimType" ElementId="word" StringId="DisplayName">Una palabra</LocalizedString>
                    <LocalizedString ElementType="ClaimType" ElementId="word" StringId="UserHelpText">&lt;b&gt;sin&lt;/b&gt; espacios</LocalizedString>
                    <LocalizedString ElementType="UxElement" StringId="button_continue">Continuar</LocalizedString>
                    <LocalizedString ElementType="ErrorMessage" StringId="UserMessageIfClaimsTransformationBooleanValueIsNotEqual">Esa palabra no</LocalizedString>
                  </LocalizedStrings></LocalizedResources>
                </Localization>
                """,
            page: (
                "Experiment",
                """
                <InputClaims><InputClaim ClaimTypeReferenceId="contact" DefaultValue="emily@contoso.com" /></InputClaims>
                <DisplayClaims><DisplayClaim ClaimTypeReferenceId="word" Required="true" /><DisplayClaim ClaimTypeReferenceId="contact" /></DisplayClaims>
                <OutputClaims><OutputClaim ClaimTypeReferenceId="word" /></OutputClaims>
                <OutputClaimsTransformations>
                  <OutputClaimsTransformation ReferenceId="Digits" /><OutputClaimsTransformation ReferenceId="Greeting" />
                  <OutputClaimsTransformation ReferenceId="Banned" /><OutputClaimsTransformation ReferenceId="IsBanned" />
                  <OutputClaimsTransformation ReferenceId="NotBanned" />
                </OutputClaimsTransformations>
                """),
            signsIn: false,
            relyingPartyClaims: """
                <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" DefaultValue="1234" />
                <OutputClaim ClaimTypeReferenceId="isNumber" /><OutputClaim ClaimTypeReferenceId="lead" /><OutputClaim ClaimTypeReferenceId="greeting" />
                """)
    }

    @Test(
        "through the pages: a Readonly claim with a Mask is shown masked and nowhere whole; a pattern transformation's group and a localized string (by ui_locales) reach the token",
        arguments: TestDatabase.engines)
    func masksPatternsAndLanguages(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let plain = try await Self.uploadForIDToken(h, Self.wordsPolicy(tenant: h.tenant.name), id: "B2C_1A_test_words")
            func attempt(_ locales: String?) -> AuthorizationAttempt {
                var attempt = plain
                if let locales { attempt.extra = [("ui_locales", locales)] }
                return attempt
            }
            let page = try await driver.start(attempt("es-ES"), harness: h)
            #expect(page.status == .ok && page.field("contact") == "e****@contoso.com", "\(page.status) \(page.text)")
            // The page's own strings in the policy's Spanish: the label, the help (its markup as
            // text), the button, the page's language.
            #expect(page.text.contains("Una palabra") && page.text.contains(">Continuar<") && page.text.contains(#"lang="es""#), "\(page.text)")
            #expect(page.text.contains("&lt;b&gt;sin&lt;/b&gt; espacios") && !page.text.contains("<b>sin"), "localized markup is escaped")
            #expect(!page.text.contains("emily@"), "the masked value is nowhere on the page")
            // An assertion's message: the page's localized ErrorMessage, over the profile's metadata.
            let bannedSpanish = try await driver.submit(page, [("word", "Banned")])
            #expect(bannedSpanish.status == .badRequest && bannedSpanish.text.contains("Esa palabra no"), "\(bannedSpanish.status)")
            let spanish = try await driver.submit(bannedSpanish, [("word", "4711"), ("contact", "forged@example.com")])
            let claims = DecodedJWT(try #require(spanish.redirectParameters["id_token"], "\(spanish.status) \(spanish.text)")).claims
            #expect(claims["isNumber"] as? Bool == true && claims["lead"] as? String == "47" && claims["greeting"] as? String == "Hola", "\(claims)")

            let englishPage = try await driver.start(attempt(nil), harness: h)
            #expect(englishPage.text.contains("A word") && englishPage.text.contains(">Continue<") && !englishPage.text.contains("Una palabra"))
            let bannedEnglish = try await driver.submit(englishPage, [("word", "banned")])
            #expect(
                bannedEnglish.status == .badRequest && bannedEnglish.text.contains("Boolean claim value comparison failed") && !bannedEnglish.text.contains("Esa palabra"),
                "English has no localized message: B2C's default")
            let english = try await driver.submit(bannedEnglish, [("word", "four")])
            let other = DecodedJWT(try #require(english.redirectParameters["id_token"], "\(english.status) \(english.text)")).claims
            #expect(other["isNumber"] as? Bool == false && other["lead"] == nil && other["greeting"] as? String == "Hello", "\(other)")
        }
    }

    @Test(
        "a journey that signs nobody in issues its relying party's subject (an objectId default), with no oid and no session, as an ID token only: a code and an access token are refused",
        arguments: TestDatabase.engines)
    func policySubject(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let attempt = try await Self.uploadForIDToken(h, Self.subjectOnlyPolicy(tenant: h.tenant.name), id: "B2C_1A_test_nobody")
            let page = try await driver.start(attempt, harness: h)
            #expect(page.status == .ok && page.text.contains("id=\"word\""), "\(page.status) \(page.text)")
            let answered = try await driver.submit(page, [("word", "hello")])
            let token = try #require(answered.redirectParameters["id_token"], "\(answered.status) \(answered.text)")
            let claims = DecodedJWT(token).claims
            #expect(claims["sub"] as? String == "1234" && claims["shout"] as? String == "HELLO", "\(claims)")
            #expect(claims["oid"] == nil, "no account, no object id")
            #expect(claims["tfp"] as? String == "B2C_1A_test_nobody" && claims["nonce"] as? String == attempt.nonce)
            #expect(answered.headers[values: .setCookie].allSatisfy { !$0.hasPrefix("x-ms-cpim-sso") }, "no single-sign-on session for nobody")
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty, "no account was made")

            // A code would name an account: refused in the protocol's form, at the app.
            let withCode = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_nobody")
            let codePage = try await driver.start(withCode, harness: h)
            let refused = try await driver.submit(codePage, [("word", "hello")])
            #expect(refused.redirectParameters["code"] == nil && refused.redirectParameters["error"] != nil, "\(refused.status) \(refused.text)")

            // Nor an access token, whose subject APIs key their data by (the Task API: oid, else
            // sub): a made-up subject naming a real account's object id would read its tasks.
            let victim = try await h.addUser("victim@example.com", name: "Victim")
            try await h.server.administration.uploadCustomPolicies([Self.subjectOnlyPolicy(tenant: h.tenant.name, subject: victim.objectID)], tenant: h.tenant)
            var access = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_nobody", scope: "openid \(h.clientID)")
            access.responseType = "id_token token"
            let accessPage = try await driver.start(access, harness: h)
            let noAccess = try await driver.submit(accessPage, [("word", "hello")])
            #expect(noAccess.redirectParameters["access_token"] == nil && noAccess.redirectParameters["error"] != nil, "\(noAccess.status) \(noAccess.text)")
        }
    }

    @Test("sign up: the email proven with a code, the account written, newUser in the token; a taken address refused", arguments: TestDatabase.engines)
    func signUp(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            var page = try await driver.start(attempt, harness: h)
            // The combined page's first form is the sign-in; "Sign up now" is its own form.
            page = try await driver.follow(try await driver.post(page.formAction ?? "", [("csrf_token", page.field("csrf_token") ?? ""), ("action", "signup")]))
            #expect(page.text.contains("email_ver_but_send"), "\(page.status) \(page.text)")
            page = try await driver.submit(page, [("action", "send"), ("email", "dave@example.com")])
            #expect(page.text.contains("email_ver_input"), "\(page.text)")
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            #expect(page.text.contains("email_success"), "\(page.text)")
            let mismatch = try await driver.submit(page, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Other-Passw0rd"), ("displayName", "Dave")])
            #expect(mismatch.status == .badRequest)
            let kept = try await h.database.rows("SELECT journey FROM authorization_requests WHERE journey IS NOT NULL", [])
            #expect(try kept.allSatisfy { try !$0.text("journey").contains("Other-Passw0rd") }, "a refused form's passwords are not stored")
            let done = try await driver.submit(mismatch, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "Dave")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text)")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["newUser"] as? Bool == true)
            #expect(claims["email"] as? String == "dave@example.com" && claims["greeting"] as? String == "Hello Dave")
            let account = try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "dave@example.com")
            #expect(account?.displayName == "Dave" && account?.emailVerified == true)
            #expect(claims["sub"] as? String == account?.objectID)

            // The same address again: the directory write refuses it on the form.
            let again = AuthorizationAttempt(harness: h, policy: Self.policy)
            var second = try await driver.start(again, harness: h)
            second = try await driver.follow(try await driver.post(second.formAction ?? "", [("csrf_token", second.field("csrf_token") ?? ""), ("action", "signup")]))
            second = try await driver.submit(second, [("action", "send"), ("email", "DAVE@example.com")])
            second = try await driver.submit(second, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            let taken = try await driver.submit(second, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "Twin")])
            #expect(taken.status == .badRequest && taken.text.contains("already exists"), "\(taken.text)")
        }
    }

    @Test("the developer trace: /dev/journeys/{correlationId} lists each step the sign-in ran, the claims it changed with their values (never a password), and how it ended")
    func developerTrace() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            // The sign-in form copies the typed password into a claim of its own: the copy is hidden too.
            let files = try PolicyFixtures.localAccounts().map { data in
                Data(
                    String(decoding: data, as: UTF8.self)
                        .replacingOccurrences(
                            of: "  </ClaimsTransformations>",
                            with: """
                                    <ClaimsTransformation Id="CopyPassword" TransformationMethod="FormatStringClaim">
                                      <InputClaims><InputClaim ClaimTypeReferenceId="password" TransformationClaimType="inputClaim" /></InputClaims>
                                      <InputParameters><InputParameter Id="stringFormat" DataType="string" Value="copy:{0}" /></InputParameters>
                                      <OutputClaims><OutputClaim ClaimTypeReferenceId="passwordCopy" TransformationClaimType="outputClaim" /></OutputClaims>
                                    </ClaimsTransformation>
                                  </ClaimsTransformations>
                                """)
                        .replacingOccurrences(
                            of: #"<ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType>"#,
                            with: #"<ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType><ClaimType Id="passwordCopy"><DisplayName>Copy</DisplayName><DataType>string</DataType></ClaimType>"#)
                        .replacingOccurrences(
                            of: #"<ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Password-Check" /></ValidationTechnicalProfiles>"#,
                            with: #"<OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="CopyPassword" /></OutputClaimsTransformations><ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Password-Check" /></ValidationTechnicalProfiles>"#
                        ).utf8)
            }
            try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            try await h.server.administration.uploadCustomPolicies(files, tenant: h.tenant)
            _ = try await h.addUser("hana@example.com", name: "Hana")
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            let started = try await driver.get(attempt.url(harness: h))
            let correlation = try #require(started.headers[HTTPField.Name("client-request-id")!])
            let page = try await driver.follow(started)
            let done = try await driver.submit(page, [("signInName", "hana@example.com"), ("password", "Passw0rd!")])
            #expect(done.redirectParameters["code"] != nil)
            let trace = try await driver.get("/dev/journeys/\(correlation)", headers: [.accept: "application/json"])
            #expect(trace.status == .ok, "\(trace.text)")
            let journeys = try #require(trace.json["journeys"] as? [[String: Any]])
            let steps = try #require(journeys.first?["steps"] as? [[String: Any]])
            #expect(steps.compactMap { $0["step"] as? String }.contains("SignUpOrSignIn#3"))
            #expect(steps.contains { ($0["claims"] as? [String])?.contains("greeting") == true })
            #expect(steps.last?["result"] as? String == "finished")
            #expect(steps.contains { ($0["values"] as? [String: String])?["greeting"] == "Hello Hana" }, "the transformation's result")
            #expect(!trace.text.contains("Passw0rd"), "a password is never shown, nor a policy's copy of it")
            #expect(steps.contains { ($0["values"] as? [String: String])?["passwordcopy"] == "(hidden)" }, "\(trace.text)")
            // Whatever a step left in the bag, a secret a person typed is hidden in the trace.
            let program = try #require(try await h.server.service.customPolicies.program(tenantID: h.tenant.id, id: Self.policy))
            let shown = PolicyClaims(["newPassword": .string("Secret-1"), "password": .string("Secret-2"), "displayName": .string("Hana")])
                .traceValues(of: ["newPassword", "password", "displayName", "email"], policy: program)
            #expect(shown == ["newPassword": "(hidden)", "password": "(hidden)", "displayName": "Hana", "email": "(removed)"])
            let html = try await driver.get("/dev/journeys/\(correlation)", headers: [.accept: "text/html"])
            #expect(html.text.contains("journeyTrace") && html.text.contains("SignUpOrSignIn#1"))
            #expect(try await driver.get("/dev/journeys/\(UUID().uuidString)").status == .notFound)
            #expect(try await driver.get("/dev/journeys/%25").status == .notFound, "no wildcard")
        }
    }

    @Test("{OAUTH-KV:name} reads the authorization request's own parameters; an unknown one is empty, an oversized one is not kept")
    func oauthKeyValues() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            var files = try PolicyFixtures.localAccounts()
            files = files.map { data in
                Data(
                    String(decoding: data, as: UTF8.self).replacingOccurrences(
                        of: #"<OutputClaim ClaimTypeReferenceId="greeting" />"#,
                        with: #"<OutputClaim ClaimTypeReferenceId="greeting" DefaultValue="{OAUTH-KV:campaignId}|{OAUTH-KV:missing}|{OAUTH-KV:big}|{OAUTH-KV:client_id}" AlwaysUseDefaultValue="true" />"#
                    ).utf8)
            }
            try await PolicyFixtures.upload(files, to: h)
            _ = try await h.addUser("kai@example.com", name: "Kai")
            var attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            attempt.extra = [("campaignId", "hawaii"), ("big", String(repeating: "x", count: 600))]
            let page = try await driver.start(attempt, harness: h)
            let done = try await driver.submit(page, [("signInName", "kai@example.com"), ("password", "Passw0rd!")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text.prefix(300))")
            let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)).claims
            #expect(claims["greeting"] as? String == "hawaii|||\(h.clientID)", "\(claims)")
        }
    }

    @Test("a page whose profile keeps its session (DefaultSSOSessionProvider) is skipped for a browser with a live session; prompt=login asks again")
    func singleSignOn() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            var files = try PolicyFixtures.localAccounts()
            let base = String(decoding: files[0], as: UTF8.self)
                .replacingOccurrences(
                    of: #"<ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Password-Check" /></ValidationTechnicalProfiles>"#,
                    with: #"<ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Password-Check" /></ValidationTechnicalProfiles><UseTechnicalProfileForSessionManagement ReferenceId="SM-Session" />"#)
                .replacingOccurrences(
                    of: #"<TechnicalProfile Id="Issuer">"#,
                    with: #"<TechnicalProfile Id="SM-Session"><Protocol Name="Proprietary" Handler="Web.TPEngine.SSO.DefaultSSOSessionProvider, Web.TPEngine" /></TechnicalProfile><TechnicalProfile Id="Issuer">"#)
            files[0] = Data(base.utf8)
            try await PolicyFixtures.upload(files, to: h)
            let user = try await h.addUser("ines@example.com", name: "Ines")
            let first = AuthorizationAttempt(harness: h, policy: Self.policy)
            let page = try await driver.start(first, harness: h)
            let signedIn = try await driver.submit(page, [("signInName", "ines@example.com"), ("password", "Passw0rd!")])
            #expect(signedIn.redirectParameters["code"] != nil)

            var silent = AuthorizationAttempt(harness: h, policy: Self.policy)
            silent.extra = [("prompt", "none")]
            let again = try await driver.start(silent, harness: h)
            let code = try #require(again.redirectParameters["code"], "no page with a live session: \(again.status) \(again.text.prefix(200))")
            let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: silent, code: code).json["id_token"] as? String)).claims
            #expect(claims["sub"] as? String == user.objectID && claims["greeting"] as? String == "Hello Ines")

            var login = AuthorizationAttempt(harness: h, policy: Self.policy)
            login.extra = [("prompt", "login")]
            let asked = try await driver.start(login, harness: h)
            #expect(asked.text.contains("id=\"signInName\""), "prompt=login shows the sign-in page")

            // The shipped policies keep no session: a second sign-in asks again.
            try await PolicyFixtures.upload(try PolicyFixtures.localAccounts(), to: h)
            let plain = try await driver.start(AuthorizationAttempt(harness: h, policy: Self.policy), harness: h)
            #expect(plain.text.contains("id=\"signInName\""))
        }
    }

    @Test("predicates: a claim type's PredicateValidation refuses a value with its group's help text; a value that meets it goes through")
    func predicates() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            var files = try PolicyFixtures.localAccounts()
            let base = String(decoding: files[0], as: UTF8.self)
                .replacingOccurrences(
                    of: #"<ClaimType Id="newPassword"><DisplayName>New password</DisplayName><DataType>string</DataType><UserInputType>Password</UserInputType></ClaimType>"#,
                    with: #"<ClaimType Id="newPassword"><DisplayName>New password</DisplayName><DataType>string</DataType><UserInputType>Password</UserInputType><PredicateValidationReference Id="LongPassword" /></ClaimType>"#)
                .replacingOccurrences(
                    of: "<ClaimsTransformations>",
                    with: """
                        <Predicates>
                          <Predicate Id="Long" Method="IsLengthRange" HelpText="12 to 64 characters."><Parameters><Parameter Id="Minimum">12</Parameter><Parameter Id="Maximum">64</Parameter></Parameters></Predicate>
                          <Predicate Id="Lower" Method="IncludesCharacters"><Parameters><Parameter Id="CharacterSet">a-z</Parameter></Parameters></Predicate>
                          <Predicate Id="Digit" Method="IncludesCharacters"><Parameters><Parameter Id="CharacterSet">0-9</Parameter></Parameters></Predicate>
                          <Predicate Id="Symbol" Method="IncludesCharacters"><Parameters><Parameter Id="CharacterSet">@#$%^&amp;*\\-_+=!</Parameter></Parameters></Predicate>
                        </Predicates>
                        <PredicateValidations>
                          <PredicateValidation Id="LongPassword">
                            <PredicateGroups>
                              <PredicateGroup Id="Length"><UserHelpText>Use at least 12 characters.</UserHelpText><PredicateReferences><PredicateReference Id="Long" /></PredicateReferences></PredicateGroup>
                              <PredicateGroup Id="Kinds"><UserHelpText>Use two of: lowercase, digits, symbols.</UserHelpText>
                                <PredicateReferences MatchAtLeast="2"><PredicateReference Id="Lower" /><PredicateReference Id="Digit" /><PredicateReference Id="Symbol" /></PredicateReferences></PredicateGroup>
                            </PredicateGroups>
                          </PredicateValidation>
                        </PredicateValidations>
                        <ClaimsTransformations>
                        """)
            files[0] = Data(base.utf8)
            try await PolicyFixtures.upload(files, to: h)
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            var page = try await driver.start(attempt, harness: h)
            page = try await driver.follow(try await driver.post(page.formAction ?? "", [("csrf_token", page.field("csrf_token") ?? ""), ("action", "signup")]))
            page = try await driver.submit(page, [("action", "send"), ("email", "pia@example.com")])
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            let short = try await driver.submit(page, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "Pia")])
            #expect(short.status == .badRequest && short.text.contains("Use at least 12 characters."), "\(short.text.prefix(300))")
            let done = try await driver.submit(
                short, [("action", "continue"), ("newPassword", "Longer-Passw0rd"), ("reenterPassword", "Longer-Passw0rd"), ("displayName", "Pia")])
            #expect(done.redirectParameters["code"] != nil, "\(done.status) \(done.text.prefix(300))")
            #expect(PolicyPredicates.characters(in: #"a-c\-_"#) == Set("abc-_".unicodeScalars))
        }
    }

    @Test("password reset: the address proven, the account found by it, the new password written; an unknown address is told so", arguments: TestDatabase.engines)
    func passwordReset(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            _ = try await h.addUser("gina@example.com", name: "Gina")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_reset")
            var page = try await driver.start(attempt, harness: h)
            page = try await driver.submit(page, [("action", "send"), ("email", "nobody@example.com")])
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            let unknown = try await driver.submit(page, [("action", "continue")])
            #expect(unknown.status == .badRequest && unknown.text.contains("No account uses this email address."), "\(unknown.text)")

            let again = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_reset")
            page = try await driver.start(again, harness: h)
            page = try await driver.submit(page, [("action", "send"), ("email", "gina@example.com")])
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", "000000")])
            #expect(page.status == .badRequest, "a wrong code proves nothing")
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            page = try await driver.submit(page, [("action", "continue")])
            #expect(page.text.contains("newPassword"), "\(page.text)")
            let done = try await driver.submit(page, [("action", "continue"), ("newPassword", "Reset-Passw0rd"), ("reenterPassword", "Reset-Passw0rd")])
            #expect(done.redirectParameters["code"] != nil, "\(done.status) \(done.text)")

            let signIn = AuthorizationAttempt(harness: h, policy: Self.policy)
            let form = try await driver.start(signIn, harness: h)
            let old = try await driver.submit(form, [("signInName", "gina@example.com"), ("password", "Passw0rd!")])
            #expect(old.status == .badRequest, "the old password no longer works")
            let new = try await driver.submit(old, [("signInName", "gina@example.com"), ("password", "Reset-Passw0rd")])
            #expect(new.redirectParameters["code"] != nil)
        }
    }
}

/// What an end user must not be able to do with a policy's pages, whatever the policy's shape.
@Suite("Custom policies: an end user cannot sign in as someone else")
struct CustomPolicyBoundaryTests {
    /// The local-accounts base with its sign-in page reading the account by the typed name
    /// before the password check (a common shape), and a relying party on it.
    static func readThenCheck(_ h: IdentityHarness) async throws {
        var files = try PolicyFixtures.localAccounts()
        var base = String(decoding: files[0], as: UTF8.self)
        base = base.replacingOccurrences(
            of: #"<ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Password-Check" /></ValidationTechnicalProfiles>"#,
            with: #"<ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Directory-ReadByName" /><ValidationTechnicalProfile ReferenceId="Password-Check" /></ValidationTechnicalProfiles>"#)
        base = base.replacingOccurrences(
            of: #"<TechnicalProfile Id="Issuer">"#,
            with: """
                <TechnicalProfile Id="Directory-ReadByName">
                  <Metadata><Item Key="Operation">Read</Item></Metadata>
                  <InputClaims><InputClaim ClaimTypeReferenceId="signInName" PartnerClaimType="signInNames.emailAddress" /></InputClaims>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="objectId" /></OutputClaims>
                  <IncludeTechnicalProfile ReferenceId="Directory-Common" />
                </TechnicalProfile>
                <TechnicalProfile Id="Form-SetPassword">
                  <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine" />
                  <OutputClaims>
                    <OutputClaim ClaimTypeReferenceId="signInName" Required="true" />
                    <OutputClaim ClaimTypeReferenceId="newPassword" Required="true" />
                    <OutputClaim ClaimTypeReferenceId="reenterPassword" Required="true" />
                  </OutputClaims>
                  <ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Directory-WriteByName" /></ValidationTechnicalProfiles>
                </TechnicalProfile>
                <TechnicalProfile Id="Directory-WriteByName">
                  <Metadata><Item Key="Operation">Write</Item></Metadata>
                  <InputClaims><InputClaim ClaimTypeReferenceId="signInName" PartnerClaimType="signInNames.emailAddress" /></InputClaims>
                  <PersistedClaims><PersistedClaim ClaimTypeReferenceId="newPassword" PartnerClaimType="password" /></PersistedClaims>
                  <IncludeTechnicalProfile ReferenceId="Directory-Common" />
                </TechnicalProfile>
                <TechnicalProfile Id="Issuer">
                """)
        base = base.replacingOccurrences(
            of: "</UserJourneys>",
            with: """
                <UserJourney Id="SetPassword">
                  <OrchestrationSteps>
                    <OrchestrationStep Order="1" Type="ClaimsExchange">
                      <ClaimsExchanges><ClaimsExchange Id="SetExchange" TechnicalProfileReferenceId="Form-SetPassword" /></ClaimsExchanges>
                    </OrchestrationStep>
                    <OrchestrationStep Order="2" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />
                  </OrchestrationSteps>
                </UserJourney>
                </UserJourneys>
                """)
        files[0] = Data(base.utf8)
        let setPassword = String(decoding: files[2], as: UTF8.self).replacingOccurrences(of: "B2C_1A_test_reset", with: "B2C_1A_test_set")
            .replacingOccurrences(of: #"ReferenceId="PasswordReset""#, with: #"ReferenceId="SetPassword""#)
        files.append(Data(setPassword.utf8))
        try await PolicyFixtures.upload(files, to: h)
    }

    @Test("a failed sign-in keeps nothing it read: 'Sign up now' after a wrong password for someone else is a sign-up, not their session")
    func failedSubmitKeepsNothing() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.readThenCheck(h)
            _ = try await h.addUser("victim@example.com", name: "Victim")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
            let page = try await driver.start(attempt, harness: h)
            let wrong = try await driver.submit(page, [("signInName", "victim@example.com"), ("password", "not-their-Passw0rd")])
            #expect(wrong.status == .badRequest)
            let next = try await driver.follow(
                try await driver.post(wrong.formAction ?? "", [("csrf_token", wrong.field("csrf_token") ?? ""), ("action", "signup")]))
            #expect(next.redirectParameters["code"] == nil, "no tokens for the victim: \(next.status)")
            #expect(next.text.contains("email_ver_but_send"), "the sign-up page: \(next.status) \(next.text.prefix(300))")
        }
    }

    @Test("a directory write keyed by what a person typed cannot change another account's password")
    func writeToUnprovenAccount() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.readThenCheck(h)
            _ = try await h.addUser("victim@example.com", name: "Victim")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_set")
            let page = try await driver.start(attempt, harness: h)
            let answer = try await driver.submit(
                page, [("action", "continue"), ("signInName", "victim@example.com"), ("newPassword", "Taken-Over9"), ("reenterPassword", "Taken-Over9")])
            #expect(answer.redirectParameters["code"] == nil)
            #expect(answer.redirectParameters["error"] == "server_error", "\(answer.status) \(answer.redirectParameters)")
            let still = try await driver.ropc(h, username: "victim@example.com", password: "Passw0rd!")
            #expect(still.status == .ok, "the victim's password is unchanged")
        }
    }

    @Test("a policy whose claims name another account than the one signed in issues no tokens")
    func subjectMustBeTheSignedInAccount() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let victim = try await h.addUser("victim@example.com", name: "Victim")
            _ = try await h.addUser("mallory@example.com", name: "Mallory")
            var files = try PolicyFixtures.localAccounts()
            let base = String(decoding: files[0], as: UTF8.self)
                .replacingOccurrences(
                    of: "</ClaimsTransformations>",
                    with: """
                        <ClaimsTransformation Id="SetSubject" TransformationMethod="CreateStringClaim">
                          <InputParameters><InputParameter Id="value" DataType="string" Value="\(victim.objectID)" /></InputParameters>
                          <OutputClaims><OutputClaim ClaimTypeReferenceId="objectId" TransformationClaimType="createdClaim" /></OutputClaims>
                        </ClaimsTransformation>
                        </ClaimsTransformations>
                        """)
                .replacingOccurrences(
                    of: #"<TechnicalProfile Id="Issuer">"#,
                    with: #"<TechnicalProfile Id="Swap-Subject"><Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.ClaimsTransformationProtocolProvider, Web.TPEngine" /><OutputClaims><OutputClaim ClaimTypeReferenceId="objectId" /></OutputClaims><OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="SetSubject" /></OutputClaimsTransformations></TechnicalProfile><TechnicalProfile Id="Issuer">"#)
                .replacingOccurrences(
                    of: #"<OrchestrationStep Order="4" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />"#,
                    with: #"<OrchestrationStep Order="4" Type="ClaimsExchange"><ClaimsExchanges><ClaimsExchange Id="SwapExchange" TechnicalProfileReferenceId="Swap-Subject" /></ClaimsExchanges></OrchestrationStep><OrchestrationStep Order="5" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />"#)
            files[0] = Data(base.utf8)
            try await PolicyFixtures.upload(files, to: h)
            let attempt = AuthorizationAttempt(harness: h, policy: CustomPolicyRunTests.policy)
            let page = try await driver.start(attempt, harness: h)
            let answer = try await driver.submit(page, [("signInName", "mallory@example.com"), ("password", "Passw0rd!")])
            #expect(answer.redirectParameters["code"] == nil)
            #expect(answer.redirectParameters["error"] == "server_error", "\(answer.status) \(answer.redirectParameters)")
        }
    }

    @Test("an operator's temporary password is replaced before a custom policy issues tokens")
    func forcedPasswordChange() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await CustomPolicyRunTests.upload(h)
            let user = try await h.addUser("temp@example.com", name: "Temp")
            try await h.server.users.setPassword(
                id: user.id, hash: try await h.server.service.hasher.hash("Passw0rd!"), emailProven: true, forceChange: true, now: h.clock.now)
            let attempt = AuthorizationAttempt(harness: h, policy: CustomPolicyRunTests.policy)
            let page = try await driver.start(attempt, harness: h)
            let next = try await driver.submit(page, [("signInName", "temp@example.com"), ("password", "Passw0rd!")])
            #expect(next.redirectParameters["code"] == nil)
            #expect(next.text.contains("newPassword"), "the change-password page: \(next.status)")
        }
    }
}
