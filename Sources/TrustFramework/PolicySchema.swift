import WireCoding

/// The part of the IEF schema (`TrustFrameworkPolicy_0.3.0.0.xsd`) this service runs: which
/// children each element may have, and the step types, technical-profile handlers, claims
/// transformations and data types it knows. An element outside the set fails the upload with its
/// name (SPEC §2.12), never silently at run time.
enum PolicySchema {
    /// Allowed child elements by parent element name.
    static let children: [String: Set<String>] = [
        "TrustFrameworkPolicy": ["BasePolicy", "BuildingBlocks", "ClaimsProviders", "UserJourneys", "SubJourneys", "RelyingParty"],
        "BasePolicy": ["TenantId", "PolicyId"],
        "BuildingBlocks": [
            "ClaimsSchema", "Predicates", "PredicateValidations", "ClaimsTransformations", "ClientDefinitions", "ContentDefinitions",
            "Localization",
        ],
        "ClaimsSchema": ["ClaimType"],
        "ClaimType": [
            "DisplayName", "DataType", "DefaultPartnerClaimTypes", "UserHelpText", "AdminHelpText", "UserInputType", "Restriction",
            "PredicateValidationReference", "Mask",
        ],
        "DefaultPartnerClaimTypes": ["Protocol"],
        "Restriction": ["Pattern", "Enumeration"],
        "Predicates": ["Predicate"],
        "Predicate": ["Parameters", "UserHelpText"],
        "Parameters": ["Parameter"],
        "PredicateValidations": ["PredicateValidation"],
        "PredicateValidation": ["PredicateGroups"],
        "PredicateGroups": ["PredicateGroup"],
        "PredicateGroup": ["UserHelpText", "PredicateReferences"],
        "PredicateReferences": ["PredicateReference"],
        "ClaimsTransformations": ["ClaimsTransformation"],
        "ClaimsTransformation": ["InputClaims", "InputParameters", "OutputClaims"],
        "InputParameters": ["InputParameter"],
        "ClientDefinitions": ["ClientDefinition"],
        "ClientDefinition": ["ClientUIFilterFlags"],
        "ContentDefinitions": ["ContentDefinition"],
        "ContentDefinition": ["LoadUri", "RecoveryUri", "DataUri", "Metadata", "LocalizedResourcesReferences"],
        "LocalizedResourcesReferences": ["LocalizedResourcesReference"],
        "Localization": ["SupportedLanguages", "LocalizedResources"],
        "SupportedLanguages": ["SupportedLanguage"],
        "LocalizedResources": ["LocalizedStrings", "LocalizedCollections"],
        "LocalizedStrings": ["LocalizedString"],
        "LocalizedCollections": ["LocalizedCollection"],
        "LocalizedCollection": ["Item"],
        "Metadata": ["Item"],
        "ClaimsProviders": ["ClaimsProvider"],
        "ClaimsProvider": ["Domain", "DisplayName", "TechnicalProfiles"],
        "TechnicalProfiles": ["TechnicalProfile"],
        "TechnicalProfile": [
            "Domain", "DisplayName", "Description", "Protocol", "InputTokenFormat", "OutputTokenFormat", "Metadata", "CryptographicKeys",
            "InputClaimsTransformations", "InputClaims", "DisplayClaims", "PersistedClaims", "OutputClaims", "OutputClaimsTransformations",
            "ValidationTechnicalProfiles", "SubjectNamingInfo", "IncludeInSso", "IncludeClaimsFromTechnicalProfile",
            "IncludeTechnicalProfile", "UseTechnicalProfileForSessionManagement", "EnabledForUserJourneys",
        ],
        "CryptographicKeys": ["Key"],
        "InputClaimsTransformations": ["InputClaimsTransformation"],
        "OutputClaimsTransformations": ["OutputClaimsTransformation"],
        "InputClaims": ["InputClaim"],
        "OutputClaims": ["OutputClaim"],
        "DisplayClaims": ["DisplayClaim"],
        "PersistedClaims": ["PersistedClaim"],
        "ValidationTechnicalProfiles": ["ValidationTechnicalProfile"],
        "ValidationTechnicalProfile": ["Preconditions"],
        "Preconditions": ["Precondition"],
        "Precondition": ["Value", "Action"],
        "UserJourneys": ["UserJourney"],
        "UserJourney": ["OrchestrationSteps", "ClientDefinition", "PreserveOriginalAssertion"],
        "OrchestrationSteps": ["OrchestrationStep"],
        "OrchestrationStep": ["Preconditions", "ClaimsProviderSelections", "ClaimsExchanges", "JourneyList"],
        "JourneyList": ["Candidate"],
        "SubJourneys": ["SubJourney"],
        "SubJourney": ["OrchestrationSteps"],
        "ClaimsProviderSelections": ["ClaimsProviderSelection"],
        "ClaimsExchanges": ["ClaimsExchange"],
        "RelyingParty": ["DefaultUserJourney", "UserJourneyBehaviors", "Endpoints", "TechnicalProfile"],
        "UserJourneyBehaviors": [
            "SingleSignOn", "SessionExpiryType", "SessionExpiryInSeconds", "JourneyInsights", "ContentDefinitionParameters",
            "ScriptExecution", "JourneyFraming",
        ],
        "ContentDefinitionParameters": ["Parameter"],
        "Endpoints": ["Endpoint"],
    ]

    /// The orchestration step types this service runs.
    static let stepTypes: Set<String> = [
        "CombinedSignInAndSignUp", "ClaimsProviderSelection", "ClaimsExchange", "SendClaims", "InvokeSubJourney", "GetClaims",
    ]

    /// `Protocol Name="Proprietary"` handlers, by the short name B2C's full type names end with.
    static let handlers: Set<String> = [
        "SelfAssertedAttributeProvider", "AzureActiveDirectoryProvider", "ClaimsTransformationProtocolProvider",
        "NoopSSOSessionProvider", "DefaultSSOSessionProvider", "ExternalLoginSSOSessionProvider", "OAuthSSOSessionProvider",
        "RestfulProvider", "UserJourneyContextProvider",
    ]

    /// Technical-profile protocols.
    static let protocols: Set<String> = ["Proprietary", "OpenIdConnect", "OAuth2", "None"]

    /// Claims transformations (SPEC §2.12's list).
    static let transformations: Set<String> = Set<String>([
        "CopyClaim", "CompareClaimToValue", "CompareClaims", "CreateStringClaim", "FormatStringClaim", "FormatStringMultipleClaims",
        "ChangeCase", "StringReplace", "StringSplit", "SetClaimsIfStringsMatch", "SetClaimsIfStringsAreEqual", "CreateRandomString", "Hash",
        "AssertBooleanClaimIsEqualToValue", "AndClaims", "OrClaims", "NotClaims", "CompareBooleanClaimToValue",
        "AddItemToStringCollection", "GetSingleItemFromStringCollection", "StringCollectionContains", "GetCurrentDateTime",
        "DateTimeComparison", "GetClaimFromJson", "GenerateJson", "AssertStringClaimsAreEqual", "CreateAlternativeSecurityId",
        "AddParameterToStringCollection", "AssertDateTimeIsGreaterThan", "ConvertPhoneNumberClaimToString",
        "ConvertStringToPhoneNumberClaim", "GetNationalNumberAndCountryCodeFromPhoneNumberString",
    ]).union(GeneralTransformations.methods).union(StringTransformations.methods).union(CollectionTransformations.methods)

    /// Claim data types.
    static let dataTypes: Set<String> = [
        "string", "boolean", "int", "long", "date", "dateTime", "stringCollection", "alternativeSecurityId", "alternativeSecurityIdCollection",
        "phoneNumber",
    ]

    /// Precondition types and the actions they take.
    static let preconditionTypes: Set<String> = ["ClaimsExist", "ClaimEquals"]
    static let preconditionActions: Set<String> = ["SkipThisOrchestrationStep", "SkipThisValidationTechnicalProfile"]
}

/// The supported set as JSON (`todo-server policies schema`), so tools outside this service — the
/// interop suite's `lxml` check of the project's own policy files — test against the same rules.
public enum CustomPolicySchema {
    public static func json() -> String {
        func list(_ values: Set<String>) -> JSONText { .array(values.sorted().map(JSONText.string)) }
        return JSONText.object([
            ("namespace", .string(PolicyXML.namespace)),
            ("children", .object(PolicySchema.children.sorted { $0.key < $1.key }.map { ($0.key, list($0.value)) })),
            ("stepTypes", list(PolicySchema.stepTypes)), ("handlers", list(PolicySchema.handlers)),
            ("protocols", list(PolicySchema.protocols)), ("transformations", list(PolicySchema.transformations)),
            ("dataTypes", list(PolicySchema.dataTypes)),
        ]).serialized
    }
}
