import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JOSE
import Logging
import NIOCore
import Storage
import TestSupport
import Testing
import WireCoding

@testable import IdentityDirectory
@testable import IdentityServer
@testable import TrustFramework
@testable import UserJourneys

/// `GetClaims` with B2C's `id_token_hint` profile (id-token-hint.md): an invitation signed by the
/// app with a shared secret, and one signed with the app's RSA key published at its `METADATA`.
@Suite("custom policy id_token_hint")
struct CustomPolicyHintTests {
    static let hintKeySet = "B2C_1A_IdTokenHintKey"
    static let secret = "VK62QTn0m1hMcn0DQ3RPYDAr6yIiSvYgdRwjZtU5QhI="
    static let audience = "a489fc44-3cc0-4a78-92f6-e413cd853eae"
    static let issuer = "https://invites.example"

    /// The invitation journey: `GetClaims` reads the hint, a page asks for a word, the token
    /// carries what the hint said. `hintProfile` is the `IdTokenHint_ExtractClaims` profile's
    /// protocol, metadata and keys.
    static func invitationPolicy(tenant: String, hintProfile: String) -> Data {
        Data(
            """
            <TrustFrameworkPolicy xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicySchemaVersion="0.3.0.0"
              TenantId="\(tenant)" PolicyId="B2C_1A_test_invite" PublicPolicyUri="http://\(tenant)/B2C_1A_test_invite">
            <BasePolicy><TenantId>\(tenant)</TenantId><PolicyId>B2C_1A_LocalBase</PolicyId></BasePolicy>
            <BuildingBlocks><ClaimsSchema>
              <ClaimType Id="word"><DisplayName>A word</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType></ClaimType>
              <ClaimType Id="seats"><DisplayName>Seats</DisplayName><DataType>int</DataType></ClaimType>
              <ClaimType Id="teams"><DisplayName>Teams</DisplayName><DataType>stringCollection</DataType></ClaimType>
            </ClaimsSchema></BuildingBlocks>
            <ClaimsProviders><ClaimsProvider><DisplayName>Invitations</DisplayName><TechnicalProfiles>
              <TechnicalProfile Id="IdTokenHint_ExtractClaims">
                <DisplayName>Invitation</DisplayName>
                \(hintProfile)
                <OutputClaims>
                  <OutputClaim ClaimTypeReferenceId="email" PartnerClaimType="userId" />
                  <OutputClaim ClaimTypeReferenceId="seats" />
                  <OutputClaim ClaimTypeReferenceId="teams" />
                  <OutputClaim ClaimTypeReferenceId="greeting" DefaultValue="welcome" />
                </OutputClaims>
              </TechnicalProfile>
              <TechnicalProfile Id="Ask">
                <DisplayName>A word</DisplayName>
                <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                <Metadata><Item Key="ContentDefinitionReferenceId">form</Item></Metadata>
                <DisplayClaims><DisplayClaim ClaimTypeReferenceId="word" Required="true" /></DisplayClaims>
                <OutputClaims><OutputClaim ClaimTypeReferenceId="word" /></OutputClaims>
              </TechnicalProfile>
            </TechnicalProfiles></ClaimsProvider></ClaimsProviders>
            <UserJourneys><UserJourney Id="Invitation"><OrchestrationSteps>
              <OrchestrationStep Order="1" Type="GetClaims" CpimIssuerTechnicalProfileReferenceId="IdTokenHint_ExtractClaims" />
              <OrchestrationStep Order="2" Type="ClaimsExchange">
                <ClaimsExchanges><ClaimsExchange Id="AskExchange" TechnicalProfileReferenceId="Ask" /></ClaimsExchanges>
              </OrchestrationStep>
              <OrchestrationStep Order="3" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />
            </OrchestrationSteps></UserJourney></UserJourneys>
            <RelyingParty>
              <DefaultUserJourney ReferenceId="Invitation" />
              <TechnicalProfile Id="PolicyProfile">
                <Protocol Name="OpenIdConnect" />
                <InputClaims>
                  <InputClaim ClaimTypeReferenceId="email" PartnerClaimType="userId" />
                  <InputClaim ClaimTypeReferenceId="displayName" PartnerClaimType="name" />
                </InputClaims>
                <OutputClaims>
                  <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" DefaultValue="invitee" />
                  <OutputClaim ClaimTypeReferenceId="email" />
                  <OutputClaim ClaimTypeReferenceId="displayName" PartnerClaimType="name" />
                  <OutputClaim ClaimTypeReferenceId="seats" />
                  <OutputClaim ClaimTypeReferenceId="teams" />
                  <OutputClaim ClaimTypeReferenceId="greeting" />
                  <OutputClaim ClaimTypeReferenceId="word" />
                </OutputClaims>
                <SubjectNamingInfo ClaimType="sub" />
              </TechnicalProfile>
            </RelyingParty>
            </TrustFrameworkPolicy>
            """.utf8)
    }

    static let symmetricProfile = """
        <Protocol Name="None" />
        <Metadata>
          <Item Key="IdTokenAudience">\(audience)</Item>
          <Item Key="issuer">\(issuer)</Item>
        </Metadata>
        <CryptographicKeys><Key Id="client_secret" StorageReferenceId="\(hintKeySet)" /></CryptographicKeys>
        """

    /// A compact JWS of `claims` (JSON text) under `header`, signed with HMAC-SHA256 by `secret`.
    static func hmacToken(_ claims: String, secret: String = secret, header: String = #"{"alg":"HS256","typ":"JWT"}"#) -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return input + "." + Base64URL.encode(Data(mac))
    }

    /// The invitation's claims: `iss`, `aud`, `nbf` and `exp` around `now` unless given.
    static func claims(
        now: Date, iss: String = issuer, aud: String = audience, nbf: Int? = 0, exp: Int = 3600, extra: String = ""
    ) -> String {
        let t = Int(now.timeIntervalSince1970)
        let notBefore = nbf.map { #","nbf":\#(t + $0)"# } ?? ""
        return #"{"userId":"invitee@example.com","name":"Ivy Invitee","seats":3,"teams":["red","blue"],"iss":"\#(iss)","aud":"\#(aud)","exp":\#(t + exp)\#(notBefore)\#(extra)}"#
    }

    static func uploadInvitation(_ h: IdentityHarness, hintProfile: String = symmetricProfile) async throws -> AuthorizationAttempt {
        try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id, secrets: [hintKeySet: secret])
        return try await CustomPolicyRunTests.uploadForIDToken(
            h, invitationPolicy(tenant: h.tenant.name, hintProfile: hintProfile), id: "B2C_1A_test_invite")
    }

    static func with(_ attempt: AuthorizationAttempt, hint: String) -> AuthorizationAttempt {
        var attempt = attempt
        attempt.extra = [("id_token_hint", hint)]
        return attempt
    }

    /// The B2C error code the app was sent, from its `error_description`.
    static func errorCode(_ response: TestResponse) -> String? {
        response.redirectParameters["error_description"].map { String($0.replacingOccurrences(of: "+", with: " ").prefix { $0 != ":" }) }
    }

    @Test("a symmetric invitation: its claims are read by partner claim type and typed as declared, then the journey goes on", arguments: TestDatabase.engines)
    func symmetricInvitation(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let plain = try await Self.uploadInvitation(h)
            let attempt = Self.with(plain, hint: Self.hmacToken(Self.claims(now: h.clock.now)))
            let page = try await driver.start(attempt, harness: h)
            #expect(page.status == .ok && page.text.contains("id=\"word\""), "\(page.status) \(page.location ?? "") \(page.text.prefix(300))")
            let done = try await driver.submit(page, [("word", "hello")])
            let claims = DecodedJWT(try #require(done.redirectParameters["id_token"], "\(done.status) \(done.redirectParameters)")).claims
            #expect(claims["email"] as? String == "invitee@example.com", "the profile's PartnerClaimType: \(claims)")
            #expect(claims["name"] as? String == "Ivy Invitee", "the relying party's input claims are read too: \(claims)")
            #expect(claims["seats"] as? Int == 3 && claims["teams"] as? [String] == ["red", "blue"], "\(claims)")
            #expect(claims["greeting"] as? String == "welcome" && claims["word"] as? String == "hello" && claims["sub"] as? String == "invitee")
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty, "reading an invitation makes no account")

            // Without a hint nothing is read (the policy's own steps decide what that means).
            let bare = try await driver.submit(try await driver.start(plain, harness: h), [("word", "hi")])
            let without = DecodedJWT(try #require(bare.redirectParameters["id_token"], "\(bare.status) \(bare.redirectParameters)")).claims
            #expect(without["email"] == nil && without["greeting"] as? String == "welcome", "\(without)")
        }
    }

    @Test(
        "a forged, tampered, expired, early, wrongly issued or audienced, alg:none or RSA-signed hint is refused with B2C's AADB2C90233 or AADB2C90208",
        arguments: TestDatabase.engines)
    func refusedHints(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let plain = try await Self.uploadInvitation(h)
            let now = h.clock.now
            let good = Self.hmacToken(Self.claims(now: now))
            let parts = good.split(separator: ".").map(String.init)
            let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let cases: [(String, String, String)] = [
                ("another secret", Self.hmacToken(Self.claims(now: now), secret: "not-the-invitation-secret"), "AADB2C90233"),
                ("a changed payload", parts[0] + "." + Base64URL.encode(Array(Self.claims(now: now, extra: #","admin":true"#).utf8)) + "." + parts[2], "AADB2C90233"),
                ("expired", Self.hmacToken(Self.claims(now: now, nbf: -7200, exp: -3600)), "AADB2C90208"),
                ("not yet valid", Self.hmacToken(Self.claims(now: now, nbf: 3600, exp: 7200)), "AADB2C90233"),
                ("without nbf", Self.hmacToken(Self.claims(now: now, nbf: nil)), "AADB2C90233"),
                ("another issuer", Self.hmacToken(Self.claims(now: now, iss: "https://evil.example")), "AADB2C90233"),
                ("another audience", Self.hmacToken(Self.claims(now: now, aud: "someone-else")), "AADB2C90233"),
                ("alg none", Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + parts[1] + ".", "AADB2C90233"),
                ("RS256 to a symmetric profile", try RS256.sign(claims: Array(Self.claims(now: now).utf8), keyID: "k1", with: RS256Signer(rsa)), "AADB2C90233"),
                ("not a JWT", "not-a-token", "AADB2C90233"),
                ("not base64url", "a.b.c%3Cscript%3E", "AADB2C90233"),
                ("too long", String(repeating: "a", count: 17 * 1024), "AADB2C90233"),
            ]
            for (name, hint, code) in cases {
                let refused = try await driver.start(Self.with(plain, hint: hint), harness: h)
                #expect(refused.redirectParameters["id_token"] == nil, "\(name): \(refused.redirectParameters)")
                #expect(refused.redirectParameters["error"] == "invalid_request", "\(name): \(refused.status) \(refused.redirectParameters)")
                #expect(Self.errorCode(refused) == code, "\(name): \(refused.redirectParameters["error_description"] ?? "")")
                #expect(refused.redirectParameters["state"] == plain.state, "\(name)")
            }
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("an asymmetric invitation: RS256 keys from the METADATA document's jwks_uri, its issuer; another key or an HMAC made with the public key is refused")
    func asymmetricInvitation() async throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let box = UpstreamProviderTests.PortBox()
        let router = Router()
        router.get(".well-known/openid-configuration") { _, _ -> Response in
            let body = #"{"issuer":"https://app.example/invites","jwks_uri":"http://127.0.0.1:\#(box.value)/.well-known/keys"}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        let (n, e) = JWKSet.components(of: key.publicKey)
        let jwks = #"{"keys":[{"kty":"RSA","use":"sig","kid":"app-1","n":"\#(n)","e":"\#(e)"}]}"#
        router.get(".well-known/keys") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: jwks)))
        }
        try await Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: Logger(label: "invites")).test(.live) { app in
            box.value = try #require(app.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                let profile = """
                    <Protocol Name="None" />
                    <Metadata>
                      <Item Key="METADATA">http://127.0.0.1:\(box.value)/.well-known/openid-configuration</Item>
                      <Item Key="IdTokenAudience">\(Self.audience)</Item>
                    </Metadata>
                    """
                let plain = try await Self.uploadInvitation(h, hintProfile: profile)
                let claims = Self.claims(now: h.clock.now, iss: "https://app.example/invites")
                let signed = try RS256.sign(claims: Array(claims.utf8), keyID: "app-1", with: RS256Signer(key))
                let page = try await driver.start(Self.with(plain, hint: signed), harness: h)
                let done = try await driver.submit(page, [("word", "hello")])
                let token = DecodedJWT(try #require(done.redirectParameters["id_token"], "\(done.status) \(done.redirectParameters)")).claims
                #expect(token["email"] as? String == "invitee@example.com", "\(token)")

                let other = try RS256.sign(claims: Array(claims.utf8), keyID: "app-1", with: RS256Signer(try _RSA.Signing.PrivateKey(keySize: .bits2048)))
                // RFC 8725 §2.1: the public key (as its JWK text) used as an HMAC secret.
                let confused = Self.hmacToken(claims, secret: jwks)
                let wrongIssuer = try RS256.sign(
                    claims: Array(Self.claims(now: h.clock.now).utf8), keyID: "app-1", with: RS256Signer(key))
                for (name, hint) in [("another key", other), ("HMAC with the public key", confused), ("not the document's issuer", wrongIssuer)] {
                    let refused = try await driver.start(Self.with(plain, hint: hint), harness: h)
                    #expect(Self.errorCode(refused) == "AADB2C90233", "\(name): \(refused.status) \(refused.redirectParameters)")
                }
            }
        }
    }

    @Test("a GetClaims step is refused at upload without an issuer, with a profile that is no id_token_hint check, or one that lacks its key, issuer or https METADATA")
    func uploadRefusals() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            _ = try await Self.uploadInvitation(h)
            func refusal(_ profile: String, step: String? = nil) async throws -> String {
                var text = String(decoding: Self.invitationPolicy(tenant: h.tenant.name, hintProfile: profile), as: UTF8.self)
                if let step {
                    text = text.replacingOccurrences(
                        of: #"<OrchestrationStep Order="1" Type="GetClaims" CpimIssuerTechnicalProfileReferenceId="IdTokenHint_ExtractClaims" />"#,
                        with: step)
                }
                do {
                    try await h.server.administration.uploadCustomPolicies([Data(text.utf8)], tenant: h.tenant)
                    return "uploaded"
                } catch let rejection as PolicyRejection {
                    return rejection.description
                }
            }
            let noIssuer = try await refusal(Self.symmetricProfile, step: #"<OrchestrationStep Order="1" Type="GetClaims" />"#)
            #expect(noIssuer.contains("names no CpimIssuerTechnicalProfileReferenceId"), "\(noIssuer)")
            let notHint = try await refusal(#"<Protocol Name="None" />"#)
            #expect(notHint.contains("is not an id_token_hint profile"), "\(notHint)")
            let noKey = try await refusal(
                #"<Protocol Name="None" /><Metadata><Item Key="IdTokenAudience">a</Item><Item Key="issuer">https://i</Item></Metadata>"#)
            #expect(noKey.contains("needs the issuer and IdTokenAudience metadata and a client_secret key"), "\(noKey)")
            let plainHTTP = try await refusal(
                #"<Protocol Name="None" /><Metadata><Item Key="METADATA">http://invites.example/.well-known/openid-configuration</Item></Metadata>"#)
            #expect(plainHTTP.contains("needs a METADATA URL that is https"), "\(plainHTTP)")
            #expect(try await refusal(Self.symmetricProfile) == "uploaded", "the fixture itself is valid")
        }
    }
}

/// `UserJourneyContextProvider` (analytics-with-application-insights.md's `SimpleUJContext`).
@Suite("custom policy journey context")
struct CustomPolicyJourneyContextTests {
    @Test("UserJourneyContextProvider writes the sign-in's address, correlation id, time and build as claims; Hash reads its key set's secret")
    func journeyContext() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let tenant = h.tenant.name
            let policy = Data(
                """
                <TrustFrameworkPolicy xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicySchemaVersion="0.3.0.0"
                  TenantId="\(tenant)" PolicyId="B2C_1A_test_context" PublicPolicyUri="http://\(tenant)/B2C_1A_test_context">
                <BasePolicy><TenantId>\(tenant)</TenantId><PolicyId>B2C_1A_LocalBase</PolicyId></BasePolicy>
                <BuildingBlocks><ClaimsSchema>
                  <ClaimType Id="IP-Address"><DisplayName>Address</DisplayName><DataType>string</DataType></ClaimType>
                  <ClaimType Id="CorrelationId"><DisplayName>Correlation</DisplayName><DataType>string</DataType></ClaimType>
                  <ClaimType Id="DateTimeInUtc"><DisplayName>Now</DisplayName><DataType>dateTime</DataType></ClaimType>
                  <ClaimType Id="Build"><DisplayName>Build</DisplayName><DataType>string</DataType></ClaimType>
                  <ClaimType Id="hashed"><DisplayName>Hashed</DisplayName><DataType>string</DataType></ClaimType>
                </ClaimsSchema>
                <ClaimsTransformations>
                  <ClaimsTransformation Id="HashBuild" TransformationMethod="Hash">
                    <InputClaims>
                      <InputClaim ClaimTypeReferenceId="Build" TransformationClaimType="plaintext" />
                      <InputClaim ClaimTypeReferenceId="CorrelationId" TransformationClaimType="salt" />
                    </InputClaims>
                    <InputParameters><InputParameter Id="randomizerSecret" DataType="string" Value="B2C_1A_HashSecret" /></InputParameters>
                    <OutputClaims><OutputClaim ClaimTypeReferenceId="hashed" TransformationClaimType="hash" /></OutputClaims>
                  </ClaimsTransformation>
                </ClaimsTransformations></BuildingBlocks>
                <ClaimsProviders><ClaimsProvider><DisplayName>User Journey Context Provider</DisplayName><TechnicalProfiles>
                  <TechnicalProfile Id="SimpleUJContext">
                    <DisplayName>User Journey Context Provider</DisplayName>
                    <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.UserJourneyContextProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                    <OutputClaims>
                      <OutputClaim ClaimTypeReferenceId="IP-Address" /><OutputClaim ClaimTypeReferenceId="CorrelationId" />
                      <OutputClaim ClaimTypeReferenceId="DateTimeInUtc" /><OutputClaim ClaimTypeReferenceId="Build" />
                    </OutputClaims>
                    <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="HashBuild" /></OutputClaimsTransformations>
                  </TechnicalProfile>
                </TechnicalProfiles></ClaimsProvider></ClaimsProviders>
                <UserJourneys><UserJourney Id="Context"><OrchestrationSteps>
                  <OrchestrationStep Order="1" Type="ClaimsExchange">
                    <ClaimsExchanges><ClaimsExchange Id="ContextExchange" TechnicalProfileReferenceId="SimpleUJContext" /></ClaimsExchanges>
                  </OrchestrationStep>
                  <OrchestrationStep Order="2" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />
                </OrchestrationSteps></UserJourney></UserJourneys>
                <RelyingParty><DefaultUserJourney ReferenceId="Context" />
                  <TechnicalProfile Id="PolicyProfile"><Protocol Name="OpenIdConnect" />
                    <OutputClaims>
                      <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" DefaultValue="someone" />
                      <OutputClaim ClaimTypeReferenceId="IP-Address" PartnerClaimType="ip" /><OutputClaim ClaimTypeReferenceId="CorrelationId" />
                      <OutputClaim ClaimTypeReferenceId="DateTimeInUtc" PartnerClaimType="at" /><OutputClaim ClaimTypeReferenceId="Build" />
                      <OutputClaim ClaimTypeReferenceId="hashed" />
                    </OutputClaims>
                    <SubjectNamingInfo ClaimType="sub" />
                  </TechnicalProfile>
                </RelyingParty>
                </TrustFrameworkPolicy>
                """.utf8)
            try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id, secrets: ["B2C_1A_HashSecret": "hash-pepper"])
            let attempt = try await CustomPolicyRunTests.uploadForIDToken(h, policy, id: "B2C_1A_test_context")
            let answered = try await driver.start(attempt, harness: h)
            let claims = DecodedJWT(try #require(answered.redirectParameters["id_token"], "\(answered.status) \(answered.redirectParameters)")).claims
            #expect((claims["ip"] as? String)?.isEmpty == false, "\(claims)")
            #expect(UUID(uuidString: claims["CorrelationId"] as? String ?? "") != nil, "\(claims)")
            #expect(claims["Build"] as? String == "1.0.0.0")
            // `Hash` in a journey: its randomizerSecret key set's secret, read for it.
            let correlation = claims["CorrelationId"] as? String ?? ""
            let expected = Data(SHA256.hash(data: Data(("1.0.0.0" + correlation + "hash-pepper").utf8))).base64EncodedString()
            #expect(claims["hashed"] as? String == expected, "\(claims)")
            let at = try #require(claims["at"] as? String)
            // B2C's dateTime text: seven digits of the second (`2026-12-02T13:27:07.0403047Z`).
            let parsed = try #require(ISO8601DateFormatter().date(from: String(at.prefix(19)) + "Z"), "\(at)")
            #expect(abs(parsed.timeIntervalSince(h.clock.now)) < 5, "the sign-in's time: \(at)")
        }
    }
}

/// The starter-pack repository's `password-change` scenario, in its shape on this project's base:
/// sign in, then a page asks for the old password and a new one; the password check names the
/// old one by an input claim of its own over the base's `password`.
@Suite("custom policy password change")
struct CustomPolicyPasswordChangeTests {
    static func policy(tenant: String) -> Data {
        Data(
            """
            <TrustFrameworkPolicy xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicySchemaVersion="0.3.0.0"
              TenantId="\(tenant)" PolicyId="B2C_1A_test_change" PublicPolicyUri="http://\(tenant)/B2C_1A_test_change">
            <BasePolicy><TenantId>\(tenant)</TenantId><PolicyId>B2C_1A_LocalBase</PolicyId></BasePolicy>
            <BuildingBlocks><ClaimsSchema>
              <ClaimType Id="oldPassword"><DisplayName>Old password</DisplayName><DataType>string</DataType><UserInputType>Password</UserInputType></ClaimType>
            </ClaimsSchema></BuildingBlocks>
            <ClaimsProviders><ClaimsProvider><DisplayName>Password change</DisplayName><TechnicalProfiles>
              <TechnicalProfile Id="Password-Check-Old">
                <InputClaims><InputClaim ClaimTypeReferenceId="oldPassword" PartnerClaimType="password" Required="true" /></InputClaims>
                <IncludeTechnicalProfile ReferenceId="Password-Check" />
              </TechnicalProfile>
              <TechnicalProfile Id="Form-ChangePassword">
                <DisplayName>Change password</DisplayName>
                <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine" />
                <Metadata><Item Key="ContentDefinitionReferenceId">form</Item></Metadata>
                <InputClaims><InputClaim ClaimTypeReferenceId="objectId" /></InputClaims>
                <OutputClaims>
                  <OutputClaim ClaimTypeReferenceId="oldPassword" Required="true" />
                  <OutputClaim ClaimTypeReferenceId="newPassword" Required="true" />
                  <OutputClaim ClaimTypeReferenceId="reenterPassword" Required="true" />
                </OutputClaims>
                <ValidationTechnicalProfiles>
                  <ValidationTechnicalProfile ReferenceId="Password-Check-Old" />
                  <ValidationTechnicalProfile ReferenceId="Directory-WritePassword" />
                </ValidationTechnicalProfiles>
              </TechnicalProfile>
            </TechnicalProfiles></ClaimsProvider></ClaimsProviders>
            <UserJourneys><UserJourney Id="PasswordChange"><OrchestrationSteps>
              <OrchestrationStep Order="1" Type="CombinedSignInAndSignUp" ContentDefinitionReferenceId="unified">
                <ClaimsProviderSelections><ClaimsProviderSelection ValidationClaimsExchangeId="SignInExchange" /></ClaimsProviderSelections>
                <ClaimsExchanges><ClaimsExchange Id="SignInExchange" TechnicalProfileReferenceId="Form-SignIn" /></ClaimsExchanges>
              </OrchestrationStep>
              <OrchestrationStep Order="2" Type="ClaimsExchange">
                <ClaimsExchanges><ClaimsExchange Id="ChangeExchange" TechnicalProfileReferenceId="Form-ChangePassword" /></ClaimsExchanges>
              </OrchestrationStep>
              <OrchestrationStep Order="3" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />
            </OrchestrationSteps></UserJourney></UserJourneys>
            <RelyingParty><DefaultUserJourney ReferenceId="PasswordChange" />
              <TechnicalProfile Id="PolicyProfile"><Protocol Name="OpenIdConnect" />
                <OutputClaims><OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" /></OutputClaims>
                <SubjectNamingInfo ClaimType="sub" />
              </TechnicalProfile>
            </RelyingParty>
            </TrustFrameworkPolicy>
            """.utf8)
    }

    @Test("the old password is checked by its own input claim over the base's; a wrong one changes nothing; then the new one signs in", arguments: TestDatabase.engines)
    func changePassword(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await CustomPolicyRunTests.upload(h)
            try await h.server.administration.uploadCustomPolicies([Self.policy(tenant: h.tenant.name)], tenant: h.tenant)
            let user = try await h.addUser("hank@example.com", name: "Hank")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_change")
            let signIn = try await driver.start(attempt, harness: h)
            let page = try await driver.submit(signIn, [("signInName", "hank@example.com"), ("password", "Passw0rd!")])
            #expect(page.status == .ok && page.text.contains(#"id="oldPassword""#), "\(page.status) \(page.text.prefix(400))")
            let wrong = try await driver.submit(
                page, [("oldPassword", "not-the-Passw0rd"), ("newPassword", "Changed-Passw0rd"), ("reenterPassword", "Changed-Passw0rd")])
            #expect(wrong.status == .badRequest && wrong.text.contains("Your password is incorrect."), "\(wrong.status)")
            let changed = try await driver.submit(
                wrong, [("oldPassword", "Passw0rd!"), ("newPassword", "Changed-Passw0rd"), ("reenterPassword", "Changed-Passw0rd")])
            let code = try #require(changed.redirectParameters["code"], "\(changed.status) \(changed.text.prefix(400))")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims["sub"] as? String == user.objectID)

            driver.cookies = [:]
            let again = try await driver.start(AuthorizationAttempt(harness: h, policy: CustomPolicyRunTests.policy), harness: h)
            let old = try await driver.submit(again, [("signInName", "hank@example.com"), ("password", "Passw0rd!")])
            #expect(old.status == .badRequest, "the old password no longer works")
            let new = try await driver.submit(old, [("signInName", "hank@example.com"), ("password", "Changed-Passw0rd")])
            #expect(new.redirectParameters["code"] != nil, "\(new.status)")
        }
    }
}

/// `RadioSingleSelect` and `CheckboxMultiSelect` as B2C renders them: one input per item, named by
/// the claim, its id `{claim}_{value}`; a multi-select's ticked items are a string collection.
@Suite("custom policy choice inputs")
struct CustomPolicyChoiceInputTests {
    @Test("radio buttons and checkboxes by B2C's ids; the ticked items reach the token; an item the page did not offer is refused")
    func choices() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let policy = PolicyFixtures.onLocalBase(
                id: "B2C_1A_test_choices", tenant: h.tenant.name,
                claimTypes: """
                    <ClaimType Id="color"><DisplayName>Color</DisplayName><DataType>string</DataType><UserInputType>RadioSingleSelect</UserInputType>
                      <Restriction><Enumeration Text="Red" Value="red" /><Enumeration Text="Blue" Value="blue" /></Restriction></ClaimType>
                    <ClaimType Id="toppings"><DisplayName>Toppings</DisplayName><DataType>stringCollection</DataType><UserInputType>CheckboxMultiSelect</UserInputType>
                      <Restriction><Enumeration Text="Apple" Value="a" /><Enumeration Text="Banana" Value="b" /><Enumeration Text="Cherry" Value="c" /></Restriction></ClaimType>
                    """,
                page: (
                    "Choices",
                    """
                    <DisplayClaims><DisplayClaim ClaimTypeReferenceId="color" Required="true" /><DisplayClaim ClaimTypeReferenceId="toppings" /></DisplayClaims>
                    <OutputClaims><OutputClaim ClaimTypeReferenceId="color" /><OutputClaim ClaimTypeReferenceId="toppings" /></OutputClaims>
                    """),
                signsIn: false,
                relyingPartyClaims: """
                    <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" DefaultValue="chooser" />
                    <OutputClaim ClaimTypeReferenceId="color" /><OutputClaim ClaimTypeReferenceId="toppings" />
                    """)
            let attempt = try await CustomPolicyRunTests.uploadForIDToken(h, policy, id: "B2C_1A_test_choices")
            let page = try await driver.start(attempt, harness: h)
            #expect(page.text.contains(#"<input type="radio" id="color_blue" name="color" value="blue""#), "\(page.text)")
            #expect(page.text.contains(#"<input type="checkbox" id="toppings_c" name="toppings" value="c""#), "\(page.text)")
            let offside = try await driver.submit(page, [("color", "green"), ("toppings", "a")])
            #expect(offside.status == .badRequest && offside.text.contains("Please choose a value for Color"), "\(offside.status)")
            let unknown = try await driver.submit(offside, [("color", "blue"), ("toppings", "a"), ("toppings", "z")])
            #expect(unknown.status == .badRequest && unknown.text.contains("Please choose a value for Toppings"), "\(unknown.status)")
            let done = try await driver.submit(unknown, [("color", "blue"), ("toppings", "a"), ("toppings", "c"), ("toppings", "a")])
            let claims = DecodedJWT(try #require(done.redirectParameters["id_token"], "\(done.status) \(done.text.prefix(300))")).claims
            #expect(claims["color"] as? String == "blue" && claims["toppings"] as? [String] == ["a", "c"], "\(claims)")
        }
    }
}

@Suite("custom policy page defaults and resolvers")
struct CustomPolicyPageDefaultTests {
    static func policy(_ h: IdentityHarness, allowNull: Bool) -> Data {
        PolicyFixtures.onLocalBase(
            id: "B2C_1A_test_defaults", tenant: h.tenant.name,
            claimTypes: """
                <ClaimType Id="color"><DisplayName>Color</DisplayName><DataType>string</DataType><UserInputType>RadioSingleSelect</UserInputType>
                  <Restriction><Enumeration Text="Red" Value="red" /><Enumeration Text="Blue" Value="blue" SelectByDefault="true" /></Restriction></ClaimType>
                <ClaimType Id="toppings"><DisplayName>Toppings</DisplayName><DataType>stringCollection</DataType><UserInputType>CheckboxMultiSelect</UserInputType>
                  <Restriction><Enumeration Text="Apple" Value="a" /><Enumeration Text="Banana" Value="b" SelectByDefault="true" /><Enumeration Text="Cherry" Value="c" SelectByDefault="true" /></Restriction></ClaimType>
                <ClaimType Id="city"><DisplayName>City</DisplayName><DataType>string</DataType><UserInputType>DropdownSingleSelect</UserInputType>
                  <Restriction><Enumeration Text="Berlin" Value="berlin" /><Enumeration Text="Oslo" Value="oslo" SelectByDefault="true" /></Restriction></ClaimType>
                <ClaimType Id="langs"><DisplayName>Languages</DisplayName><DataType>string</DataType><UserInputType>CheckboxMultiSelect</UserInputType>
                  <Restriction><Enumeration Text="English" Value="en" SelectByDefault="true" /><Enumeration Text="French" Value="fr" /></Restriction></ClaimType>
                <ClaimType Id="nick"><DisplayName>Nickname</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType></ClaimType>
                <ClaimType Id="nickExists"><DisplayName>Nickname given</DisplayName><DataType>boolean</DataType></ClaimType>
                <ClaimType Id="lcid"><DisplayName>LCID</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="now"><DisplayName>Now</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="acrValues"><DisplayName>ACR</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="resource"><DisplayName>Resource</DisplayName><DataType>string</DataType></ClaimType>
                """,
            transformations: """
                <ClaimsTransformation Id="NickExists" TransformationMethod="DoesClaimExist">
                  <InputClaims><InputClaim ClaimTypeReferenceId="nick" TransformationClaimType="inputClaim" /></InputClaims>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="nickExists" TransformationClaimType="outputClaim" /></OutputClaims>
                </ClaimsTransformation>
                """,
            page: (
                "Defaults",
                """
                <InputClaims><InputClaim ClaimTypeReferenceId="nick" DefaultValue="prefilled" /></InputClaims>
                <OutputClaims><OutputClaim ClaimTypeReferenceId="color" /><OutputClaim ClaimTypeReferenceId="toppings" />
                  <OutputClaim ClaimTypeReferenceId="city" /><OutputClaim ClaimTypeReferenceId="langs" /><OutputClaim ClaimTypeReferenceId="nick" /></OutputClaims>
                <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="NickExists" /></OutputClaimsTransformations>
                """),
            signsIn: false,
            relyingPartyClaims: """
                <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" DefaultValue="defaults" />
                <OutputClaim ClaimTypeReferenceId="color" /><OutputClaim ClaimTypeReferenceId="toppings" /><OutputClaim ClaimTypeReferenceId="city" />
                <OutputClaim ClaimTypeReferenceId="langs" /><OutputClaim ClaimTypeReferenceId="nick" /><OutputClaim ClaimTypeReferenceId="nickExists" />
                <OutputClaim ClaimTypeReferenceId="lcid" DefaultValue="{Culture:LCID}" AlwaysUseDefaultValue="true" />
                <OutputClaim ClaimTypeReferenceId="now" DefaultValue="{Context:DateTimeInUtc}" AlwaysUseDefaultValue="true" />
                <OutputClaim ClaimTypeReferenceId="acrValues" DefaultValue="{OIDC:AuthenticationContextReferences}" AlwaysUseDefaultValue="true" />
                <OutputClaim ClaimTypeReferenceId="resource" DefaultValue="{OIDC:Resource}" AlwaysUseDefaultValue="true" />
                """,
            pageMetadata: allowNull ? #"<Item Key="AllowGenerationOfClaimsWithNullValues">true</Item>"# : "")
    }

    @Test(
        "SelectByDefault selects a radio, checkboxes and a dropdown's item while the claim has none; a field left empty keeps its prefilled value unless AllowGenerationOfClaimsWithNullValues makes it an empty claim, which exists",
        arguments: [false, true])
    func defaults(allowNull: Bool) async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            var attempt = try await CustomPolicyRunTests.uploadForIDToken(h, Self.policy(h, allowNull: allowNull), id: "B2C_1A_test_defaults")
            attempt.extra = [("acr_values", "gold"), ("resource", "https://api.example.com")]
            let page = try await driver.start(attempt, harness: h)
            #expect(page.text.contains(#"id="color_blue" name="color" value="blue" checked"#), "\(page.text)")
            #expect(!page.text.contains(#"id="color_red" name="color" value="red" checked"#))
            #expect(page.text.contains(#"id="toppings_b" name="toppings" value="b" checked"#) && page.text.contains(#"id="toppings_c" name="toppings" value="c" checked"#))
            #expect(!page.text.contains(#"id="toppings_a" name="toppings" value="a" checked"#))
            #expect(page.text.contains(#"<option value="oslo" selected>"#) && !page.text.contains(#"<option value="berlin" selected>"#))
            #expect(page.text.contains(#"value="prefilled""#))
            // The person clears the prefilled nickname and keeps the rest.
            #expect(page.text.contains(#"id="langs_en" name="langs" value="en" checked"#))
            let done = try await driver.submit(page, [("color", "blue"), ("toppings", "b"), ("city", "oslo"), ("langs", "en"), ("langs", "fr"), ("nick", "")])
            let claims = DecodedJWT(try #require(done.redirectParameters["id_token"], "\(done.status) \(done.text.prefix(300))")).claims
            #expect(claims["color"] as? String == "blue" && claims["city"] as? String == "oslo" && claims["toppings"] as? [String] == ["b"], "\(claims)")
            #expect(claims["langs"] as? String == "en,fr", "a string claim's ticked items, comma-separated: \(claims)")
            if allowNull {
                #expect(claims["nick"] == nil, "an empty claim is not issued")
                #expect(claims["nickExists"] as? Bool == true, "but it exists: \(claims)")
            } else {
                #expect(claims["nick"] as? String == "prefilled", "no claim generated: the bag keeps the prefilled value: \(claims)")
                #expect(claims["nickExists"] as? Bool == true)
            }
            // The resolvers: the LCID of the default language (neutral `en`), .NET's en-US date
            // text, acr_values and resource.
            #expect(claims["lcid"] as? String == "9", "\(claims)")
            let now = try #require(claims["now"] as? String)
            #expect(now.range(of: #"^\d{1,2}/\d{1,2}/\d{4} \d{1,2}:\d{2}:\d{2} (AM|PM)$"#, options: .regularExpression) != nil, "\(now)")
            #expect(claims["acrValues"] as? String == "gold" && claims["resource"] as? String == "https://api.example.com", "\(claims)")
        }
    }

    @Test("the resolvers' texts: {Context:DateTimeInUtc} as .NET writes a UTC time in en-US; {Culture:LCID} of specific, neutral and unknown tags")
    func resolverTexts() {
        #expect(PolicyClaimResolver.resolverDate(Date(timeIntervalSince1970: 1_633_867_200)) == "10/10/2021 12:00:00 PM")
        #expect(PolicyClaimResolver.resolverDate(Date(timeIntervalSince1970: 1_633_824_005)) == "10/10/2021 12:00:05 AM")
        #expect(PolicyClaimResolver.lcid("en-US") == 1033 && PolicyClaimResolver.lcid("EN-gb") == 2057)
        #expect(PolicyClaimResolver.lcid("en") == 9 && PolicyClaimResolver.lcid("es") == 10)
        #expect(PolicyClaimResolver.lcid("xx-YY") == nil && PolicyClaimResolver.lcid("en-ZZ") == nil)
    }
}
