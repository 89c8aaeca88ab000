import Foundation
@testable import IdentityDirectory
@testable import TrustFramework
@testable import UserJourneys

/// Custom policies written for these tests in the IEF schema: a base, an extension that changes
/// it, and a relying party, each small enough to read, together using every element the checks
/// and the merge know. `tenant` is the dev tenant unless a test wants another.
enum PolicyFixtures {
    static let tenant = "todob2c.onmicrosoft.com"
    /// The key set the base's JWT issuer signs with (`issuer_secret`).
    static let signingKeySet = "B2C_1A_TokenSigningKeyContainer"

    /// The policy key sets a tenant needs before these policies upload (B2C refuses a policy
    /// naming a key set that is not there): the signing container with a generated RSA key, and
    /// `secrets` (key set id → value) for the profiles that name one. Returns the signing key.
    /// A set the tenant has already is left as it is.
    /// The tenant's keys (``makeKeys(_:tenantID:secrets:)``), then `files` uploaded together.
    static func upload(_ files: [Data], to h: IdentityHarness) async throws {
        try await makeKeys(h.server.administration, tenantID: h.tenant.id)
        try await h.server.administration.uploadCustomPolicies(files, tenant: h.tenant)
    }

    @discardableResult
    static func makeKeys(_ administration: IdentityAdministration, tenantID: UUID, secrets: [String: String] = [:]) async throws -> PolicyKey {
        let existing = try await administration.policyKeySets(tenantID: tenantID)
        for (id, value) in secrets.sorted(by: { $0.key < $1.key }) where !existing.contains(where: { $0.id == id }) {
            let set = try await administration.createPolicyKeySet(tenantID: tenantID, id: id)
            _ = try await administration.uploadPolicySecret(tenantID: tenantID, keySet: set.id, use: "sig", value: value)
        }
        if let known = existing.first(where: { $0.id == signingKeySet })?.keys.last { return known }
        _ = try await administration.createPolicyKeySet(tenantID: tenantID, id: signingKeySet)
        return try await administration.generatePolicyKey(tenantID: tenantID, keySet: signingKeySet, use: "sig")
    }

    static func policy(
        _ id: String, base: String? = nil, tenant: String = tenant, body: String, extraRootAttributes: String = ""
    ) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <TrustFrameworkPolicy xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
          xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicySchemaVersion="0.3.0.0"
          TenantId="\(tenant)" PolicyId="\(id)" PublicPolicyUri="http://\(tenant)/\(id)"\(extraRootAttributes)>
        \(base.map { "  <BasePolicy><TenantId>\(tenant)</TenantId><PolicyId>\($0)</PolicyId></BasePolicy>" } ?? "")
        \(body)
        </TrustFrameworkPolicy>
        """
    }

    /// The base: claims, a transformation, content definitions, four technical profiles and a journey.
    static func base(id: String = "B2C_1A_TestBase", claimsProviderExtra: String = "", stepExtra: String = "") -> String {
        policy(
            id,
            body: """
                  <BuildingBlocks>
                    <ClaimsSchema>
                      <ClaimType Id="objectId"><DisplayName>Object id</DisplayName><DataType>string</DataType></ClaimType>
                      <ClaimType Id="email"><DisplayName>Email</DisplayName><DataType>string</DataType>
                        <UserInputType>TextBox</UserInputType>
                        <Restriction><Pattern RegularExpression="^[^@]+@[^@]+$" HelpText="An email address." /></Restriction>
                      </ClaimType>
                      <ClaimType Id="password"><DisplayName>Password</DisplayName><DataType>string</DataType>
                        <UserInputType>Password</UserInputType></ClaimType>
                      <ClaimType Id="displayName"><DisplayName>Display name</DisplayName><DataType>string</DataType></ClaimType>
                      <ClaimType Id="newUser"><DisplayName>New</DisplayName><DataType>boolean</DataType></ClaimType>
                      <ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType>
                    </ClaimsSchema>
                    <ClaimsTransformations>
                      <ClaimsTransformation Id="MakeGreeting" TransformationMethod="FormatStringClaim">
                        <InputClaims><InputClaim ClaimTypeReferenceId="displayName" TransformationClaimType="inputClaim" /></InputClaims>
                        <InputParameters><InputParameter Id="stringFormat" DataType="string" Value="Hello {0}" /></InputParameters>
                        <OutputClaims><OutputClaim ClaimTypeReferenceId="greeting" TransformationClaimType="outputClaim" /></OutputClaims>
                      </ClaimsTransformation>
                    </ClaimsTransformations>
                    <ContentDefinitions>
                      <ContentDefinition Id="page.signin"><LoadUri>~/tenant/templates/signin.cshtml</LoadUri>
                        <DataUri>urn:com:microsoft:aad:b2c:elements:contract:unifiedssp:2.1.5</DataUri></ContentDefinition>
                      <ContentDefinition Id="page.form"><LoadUri>~/tenant/templates/form.cshtml</LoadUri>
                        <DataUri>urn:com:microsoft:aad:b2c:elements:contract:selfasserted:2.1.7</DataUri></ContentDefinition>
                    </ContentDefinitions>
                  </BuildingBlocks>
                  <ClaimsProviders>
                    <ClaimsProvider>
                      <DisplayName>Local accounts</DisplayName>
                      <TechnicalProfiles>
                        <TechnicalProfile Id="Form-SignUp">
                          <DisplayName>Sign up</DisplayName>
                          <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                          <Metadata>
                            <Item Key="ContentDefinitionReferenceId">page.form</Item>
                            <Item Key="setting.showCancelButton">true</Item>
                          </Metadata>
                          <OutputClaims>
                            <OutputClaim ClaimTypeReferenceId="email" Required="true" />
                            <OutputClaim ClaimTypeReferenceId="password" Required="true" />
                          </OutputClaims>
                          <ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Directory-Write" /></ValidationTechnicalProfiles>
                          <UseTechnicalProfileForSessionManagement ReferenceId="Session-None" />
                        </TechnicalProfile>
                        <TechnicalProfile Id="Directory-Write">
                          <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.AzureActiveDirectoryProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                          <Metadata><Item Key="Operation">Write</Item><Item Key="RaiseErrorIfClaimsPrincipalAlreadyExists">true</Item></Metadata>
                          <PersistedClaims><PersistedClaim ClaimTypeReferenceId="email" PartnerClaimType="signInNames.emailAddress" /></PersistedClaims>
                          <OutputClaims><OutputClaim ClaimTypeReferenceId="objectId" /><OutputClaim ClaimTypeReferenceId="newUser" PartnerClaimType="newClaimsPrincipalCreated" /></OutputClaims>
                          <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="MakeGreeting" /></OutputClaimsTransformations>
                        </TechnicalProfile>
                        \(claimsProviderExtra)
                      </TechnicalProfiles>
                    </ClaimsProvider>
                    <ClaimsProvider>
                      <DisplayName>Token issuer</DisplayName>
                      <TechnicalProfiles>
                        <TechnicalProfile Id="TokenIssuer">
                          <Protocol Name="None" />
                          <OutputTokenFormat>JWT</OutputTokenFormat>
                          <Metadata><Item Key="token_lifetime_secs">3600</Item></Metadata>
                          <CryptographicKeys><Key Id="issuer_secret" StorageReferenceId="B2C_1A_TokenSigningKeyContainer" /></CryptographicKeys>
                        </TechnicalProfile>
                        <TechnicalProfile Id="Session-None">
                          <Protocol Name="Proprietary" Handler="Web.TPEngine.SSO.NoopSSOSessionProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                        </TechnicalProfile>
                      </TechnicalProfiles>
                    </ClaimsProvider>
                  </ClaimsProviders>
                  <UserJourneys>
                    <UserJourney Id="SignUp">
                      <OrchestrationSteps>
                        <OrchestrationStep Order="1" Type="ClaimsExchange">
                          <ClaimsExchanges><ClaimsExchange Id="SignUpExchange" TechnicalProfileReferenceId="Form-SignUp" /></ClaimsExchanges>
                        </OrchestrationStep>
                        <OrchestrationStep Order="2" Type="ClaimsExchange">
                          <Preconditions>
                            <Precondition Type="ClaimsExist" ExecuteActionsIf="true"><Value>objectId</Value><Action>SkipThisOrchestrationStep</Action></Precondition>
                          </Preconditions>
                          <ClaimsExchanges><ClaimsExchange Id="WriteExchange" TechnicalProfileReferenceId="Directory-Write" /></ClaimsExchanges>
                        </OrchestrationStep>
                        \(stepExtra)
                        <OrchestrationStep Order="3" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="TokenIssuer" />
                      </OrchestrationSteps>
                    </UserJourney>
                  </UserJourneys>
                """)
    }

    /// An extension: changes `Form-SignUp` from a claims provider of another name, adds a claim
    /// to it and a profile of its own.
    static func extensions(id: String = "B2C_1A_TestExtensions", base: String = "B2C_1A_TestBase", extra: String = "") -> String {
        policy(
            id, base: base,
            body: """
                  <ClaimsProviders>
                    <ClaimsProvider>
                      <DisplayName>Our changes</DisplayName>
                      <TechnicalProfiles>
                        <TechnicalProfile Id="form-signup">
                          <Metadata><Item Key="setting.showCancelButton">false</Item><Item Key="EnforceEmailVerification">false</Item></Metadata>
                          <OutputClaims><OutputClaim ClaimTypeReferenceId="DisplayName" /></OutputClaims>
                        </TechnicalProfile>
                        \(extra)
                      </TechnicalProfiles>
                    </ClaimsProvider>
                  </ClaimsProviders>
                """)
    }

    /// A relying party on `base` running the `SignUp` journey.
    static func relyingParty(id: String = "B2C_1A_test_signup", base: String = "B2C_1A_TestExtensions", journey: String = "SignUp") -> String {
        policy(
            id, base: base,
            body: """
                  <RelyingParty>
                    <DefaultUserJourney ReferenceId="\(journey)" />
                    <TechnicalProfile Id="PolicyProfile">
                      <DisplayName>PolicyProfile</DisplayName>
                      <Protocol Name="OpenIdConnect" />
                      <OutputClaims>
                        <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" />
                        <OutputClaim ClaimTypeReferenceId="greeting" />
                      </OutputClaims>
                      <SubjectNamingInfo ClaimType="sub" />
                    </TechnicalProfile>
                  </RelyingParty>
                """)
    }

    static var set: [String] { [relyingParty(), extensions(), base()] }
}
