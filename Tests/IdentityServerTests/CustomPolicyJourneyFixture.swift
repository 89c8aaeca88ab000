import Foundation

extension PolicyFixtures {
    /// This project's local-accounts custom policies (`Tests/interop/policies/local`, shared
    /// with the interop tests): a base with the sign-up-or-sign-in and password-reset journeys,
    /// and their two relying parties, for `tenant`.
    static func localAccounts(tenant: String = tenant) throws -> [Data] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("interop/policies/local")
        return try ["B2C_1A_LocalBase", "B2C_1A_test_susi", "B2C_1A_test_reset"].map { name in
            let text = try String(contentsOf: folder.appendingPathComponent("\(name).xml"), encoding: .utf8)
            return Data(text.replacingOccurrences(of: "TENANT", with: tenant).utf8)
        }
    }

    /// A relying party on `B2C_1A_LocalBase` whose journey shows one self-asserted page (`page`:
    /// its id and body after the protocol), after the base's sign-in and profile read when
    /// `signsIn`, then sends its claims. `buildingBlocks` follow the claims schema and
    /// transformations (content definitions, localization).
    static func onLocalBase(
        id: String, tenant: String, claimTypes: String, transformations: String = "", buildingBlocks: String = "",
        page: (id: String, body: String), signsIn: Bool, relyingPartyClaims: String, pageMetadata: String = ""
    ) -> Data {
        let signIn = """
            <OrchestrationStep Order="1" Type="CombinedSignInAndSignUp" ContentDefinitionReferenceId="unified">
              <ClaimsProviderSelections><ClaimsProviderSelection ValidationClaimsExchangeId="SignInExchange" /></ClaimsProviderSelections>
              <ClaimsExchanges><ClaimsExchange Id="SignInExchange" TechnicalProfileReferenceId="Form-SignIn" /></ClaimsExchanges>
            </OrchestrationStep>
            <OrchestrationStep Order="2" Type="ClaimsExchange">
              <ClaimsExchanges><ClaimsExchange Id="ReadExchange" TechnicalProfileReferenceId="Directory-Read" /></ClaimsExchanges>
            </OrchestrationStep>
            """
        let first = signsIn ? 3 : 1
        return Data(
            """
            <TrustFrameworkPolicy xmlns="http://schemas.microsoft.com/online/cpim/schemas/2013/06" PolicySchemaVersion="0.3.0.0"
              TenantId="\(tenant)" PolicyId="\(id)" PublicPolicyUri="http://\(tenant)/\(id)">
            <BasePolicy><TenantId>\(tenant)</TenantId><PolicyId>B2C_1A_LocalBase</PolicyId></BasePolicy>
            <BuildingBlocks><ClaimsSchema>\(claimTypes)</ClaimsSchema>\(transformations.isEmpty ? "" : "<ClaimsTransformations>\(transformations)</ClaimsTransformations>")\(buildingBlocks)</BuildingBlocks>
            <ClaimsProviders><ClaimsProvider><DisplayName>Pages</DisplayName><TechnicalProfiles>
              <TechnicalProfile Id="\(page.id)">
                <DisplayName>Your details</DisplayName>
                <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                <Metadata><Item Key="ContentDefinitionReferenceId">form</Item>\(pageMetadata)</Metadata>
                \(page.body)
              </TechnicalProfile>
            </TechnicalProfiles></ClaimsProvider></ClaimsProviders>
            <UserJourneys><UserJourney Id="Journey"><OrchestrationSteps>
              \(signsIn ? signIn : "")
              <OrchestrationStep Order="\(first)" Type="ClaimsExchange">
                <ClaimsExchanges><ClaimsExchange Id="PageExchange" TechnicalProfileReferenceId="\(page.id)" /></ClaimsExchanges>
              </OrchestrationStep>
              <OrchestrationStep Order="\(first + 1)" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />
            </OrchestrationSteps></UserJourney></UserJourneys>
            <RelyingParty>
              <DefaultUserJourney ReferenceId="Journey" />
              <TechnicalProfile Id="PolicyProfile">
                <Protocol Name="OpenIdConnect" />
                <OutputClaims>\(relyingPartyClaims)</OutputClaims>
                <SubjectNamingInfo ClaimType="sub" />
              </TechnicalProfile>
            </RelyingParty>
            </TrustFrameworkPolicy>
            """.utf8)
    }
}
