import Foundation

extension PolicyFixtures {
    /// A sign-up-or-sign-in custom policy written for these tests, in one file: the combined
    /// page validating with a password check, a sign-up page with a verified email writing the
    /// directory, a directory read with a transformation, and the token.
    static func localAccounts(id: String = "B2C_1A_test_susi", tenant: String = tenant) -> String {
        policy(
            id, tenant: tenant,
            body: """
                  <BuildingBlocks>
                    <ClaimsSchema>
                      <ClaimType Id="objectId"><DisplayName>Object id</DisplayName><DataType>string</DataType>
                        <DefaultPartnerClaimTypes><Protocol Name="OpenIdConnect" PartnerClaimType="oid" /></DefaultPartnerClaimTypes></ClaimType>
                      <ClaimType Id="signInName"><DisplayName>Email address</DisplayName><DataType>string</DataType><UserInputType>EmailBox</UserInputType></ClaimType>
                      <ClaimType Id="password"><DisplayName>Password</DisplayName><DataType>string</DataType><UserInputType>Password</UserInputType></ClaimType>
                      <ClaimType Id="email"><DisplayName>Email address</DisplayName><DataType>string</DataType><UserInputType>EmailBox</UserInputType>
                        <DefaultPartnerClaimTypes><Protocol Name="OpenIdConnect" PartnerClaimType="email" /></DefaultPartnerClaimTypes></ClaimType>
                      <ClaimType Id="newPassword"><DisplayName>New password</DisplayName><DataType>string</DataType><UserInputType>Password</UserInputType></ClaimType>
                      <ClaimType Id="reenterPassword"><DisplayName>Confirm new password</DisplayName><DataType>string</DataType><UserInputType>Password</UserInputType></ClaimType>
                      <ClaimType Id="displayName"><DisplayName>Display name</DisplayName><DataType>string</DataType><UserInputType>TextBox</UserInputType>
                        <DefaultPartnerClaimTypes><Protocol Name="OpenIdConnect" PartnerClaimType="name" /></DefaultPartnerClaimTypes></ClaimType>
                      <ClaimType Id="newUser"><DisplayName>New user</DisplayName><DataType>boolean</DataType></ClaimType>
                      <ClaimType Id="tenantId"><DisplayName>Tenant</DisplayName><DataType>string</DataType>
                        <DefaultPartnerClaimTypes><Protocol Name="OpenIdConnect" PartnerClaimType="tid" /></DefaultPartnerClaimTypes></ClaimType>
                      <ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType>
                    </ClaimsSchema>
                    <ClaimsTransformations>
                      <ClaimsTransformation Id="Greet" TransformationMethod="FormatStringClaim">
                        <InputClaims><InputClaim ClaimTypeReferenceId="displayName" TransformationClaimType="inputClaim" /></InputClaims>
                        <InputParameters><InputParameter Id="stringFormat" DataType="string" Value="Hello {0}" /></InputParameters>
                        <OutputClaims><OutputClaim ClaimTypeReferenceId="greeting" TransformationClaimType="outputClaim" /></OutputClaims>
                      </ClaimsTransformation>
                    </ClaimsTransformations>
                    <ContentDefinitions>
                      <ContentDefinition Id="unified"><LoadUri>~/tenant/templates/unified.cshtml</LoadUri>
                        <DataUri>urn:com:microsoft:aad:b2c:elements:contract:unifiedssp:2.1.5</DataUri></ContentDefinition>
                      <ContentDefinition Id="form"><LoadUri>~/tenant/templates/form.cshtml</LoadUri>
                        <DataUri>urn:com:microsoft:aad:b2c:elements:contract:selfasserted:2.1.7</DataUri></ContentDefinition>
                    </ContentDefinitions>
                  </BuildingBlocks>
                  <ClaimsProviders>
                    <ClaimsProvider>
                      <DisplayName>Local accounts</DisplayName>
                      <TechnicalProfiles>
                        <TechnicalProfile Id="Form-SignIn">
                          <DisplayName>Sign in</DisplayName>
                          <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine" />
                          <Metadata><Item Key="SignUpTarget">SignUpExchange</Item><Item Key="ContentDefinitionReferenceId">unified</Item></Metadata>
                          <InputClaims><InputClaim ClaimTypeReferenceId="signInName" DefaultValue="{OIDC:LoginHint}" /></InputClaims>
                          <OutputClaims>
                            <OutputClaim ClaimTypeReferenceId="signInName" Required="true" />
                            <OutputClaim ClaimTypeReferenceId="password" Required="true" />
                            <OutputClaim ClaimTypeReferenceId="objectId" />
                          </OutputClaims>
                          <ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Password-Check" /></ValidationTechnicalProfiles>
                        </TechnicalProfile>
                        <TechnicalProfile Id="Password-Check">
                          <Protocol Name="OpenIdConnect" />
                          <Metadata><Item Key="METADATA">https://login.microsoftonline.com/{tenant}/.well-known/openid-configuration</Item></Metadata>
                          <InputClaims>
                            <InputClaim ClaimTypeReferenceId="signInName" PartnerClaimType="username" Required="true" />
                            <InputClaim ClaimTypeReferenceId="password" Required="true" />
                          </InputClaims>
                          <OutputClaims>
                            <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="oid" />
                            <OutputClaim ClaimTypeReferenceId="displayName" PartnerClaimType="name" />
                          </OutputClaims>
                        </TechnicalProfile>
                        <TechnicalProfile Id="Form-SignUp">
                          <DisplayName>Create your account</DisplayName>
                          <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine" />
                          <Metadata><Item Key="ContentDefinitionReferenceId">form</Item></Metadata>
                          <OutputClaims>
                            <OutputClaim ClaimTypeReferenceId="objectId" />
                            <OutputClaim ClaimTypeReferenceId="email" PartnerClaimType="Verified.Email" Required="true" />
                            <OutputClaim ClaimTypeReferenceId="newPassword" Required="true" />
                            <OutputClaim ClaimTypeReferenceId="reenterPassword" Required="true" />
                            <OutputClaim ClaimTypeReferenceId="displayName" Required="true" />
                            <OutputClaim ClaimTypeReferenceId="newUser" />
                          </OutputClaims>
                          <ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Directory-Write" /></ValidationTechnicalProfiles>
                        </TechnicalProfile>
                        <TechnicalProfile Id="Directory-Common">
                          <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.AzureActiveDirectoryProvider, Web.TPEngine" />
                        </TechnicalProfile>
                        <TechnicalProfile Id="Directory-Write">
                          <Metadata><Item Key="Operation">Write</Item><Item Key="RaiseErrorIfClaimsPrincipalAlreadyExists">true</Item></Metadata>
                          <InputClaims><InputClaim ClaimTypeReferenceId="email" PartnerClaimType="signInNames.emailAddress" Required="true" /></InputClaims>
                          <PersistedClaims>
                            <PersistedClaim ClaimTypeReferenceId="email" PartnerClaimType="signInNames.emailAddress" />
                            <PersistedClaim ClaimTypeReferenceId="newPassword" PartnerClaimType="password" />
                            <PersistedClaim ClaimTypeReferenceId="displayName" DefaultValue="unknown" />
                          </PersistedClaims>
                          <OutputClaims>
                            <OutputClaim ClaimTypeReferenceId="objectId" />
                            <OutputClaim ClaimTypeReferenceId="newUser" PartnerClaimType="newClaimsPrincipalCreated" />
                          </OutputClaims>
                          <IncludeTechnicalProfile ReferenceId="Directory-Common" />
                        </TechnicalProfile>
                        <TechnicalProfile Id="Directory-Read">
                          <Metadata><Item Key="Operation">Read</Item><Item Key="RaiseErrorIfClaimsPrincipalDoesNotExist">true</Item></Metadata>
                          <InputClaims><InputClaim ClaimTypeReferenceId="objectId" Required="true" /></InputClaims>
                          <OutputClaims>
                            <OutputClaim ClaimTypeReferenceId="displayName" />
                            <OutputClaim ClaimTypeReferenceId="email" PartnerClaimType="signInNames.emailAddress" />
                          </OutputClaims>
                          <OutputClaimsTransformations><OutputClaimsTransformation ReferenceId="Greet" /></OutputClaimsTransformations>
                          <IncludeTechnicalProfile ReferenceId="Directory-Common" />
                        </TechnicalProfile>
                        <TechnicalProfile Id="Issuer">
                          <Protocol Name="None" />
                          <OutputTokenFormat>JWT</OutputTokenFormat>
                          <Metadata><Item Key="token_lifetime_secs">1800</Item></Metadata>
                        </TechnicalProfile>
                      </TechnicalProfiles>
                    </ClaimsProvider>
                  </ClaimsProviders>
                  <UserJourneys>
                    <UserJourney Id="SignUpOrSignIn">
                      <OrchestrationSteps>
                        <OrchestrationStep Order="1" Type="CombinedSignInAndSignUp" ContentDefinitionReferenceId="unified">
                          <ClaimsProviderSelections><ClaimsProviderSelection ValidationClaimsExchangeId="SignInExchange" /></ClaimsProviderSelections>
                          <ClaimsExchanges><ClaimsExchange Id="SignInExchange" TechnicalProfileReferenceId="Form-SignIn" /></ClaimsExchanges>
                        </OrchestrationStep>
                        <OrchestrationStep Order="2" Type="ClaimsExchange">
                          <Preconditions>
                            <Precondition Type="ClaimsExist" ExecuteActionsIf="true"><Value>objectId</Value><Action>SkipThisOrchestrationStep</Action></Precondition>
                          </Preconditions>
                          <ClaimsExchanges><ClaimsExchange Id="SignUpExchange" TechnicalProfileReferenceId="Form-SignUp" /></ClaimsExchanges>
                        </OrchestrationStep>
                        <OrchestrationStep Order="3" Type="ClaimsExchange">
                          <ClaimsExchanges><ClaimsExchange Id="ReadExchange" TechnicalProfileReferenceId="Directory-Read" /></ClaimsExchanges>
                        </OrchestrationStep>
                        <OrchestrationStep Order="4" Type="SendClaims" CpimIssuerTechnicalProfileReferenceId="Issuer" />
                      </OrchestrationSteps>
                    </UserJourney>
                  </UserJourneys>
                  <RelyingParty>
                    <DefaultUserJourney ReferenceId="SignUpOrSignIn" />
                    <TechnicalProfile Id="PolicyProfile">
                      <Protocol Name="OpenIdConnect" />
                      <OutputClaims>
                        <OutputClaim ClaimTypeReferenceId="displayName" />
                        <OutputClaim ClaimTypeReferenceId="email" />
                        <OutputClaim ClaimTypeReferenceId="objectId" PartnerClaimType="sub" />
                        <OutputClaim ClaimTypeReferenceId="greeting" />
                        <OutputClaim ClaimTypeReferenceId="newUser" />
                        <OutputClaim ClaimTypeReferenceId="tenantId" AlwaysUseDefaultValue="true" DefaultValue="{Policy:TenantObjectId}" />
                      </OutputClaims>
                      <SubjectNamingInfo ClaimType="sub" />
                    </TechnicalProfile>
                  </RelyingParty>
                """)
    }
}
