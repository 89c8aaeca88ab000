import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
import WireCoding
@testable import TrustFramework

@testable import IdentityServer
@testable import UserJourneys

/// The policies and the sign-in ``CustomPolicyFederationTests`` run: this project's local-accounts
/// policies with an identity provider added, in B2C's schema.
extension CustomPolicyFederationTests {
    /// The local-accounts policies with a provider button, the provider's profile and the
    /// directory profiles by `alternativeSecurityId` (B2C's social journey, in this project's words).
    static func upload(
        _ h: IdentityHarness, port: Int = 1, metadata: String? = nil, clientID: String = "local-client", secret: String = "loopback-secret",
        extraMetadata: String = "", facebook: Bool = false, oauth2: Bool = false, oauth2Endpoints: [String]? = nil, issuerUserIdClaim: String = "id",
        scope: String = "read:user", selectionPage: Bool = false, responseTypes: String? = "code"
    ) async throws {
        let endpoints = oauth2Endpoints ?? ["authorize", "token", "me"].map { "http://127.0.0.1:\(port)/oauth2/\($0)" }
        let metadata = metadata ?? "http://127.0.0.1:\(port)/.well-known/openid-configuration"
        let oauth2Profile = """
                <TechnicalProfile Id="Loopback-OIDC">
                  <DisplayName>Loopback OAuth2</DisplayName>
                  <Protocol Name="OAuth2" />
                  <Metadata>
                    <Item Key="ProviderName">loopback.example</Item>
                    <Item Key="authorization_endpoint">\(endpoints[0])</Item>
                    <Item Key="AccessTokenEndpoint">\(endpoints[1])</Item>
                    <Item Key="ClaimsEndpoint">\(endpoints[2])</Item>
                    <Item Key="client_id">\(clientID)</Item>
                    <Item Key="scope">\(scope)</Item>\(extraMetadata)
                  </Metadata>
                  <CryptographicKeys><Key Id="client_secret" StorageReferenceId="B2C_1A_LoopbackSecret" /></CryptographicKeys>
                  <OutputClaims>
                    <OutputClaim ClaimTypeReferenceId="issuerUserId" PartnerClaimType="\(issuerUserIdClaim)" />
                    <OutputClaim ClaimTypeReferenceId="identityProvider" DefaultValue="loopback.example" AlwaysUseDefaultValue="true" />
                    <OutputClaim ClaimTypeReferenceId="displayName" PartnerClaimType="name" />
                  </OutputClaims>
                  <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="MakeAlternativeSecurityId" /></OutputClaimsTransformations>
                </TechnicalProfile>
            """
        let oidcProfile = """
                <TechnicalProfile Id="Loopback-OIDC">
                  <DisplayName>Loopback IdP</DisplayName>
                  <Protocol Name="OpenIdConnect" />
                  <Metadata>
                    <Item Key="METADATA">\(metadata)</Item>
                    <Item Key="client_id">\(clientID)</Item>
                    \(responseTypes.map { "<Item Key=\"response_types\">\($0)</Item>" } ?? "")
                    <Item Key="scope">openid</Item>\(extraMetadata)
                  </Metadata>
                  <CryptographicKeys><Key Id="client_secret" StorageReferenceId="B2C_1A_LoopbackSecret" /></CryptographicKeys>
                  <OutputClaims>
                    <OutputClaim ClaimTypeReferenceId="issuerUserId" PartnerClaimType="sub" />
                    <OutputClaim ClaimTypeReferenceId="identityProvider" PartnerClaimType="iss" />
                    <OutputClaim ClaimTypeReferenceId="displayName" DefaultValue="Loopback Person" />
                  </OutputClaims>
                  <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="MakeAlternativeSecurityId" /></OutputClaimsTransformations>
                </TechnicalProfile>
            """
        var files = try PolicyFixtures.localAccounts()
        var base = String(decoding: files[0], as: UTF8.self)
        base = base.replacingOccurrences(
            of: #"<ClaimType Id="greeting">"#,
            with: """
                <ClaimType Id="issuerUserId"><DisplayName>User id at the provider</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="identityProvider"><DisplayName>Provider</DisplayName><DataType>string</DataType></ClaimType>
                <ClaimType Id="alternativeSecurityId"><DisplayName>Provider identity</DisplayName><DataType>alternativeSecurityId</DataType></ClaimType>
                <ClaimType Id="greeting">
                """)
        base = base.replacingOccurrences(
            of: #"<ClaimsTransformation Id="Greet""#,
            with: """
                <ClaimsTransformation Id="MakeAlternativeSecurityId" TransformationMethod="CreateAlternativeSecurityId">
                  <InputClaims>
                    <InputClaim ClaimTypeReferenceId="issuerUserId" TransformationClaimType="key" />
                    <InputClaim ClaimTypeReferenceId="identityProvider" TransformationClaimType="identityProvider" />
                  </InputClaims>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="alternativeSecurityId" TransformationClaimType="alternativeSecurityId" /></OutputClaims>
                </ClaimsTransformation>
                <ClaimsTransformation Id="Greet"
                """)
        base = base.replacingOccurrences(
            of: #"<TechnicalProfile Id="Issuer">"#,
            with: """
                    </TechnicalProfiles>
                  </ClaimsProvider>
                  <ClaimsProvider>
                    <Domain>\(facebook ? "facebook.com" : "loopback.example")</Domain>
                    <DisplayName>Provider</DisplayName>
                    <TechnicalProfiles>
                \(facebook ? Self.facebookProfile : oauth2 ? oauth2Profile : oidcProfile)
                    </TechnicalProfiles>
                  </ClaimsProvider>
                  <ClaimsProvider>
                    <DisplayName>Provider accounts</DisplayName>
                    <TechnicalProfiles>
                <TechnicalProfile Id="Directory-ReadBySecurityId">
                  <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.AzureActiveDirectoryProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                  <Metadata>
                    <Item Key="Operation">Read</Item>
                    <Item Key="RaiseErrorIfClaimsPrincipalDoesNotExist">false</Item>
                  </Metadata>
                  <InputClaims><InputClaim ClaimTypeReferenceId="alternativeSecurityId" PartnerClaimType="alternativeSecurityId" Required="true" /></InputClaims>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="objectId" /></OutputClaims>
                </TechnicalProfile>
                <TechnicalProfile Id="Directory-WriteBySecurityId">
                  <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.AzureActiveDirectoryProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                  <Metadata>
                    <Item Key="Operation">Write</Item>
                    <Item Key="RaiseErrorIfClaimsPrincipalAlreadyExists">true</Item>
                  </Metadata>
                  <InputClaims><InputClaim ClaimTypeReferenceId="alternativeSecurityId" PartnerClaimType="alternativeSecurityId" Required="true" /></InputClaims>
                  <PersistedClaims>
                    <PersistedClaim ClaimTypeReferenceId="alternativeSecurityId" />
                    <PersistedClaim ClaimTypeReferenceId="displayName" />
                  </PersistedClaims>
                  <OutputClaims>
                    <OutputClaim ClaimTypeReferenceId="objectId" />
                    <OutputClaim ClaimTypeReferenceId="newUser" PartnerClaimType="newClaimsPrincipalCreated" />
                  </OutputClaims>
                </TechnicalProfile>
                <TechnicalProfile Id="Issuer">
                """)
        // The journey: the unified page with the provider's button, the provider, then the
        // account by the provider identity (read, else written).
        base = base.replacingOccurrences(
            of: #"<ClaimsProviderSelections><ClaimsProviderSelection ValidationClaimsExchangeId="SignInExchange" /></ClaimsProviderSelections>"#,
            with: #"<ClaimsProviderSelections><ClaimsProviderSelection TargetClaimsExchangeId="LoopbackExchange" /><ClaimsProviderSelection ValidationClaimsExchangeId="SignInExchange" /></ClaimsProviderSelections>"#
        )
        base = base.replacingOccurrences(
            of: #"<ClaimsExchanges><ClaimsExchange Id="SignUpExchange" TechnicalProfileReferenceId="Form-SignUp" /></ClaimsExchanges>"#,
            with: #"<ClaimsExchanges><ClaimsExchange Id="LoopbackExchange" TechnicalProfileReferenceId="Loopback-OIDC" /><ClaimsExchange Id="SignUpExchange" TechnicalProfileReferenceId="Form-SignUp" /></ClaimsExchanges>"#
        )
        base = base.replacingOccurrences(
            of: #"<ClaimsExchanges><ClaimsExchange Id="ReadExchange" TechnicalProfileReferenceId="Directory-Read" /></ClaimsExchanges>"#,
            with: """
                <ClaimsExchanges><ClaimsExchange Id="SocialReadExchange" TechnicalProfileReferenceId="Directory-ReadBySecurityId" /></ClaimsExchanges>
                </OrchestrationStep>
                <OrchestrationStep Order="4" Type="ClaimsExchange">
                  <Preconditions>
                    <Precondition Type="ClaimsExist" ExecuteActionsIf="true"><Value>objectId</Value><Action>SkipThisOrchestrationStep</Action></Precondition>
                  </Preconditions>
                  <ClaimsExchanges><ClaimsExchange Id="SocialWriteExchange" TechnicalProfileReferenceId="Directory-WriteBySecurityId" /></ClaimsExchanges>
                </OrchestrationStep>
                <OrchestrationStep Order="5" Type="ClaimsExchange">
                  <ClaimsExchanges><ClaimsExchange Id="ReadExchange" TechnicalProfileReferenceId="Directory-Read" /></ClaimsExchanges>
                """)
        base = base.replacingOccurrences(
            of: #"<OrchestrationStep Order="4" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />"#,
            with: #"<OrchestrationStep Order="6" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />"#)
        if selectionPage {
            // B2C's identity provider selection step instead of the combined page: buttons only,
            // one for the provider and one for the local sign-up page.
            let start = try #require(base.range(of: #"<OrchestrationStep Order="1" Type="CombinedSignInAndSignUp""#))
            let end = try #require(base.range(of: "</OrchestrationStep>", range: start.upperBound..<base.endIndex))
            base.replaceSubrange(
                start.lowerBound..<end.upperBound,
                with: """
                    <OrchestrationStep Order="1" Type="ClaimsProviderSelection" ContentDefinitionReferenceId="unified">
                      <ClaimsProviderSelections>
                        <ClaimsProviderSelection TargetClaimsExchangeId="LoopbackExchange" />
                        <ClaimsProviderSelection TargetClaimsExchangeId="SignUpExchange" />
                      </ClaimsProviderSelections>
                    </OrchestrationStep>
                    """)
        }
        files[0] = Data(base.utf8)
        try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id, secrets: ["B2C_1A_LoopbackSecret": secret])
        try await h.server.administration.uploadCustomPolicies(files, tenant: h.tenant)
    }

    /// Facebook's OAuth2 profile as B2C's policies write it (Graph's field names), under the
    /// provider exchange's profile id.
    static let facebookProfile = """
        <TechnicalProfile Id="Loopback-OIDC">
          <DisplayName>Facebook</DisplayName>
          <Protocol Name="OAuth2" />
          <Metadata>
            <Item Key="ProviderName">facebook</Item>
            <Item Key="authorization_endpoint">https://www.facebook.com/dialog/oauth</Item>
            <Item Key="AccessTokenEndpoint">https://graph.facebook.com/oauth/access_token</Item>
          </Metadata>
          <OutputClaims>
            <OutputClaim ClaimTypeReferenceId="issuerUserId" PartnerClaimType="id" />
            <OutputClaim ClaimTypeReferenceId="displayName" PartnerClaimType="name" />
            <OutputClaim ClaimTypeReferenceId="identityProvider" DefaultValue="facebook.com" AlwaysUseDefaultValue="true" />
          </OutputClaims>
          <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="MakeAlternativeSecurityId" /></OutputClaimsTransformations>
        </TechnicalProfile>
        """

    /// The loopback provider of ``UpstreamProviderTests`` and a harness with the policies naming it.
    static func withLoopbackProvider(_ body: @escaping @Sendable (IdentityHarness, Driver, UpstreamProviderTests.Script, Int) async throws -> Void)
        async throws
    {
        let script = UpstreamProviderTests.Script()
        let box = UpstreamProviderTests.PortBox()
        try await UpstreamProviderTests.provider(script, port: { box.value }).test(.live) { idp in
            box.value = try #require(idp.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: box.value)
                try await body(h, driver, script, box.value)
            }
        }
    }

    /// A client of oidc-provider-mock whose redirect URI is the policy profile's callback, and a
    /// user there: the client id and secret, and the user's subject.
    static func mockClient(_ h: IdentityHarness, mock: String, user: String, name: String) async throws -> (id: String, secret: String, subject: String) {
        let registration = try await UpstreamProviderTests.send(
            "POST", "\(mock)/oauth2/clients",
            json: #"{"redirect_uris":["\#(UpstreamProviderTests.callback(h, provider: "loopback-oidc"))"],"token_endpoint_auth_method":"client_secret_post"}"#)
        let client = try JSONDecoder().decode([String: JSONValue].self, from: registration.body)
        let subject = "\(user)-\(UUID().uuidString.prefix(8).lowercased())"
        _ = try await UpstreamProviderTests.send("PUT", "\(mock)/users/\(subject)", json: #"{"name":"\#(name)","email":"\#(user)@example.com"}"#)
        return (try #require(client["client_id"]?.stringValue), try #require(client["client_secret"]?.stringValue), subject)
    }

    /// One sign-in through oidc-provider-mock as `subject` (its authorize form answered); the
    /// ID token's claims this service issued.
    static func mockSignIn(_ h: IdentityHarness, _ driver: Driver, mock: String, subject: String) async throws -> [String: Any] {
        driver.cookies = [:]
        let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
        let unified = try await driver.start(attempt, harness: h)
        let toProvider = try await driver.submit(unified, [("action", "provider"), ("exchange", "LoopbackExchange")])
        let authorize = try #require(toProvider.location, "\(toProvider.status) \(toProvider.text.prefix(300))")
        #expect(authorize.hasPrefix("\(mock)/oauth2/authorize?"))
        let answer = try await UpstreamProviderTests.send("POST", authorize, form: "sub=\(subject)")
        let back = try #require(answer.location, "\(authorize) -> \(String(decoding: answer.body, as: UTF8.self))")
        let done = try await driver.follow(try await driver.get(back))
        let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.location ?? done.text.prefix(300).description)")
        return DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)).claims
    }

    /// One sign-in through the provider: the authorize request, the button, the provider's
    /// redirect back. Returns the last response and the state the provider was given.
    static func signIn(_ h: IdentityHarness, _ driver: Driver, script: UpstreamProviderTests.Script, flavour: String = "good") async throws
        -> (response: TestResponse, state: String, attempt: AuthorizationAttempt)
    {
        driver.cookies = [:]
        let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
        let unified = try await driver.follow(try await driver.start(attempt, harness: h))
        #expect(unified.text.contains(#"id="LoopbackExchange""#), "\(unified.status) \(unified.text.prefix(400))")
        let toProvider = try await driver.submit(unified, [("action", "provider"), ("exchange", "LoopbackExchange")])
        let authorize = try #require(toProvider.location.flatMap(URLComponents.init(string:)), "\(toProvider.status) \(toProvider.text.prefix(300))")
        let items = authorize.queryItems ?? []
        #expect(items.first { $0.name == "client_id" }?.value == "local-client")
        let state = try #require(items.first { $0.name == "state" }?.value)
        await script.set(flavour, nonce: try #require(items.first { $0.name == "nonce" }?.value))
        let back = try await driver.follow(
            try await driver.get("/\(h.tenant.name)/oauth2/authresp/Loopback-OIDC?" + Form.encode([("code", "c-\(flavour)"), ("state", state)])))
        return (back, state, attempt)
    }
}
