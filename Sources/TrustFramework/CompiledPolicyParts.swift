import Foundation

/// A technical profile, its `IncludeTechnicalProfile` chain folded in.
package struct PolicyTechnicalProfile: Sendable, PolicyIdentified {
    /// What runs it: B2C's protocol and, for `Proprietary`, its handler.
    package enum Kind: Sendable, Equatable {
        /// `SelfAssertedAttributeProvider`: a page that collects claims.
        case selfAsserted
        /// `AzureActiveDirectoryProvider`: reads or writes the directory.
        case directory
        /// `ClaimsTransformationProtocolProvider`: runs its output transformations only.
        case claimsTransformation
        /// `Protocol Name="None"` with a JWT output: the token issuer.
        case jwtIssuer
        /// `Protocol Name="None"` with `IdTokenAudience` or `METADATA`: the checks a `GetClaims`
        /// step makes of the app's `id_token_hint` and the claims it reads (id-token-hint.md).
        case idTokenHint
        /// `OutputTokenFormat` `OAuth2Error` (protocol `None` or `OAuth2`): a `SendClaims` step
        /// that ends the journey with the policy's own error (oauth2-error-technical-profile.md).
        case oauth2Error
        /// `OpenIdConnect` or `OAuth2`: an identity provider; `login-NonInteractive`'s password
        /// check (`response_types` `id_token` with a `username`/`password` pair) is one too.
        case identityProvider(protocol: String)
        /// `RestfulProvider`: a call to a REST service.
        case restful
        /// `UserJourneyContextProvider`: the sign-in's own facts as claims (`IP-Address`,
        /// `CorrelationId`, `DateTimeInUtc`, `Build`), as analytics-with-application-insights.md's
        /// `SimpleUJContext` profile reads them.
        case journeyContext
        /// One of B2C's session providers (`NoopSSOSessionProvider`, `DefaultSSOSessionProvider`…).
        case session(String)
    }

    package let id: String
    package let displayName: String?
    package let kind: Kind

    /// Facebook's OAuth2 profile (`ProviderName` `facebook`, or its dialog on facebook.com), the
    /// one OAuth2 provider served here: by the simulated Facebook, where the server runs it.
    package var isFacebook: Bool {
        guard case .identityProvider("OAuth2") = kind else { return false }
        return PolicyCheck.isFacebook(metadata)
    }
    package let metadata: [String: String]
    package let inputClaims: [PolicyClaimReference]
    package let outputClaims: [PolicyClaimReference]
    /// A self-asserted page's `DisplayClaims`: what it shows, in this order (`Required` on each);
    /// nil without the element, when the page shows its output claims that a person types.
    package let displayClaims: [PolicyClaimReference]?
    package let persistedClaims: [PolicyClaimReference]
    package let inputTransformations: [String]
    package let outputTransformations: [String]
    package let validationProfiles: [PolicyValidationReference]
    let sessionManagement: String?
    /// `CryptographicKeys`: key id → key set (`issuer_secret` → `B2C_1A_TokenSigningKeyContainer`).
    package let keys: [String: String]

    init(_ element: PolicyElement) {
        id = element["Id"] ?? ""
        displayName = element.child("DisplayName")?.text
        let protocolElement = element.child("Protocol")
        var metadata: [String: String] = [:]
        for item in element.items("Metadata", "Item") { if let key = item["Key"] { metadata[key] = item.text } }
        self.metadata = metadata
        switch protocolElement?["Name"] ?? "" {
        case _ where element.child("OutputTokenFormat")?.text == "OAuth2Error": kind = .oauth2Error
        case "Proprietary":
            switch PolicyCheck.handlerName(protocolElement?["Handler"]) {
            case "SelfAssertedAttributeProvider": kind = .selfAsserted
            case "AzureActiveDirectoryProvider": kind = .directory
            case "ClaimsTransformationProtocolProvider": kind = .claimsTransformation
            case "RestfulProvider": kind = .restful
            case "UserJourneyContextProvider": kind = .journeyContext
            case let session: kind = .session(session)
            }
        case "OpenIdConnect", "OAuth2": kind = .identityProvider(protocol: protocolElement?["Name"] ?? "")
        case _ where element.child("OutputTokenFormat") != nil: kind = .jwtIssuer
        case _ where Self.isIDTokenHint(protocol: protocolElement?["Name"], metadata: metadata): kind = .idTokenHint
        default: kind = .claimsTransformation
        }
        inputClaims = PolicyClaimReference.list(element, "InputClaims", "InputClaim")
        outputClaims = PolicyClaimReference.list(element, "OutputClaims", "OutputClaim")
        displayClaims = element.child("DisplayClaims").map { PolicyClaimReference.list($0, "DisplayClaim") }
        persistedClaims = PolicyClaimReference.list(element, "PersistedClaims", "PersistedClaim")
        inputTransformations = element.items("InputClaimsTransformations", "InputClaimsTransformation").compactMap { $0["ReferenceId"] }
        outputTransformations = element.items("OutputClaimsTransformations", "OutputClaimsTransformation").compactMap { $0["ReferenceId"] }
        validationProfiles = element.items("ValidationTechnicalProfiles", "ValidationTechnicalProfile").map(PolicyValidationReference.init)
        sessionManagement = element.child("UseTechnicalProfileForSessionManagement")?["ReferenceId"]
        var keys: [String: String] = [:]
        for key in element.items("CryptographicKeys", "Key") { if let id = key["Id"] { keys[id] = key["StorageReferenceId"] ?? "" } }
        self.keys = keys
    }

    /// Whether a profile is an `id_token_hint` check: protocol `None` (or none named) with the
    /// symmetric hint's `IdTokenAudience` or the asymmetric hint's `METADATA`.
    package static func isIDTokenHint(protocol name: String?, metadata: [String: String]) -> Bool {
        (name ?? "None") == "None" && (metadata["IdTokenAudience"] != nil || metadata["METADATA"] != nil)
    }

    /// A metadata item read as a boolean (`true`/`false`, any case), `fallback` when absent.
    package func flag(_ key: String, default fallback: Bool) -> Bool {
        metadata[key].map { $0.lowercased() == "true" } ?? fallback
    }
}

/// A validation technical profile a self-asserted profile runs on submit, with its preconditions.
package struct PolicyValidationReference: Sendable {
    package let profile: String
    package let continueOnError: Bool
    package let continueOnSuccess: Bool
    package let preconditions: [PolicyPrecondition]

    init(_ element: PolicyElement) {
        profile = element["ReferenceId"] ?? ""
        continueOnError = element["ContinueOnError"]?.lowercased() == "true"
        continueOnSuccess = element["ContinueOnSuccess"]?.lowercased() != "false"
        preconditions = element.items("Preconditions", "Precondition").map(PolicyPrecondition.init)
    }
}

/// A precondition: `ClaimsExist` (the first value names a claim) or `ClaimEquals` (a claim and
/// the value it is compared with); its action runs when the test is `executeActionsIf`.
package struct PolicyPrecondition: Sendable {
    enum Test: String, Sendable { case claimsExist = "ClaimsExist", claimEquals = "ClaimEquals" }
    let test: Test
    let executeActionsIf: Bool
    let values: [String]
    package let action: String

    init(_ element: PolicyElement) {
        test = Test(rawValue: element["Type"] ?? "") ?? .claimsExist
        executeActionsIf = element["ExecuteActionsIf"]?.lowercased() != "false"
        values = element.children("Value").map(\.text)
        action = element.child("Action")?.text ?? ""
    }

    /// Whether the action runs for `claims`.
    package func holds(in claims: PolicyClaims) -> Bool {
        let result: Bool
        switch test {
        case .claimsExist: result = values.first.map { claims.has($0) } ?? false
        case .claimEquals:
            guard values.count >= 2 else { return false }
            result = claims.text(values[0]) == values[1]
        }
        return result == executeActionsIf
    }
}

/// A user journey's orchestration steps, in order.
package struct PolicyUserJourney: Sendable, PolicyIdentified {
    /// A sub-journey's `Type` (subjourneys.md): `Call` returns to the step after the one that
    /// invoked it; `Transfer` ends the journey (the rest of the caller does not run).
    package enum SubJourneyType: String, Sendable { case call = "Call", transfer = "Transfer" }

    package let id: String
    package let steps: [PolicyOrchestrationStep]
    /// Set for a `SubJourney`, nil for a `UserJourney`.
    package let subJourneyType: SubJourneyType?

    /// - Parameter defaultIssuer: the issuer of a `SendClaims` step that names none (the
    ///   journey's `DefaultCpimIssuerTechnicalProfileReferenceId`).
    init(_ element: PolicyElement, defaultIssuer: String? = nil) {
        id = element["Id"] ?? ""
        let issuer = element["DefaultCpimIssuerTechnicalProfileReferenceId"] ?? defaultIssuer
        steps = element.items("OrchestrationSteps", "OrchestrationStep").map { PolicyOrchestrationStep($0, defaultIssuer: issuer) }
            .sorted { $0.order < $1.order }
        subJourneyType = element.name == "SubJourney" ? SubJourneyType(rawValue: element["Type"] ?? "") ?? .call : nil
    }
}

package struct PolicyOrchestrationStep: Sendable {
    package enum Kind: String, Sendable {
        case combinedSignInAndSignUp = "CombinedSignInAndSignUp", claimsProviderSelection = "ClaimsProviderSelection"
        case claimsExchange = "ClaimsExchange", sendClaims = "SendClaims", invokeSubJourney = "InvokeSubJourney"
        /// Reads the relying party's input claims from the app's `id_token_hint`, by the
        /// `IdTokenHint_ExtractClaims` profile its issuer names (id-token-hint.md).
        case getClaims = "GetClaims"
    }
    package let order: Int
    package let kind: Kind
    package let contentDefinition: String?
    package let issuerProfile: String?
    package let preconditions: [PolicyPrecondition]
    /// `ClaimsExchange Id` → technical profile.
    package let exchanges: [(id: String, profile: String)]
    /// `ClaimsProviderSelection`s: the exchange a button starts (`TargetClaimsExchangeId`) or the
    /// one the page's own form validates with (`ValidationClaimsExchangeId`).
    package let selections: [(target: String?, validation: String?)]
    /// `InvokeSubJourney`'s `JourneyList/Candidate`: the sub-journey it runs.
    package let subJourney: String?

    init(_ element: PolicyElement, defaultIssuer: String? = nil) {
        order = Int(element["Order"] ?? "") ?? 0
        kind = Kind(rawValue: element["Type"] ?? "") ?? .claimsExchange
        contentDefinition = element["ContentDefinitionReferenceId"]
        issuerProfile = element["CpimIssuerTechnicalProfileReferenceId"] ?? (kind == .sendClaims ? defaultIssuer : nil)
        subJourney = element.items("JourneyList", "Candidate").first?["SubJourneyReferenceId"]
        preconditions = element.items("Preconditions", "Precondition").map(PolicyPrecondition.init)
        exchanges = element.items("ClaimsExchanges", "ClaimsExchange").map { ($0["Id"] ?? "", $0["TechnicalProfileReferenceId"] ?? "") }
        selections = element.items("ClaimsProviderSelections", "ClaimsProviderSelection").map {
            ($0["TargetClaimsExchangeId"], $0["ValidationClaimsExchangeId"])
        }
    }

    /// Whether a precondition skips this step for `claims`.
    package func skipped(for claims: PolicyClaims) -> Bool {
        preconditions.contains { $0.action == "SkipThisOrchestrationStep" && $0.holds(in: claims) }
    }
}

/// The relying party: the journey it runs, the refresh journey, and the claims the app gets.
package struct PolicyRelyingParty: Sendable {
    package let defaultJourney: String
    /// `Endpoint Id="Token" UserJourneyReferenceId=…`: the journey a refresh runs.
    let tokenJourney: String?
    package let outputClaims: [PolicyClaimReference]
    /// The policy profile's `InputClaims`: what a `GetClaims` step reads from the app's
    /// `id_token_hint`, beside its issuer profile's output claims (id-token-hint.md).
    package let inputClaims: [PolicyClaimReference]
    /// `SubjectNamingInfo ClaimType`: the token claim that is the subject.
    package let subjectClaim: String
    /// `JourneyInsights DeploymentMode="Development"`: keep the developer trace.
    let developmentTrace: Bool

    init(_ element: PolicyElement) {
        defaultJourney = element.child("DefaultUserJourney")?["ReferenceId"] ?? ""
        tokenJourney = element.items("Endpoints", "Endpoint").first { $0["Id"] == "Token" }?["UserJourneyReferenceId"]
        let profile = element.child("TechnicalProfile")
        outputClaims = profile.map { PolicyClaimReference.list($0, "OutputClaims", "OutputClaim") } ?? []
        inputClaims = profile.map { PolicyClaimReference.list($0, "InputClaims", "InputClaim") } ?? []
        subjectClaim = profile?.child("SubjectNamingInfo")?["ClaimType"] ?? "sub"
        developmentTrace = element.child("UserJourneyBehaviors")?.child("JourneyInsights")?["DeploymentMode"]?.lowercased() == "development"
    }
}
