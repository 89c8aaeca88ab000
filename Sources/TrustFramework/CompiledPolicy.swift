import Foundation

/// A relying-party policy compiled from its effective (merged, checked) XML into the typed
/// values the journey engine runs: claim types, claims transformations, technical profiles with
/// their `IncludeTechnicalProfile` chains folded in, user journeys and the relying party. Made
/// once per upload and cached, so a sign-in never parses XML (SPEC §2.12's speed rule).
package struct CompiledPolicy: Sendable {
    package let id: String
    let claimTypes: [String: PolicyClaimType]
    let transformations: [String: PolicyTransformation]
    let contentDefinitions: [String: PolicyContentDefinition]
    let profiles: [String: PolicyTechnicalProfile]
    let journeys: [String: PolicyUserJourney]
    package let relyingParty: PolicyRelyingParty?
    package let predicates: PolicyPredicates
    /// `Localization`: the strings and collections by language.
    let localization: PolicyLocalization

    package func claimType(_ id: String) -> PolicyClaimType? { claimTypes[id.lowercased()] }
    package func profile(_ id: String) -> PolicyTechnicalProfile? { profiles[id.lowercased()] }
    /// The profiles that send the browser to an identity provider (OpenID Connect, OAuth 2.0):
    /// found once at compile time, as every hosted page's CSP names them.
    package let identityProviderProfiles: [PolicyTechnicalProfile]
    /// Profile id → the `Domain` of its claims provider, lower-cased: what a `domain_hint` names.
    let domains: [String: String]
    /// The `Domain` of the claims provider `profile` belongs to, lower-cased.
    package func domain(of profile: PolicyTechnicalProfile) -> String? { domains[profile.id.lowercased()] }
    /// Whether a profile of this policy is Facebook's OAuth2 one: found once at compile time, as
    /// every request on the policy's URL makes its flow from it.
    package let hasFacebookProfile: Bool
    /// The relying party's JWT issuer: the technical profile of its journey's `SendClaims` step.
    package let tokenIssuer: PolicyTechnicalProfile?
    /// The key set whose active key signs this policy's tokens: the JWT issuer's `issuer_secret`
    /// (`B2C_1A_TokenSigningKeyContainer` in the starter pack). B2C signs a custom policy's
    /// tokens with it, not with the tenant's user-flow key, and publishes it in the policy's
    /// JWKS (policy-keys-overview; SPEC §2.12).
    package var tokenSigningKeySet: String? { tokenIssuer?.keys["issuer_secret"].flatMap { $0.isEmpty ? nil : $0 } }
    package func transformation(_ id: String) -> PolicyTransformation? { transformations[id.lowercased()] }
    package func journey(_ id: String) -> PolicyUserJourney? { journeys[id.lowercased()] }
    /// `SubJourneys`: what `InvokeSubJourney` steps run.
    let subJourneys: [String: PolicyUserJourney]
    package func subJourney(_ id: String) -> PolicyUserJourney? { subJourneys[id.lowercased()] }
    func contentDefinition(_ id: String) -> PolicyContentDefinition? { contentDefinitions[id.lowercased()] }

    /// Whether `profile`'s session is kept for single sign-on: its session management profile is
    /// one of B2C's remembering providers (`DefaultSSOSessionProvider` and the like), not
    /// `NoopSSOSessionProvider`.
    package func remembersSession(_ profile: PolicyTechnicalProfile) -> Bool {
        guard let manager = profile.sessionManagement.flatMap(self.profile), case .session(let handler) = manager.kind else { return false }
        return handler != "NoopSSOSessionProvider"
    }

    /// Compiles an effective policy that ``PolicyCheck/effective(_:)`` passed.
    package init(_ policy: PolicyElement) {
        id = policy["PolicyId"] ?? ""
        let blocks = policy.child("BuildingBlocks")
        claimTypes = Self.keyed((blocks?.items("ClaimsSchema", "ClaimType") ?? []).map(PolicyClaimType.init))
        transformations = Self.keyed((blocks?.items("ClaimsTransformations", "ClaimsTransformation") ?? []).map(PolicyTransformation.init))
        contentDefinitions = Self.keyed((blocks?.items("ContentDefinitions", "ContentDefinition") ?? []).map(PolicyContentDefinition.init))
        let elements = (policy.child("ClaimsProviders")?.children("ClaimsProvider") ?? []).flatMap { $0.items("TechnicalProfiles", "TechnicalProfile") }
        var byID: [String: PolicyElement] = [:]
        for element in elements { if let id = element["Id"] { byID[id.lowercased()] = element } }
        profiles = Self.keyed(elements.map { PolicyTechnicalProfile(Self.including($0, from: byID, depth: 0)) })
        var domains: [String: String] = [:]
        for provider in policy.child("ClaimsProviders")?.children("ClaimsProvider") ?? [] {
            guard let domain = provider.child("Domain")?.text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased(), !domain.isEmpty
            else { continue }
            for profile in provider.items("TechnicalProfiles", "TechnicalProfile") { if let id = profile["Id"] { domains[id.lowercased()] = domain } }
        }
        self.domains = domains
        hasFacebookProfile = profiles.values.contains(where: \.isFacebook)
        identityProviderProfiles = profiles.values.filter { if case .identityProvider = $0.kind { true } else { false } }
        journeys = Self.keyed((policy.child("UserJourneys")?.children("UserJourney") ?? []).map { PolicyUserJourney($0) })
        subJourneys = Self.keyed((policy.child("SubJourneys")?.children("SubJourney") ?? []).map { PolicyUserJourney($0) })
        relyingParty = policy.child("RelyingParty").map(PolicyRelyingParty.init)
        predicates = PolicyPredicates(blocks)
        localization = PolicyLocalization(blocks?.child("Localization"))
        let (journeys, profiles) = (self.journeys, self.profiles)
        // The first JWT issuer the default journey's `SendClaims` steps name, its sub-journeys'
        // included (an OAuth2 error profile sends no token).
        let subJourneys = self.subJourneys
        func sendClaims(_ steps: [PolicyOrchestrationStep], depth: Int) -> [PolicyOrchestrationStep] {
            steps.flatMap { step -> [PolicyOrchestrationStep] in
                if step.kind == .invokeSubJourney, depth < PolicyCheck.maximumSubJourneyDepth,
                    let sub = step.subJourney.flatMap({ subJourneys[$0.lowercased()] })
                {
                    return sendClaims(sub.steps, depth: depth + 1)
                }
                return step.kind == .sendClaims ? [step] : []
            }
        }
        tokenIssuer = sendClaims(relyingParty.flatMap { journeys[$0.defaultJourney.lowercased()] }?.steps ?? [], depth: 0)
            .compactMap { $0.issuerProfile.flatMap { profiles[$0.lowercased()] } }
            .first { $0.kind == .jwtIssuer }
    }

    /// A profile with the profile it includes (`IncludeTechnicalProfile`) as its base, as B2C
    /// folds them: the including profile's elements win. Ten levels at most.
    private static func including(_ profile: PolicyElement, from all: [String: PolicyElement], depth: Int) -> PolicyElement {
        guard depth < 10, let reference = profile.child("IncludeTechnicalProfile")?["ReferenceId"],
            let included = all[reference.lowercased()]
        else { return profile }
        let base = including(included, from: all, depth: depth + 1)
        var merged = PolicyMerge.merge(base, profile, at: ["TechnicalProfiles"])
        merged.attributes["Id"] = profile["Id"]
        return merged
    }

    private static func keyed<T: PolicyIdentified>(_ values: [T]) -> [String: T] {
        Dictionary(values.map { ($0.id.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
    }
}

protocol PolicyIdentified { var id: String { get } }

/// A claim type of the claims schema.
package struct PolicyClaimType: Sendable, PolicyIdentified {
    package enum DataType: String, Sendable {
        case string, boolean, int, long, date, dateTime, stringCollection, alternativeSecurityId, alternativeSecurityIdCollection, phoneNumber
    }
    package let id: String
    package let displayName: String
    package let dataType: DataType
    package let userInputType: String?
    package let userHelpText: String?
    /// `Restriction/Pattern`: the value must match it; `helpText` says how.
    package let pattern: (expression: PolicyPattern.Compiled, helpText: String?)?
    /// `Restriction/Enumeration`: the allowed values and their texts.
    package let enumeration: [(text: String, value: String)]
    /// The values its `Enumeration` items mark `SelectByDefault="true"`: what a page selects while
    /// the claim has no value (claimsschema.md, Enumeration).
    package let selectedByDefault: [String]
    /// `DefaultPartnerClaimTypes`: the claim's name per protocol (`OpenIdConnect` → `name`).
    package let partnerClaimTypes: [String: String]
    package let predicateValidation: String?
    /// `Mask`: how a page shows the value without showing all of it.
    package let mask: PolicyMask?

    init(_ element: PolicyElement) {
        id = element["Id"] ?? ""
        mask = element.child("Mask").flatMap(PolicyMask.init)
        displayName = element.child("DisplayName")?.text ?? id
        dataType = DataType(rawValue: element.child("DataType")?.text ?? "") ?? .string
        userInputType = element.child("UserInputType")?.text
        userHelpText = element.child("UserHelpText")?.text
        pattern = element.child("Restriction")?.child("Pattern").map { (PolicyPattern.Compiled($0["RegularExpression"] ?? ""), $0["HelpText"]) }
        enumeration = element.child("Restriction")?.children("Enumeration").map { ($0["Text"] ?? $0["Value"] ?? "", $0["Value"] ?? "") } ?? []
        selectedByDefault = Self.selectedByDefault(element.child("Restriction")?.children("Enumeration") ?? [])
        var partners: [String: String] = [:]
        for protocolElement in element.items("DefaultPartnerClaimTypes", "Protocol") {
            if let name = protocolElement["Name"], let partner = protocolElement["PartnerClaimType"] { partners[name] = partner }
        }
        partnerClaimTypes = partners
        predicateValidation = element.child("PredicateValidationReference")?["Id"]
    }
}

extension PolicyClaimType {
    /// The values of the items (`Enumeration`, a localized collection's `Item`) marked
    /// `SelectByDefault="true"`.
    static func selectedByDefault(_ items: [PolicyElement]) -> [String] {
        items.filter { $0["SelectByDefault"]?.lowercased() == "true" }.map { $0["Value"] ?? "" }
    }
}

/// A claim a profile, transformation or relying party takes or gives.
package struct PolicyClaimReference: Sendable {
    package let claimType: String
    package let partnerClaimType: String?
    let transformationClaimType: String?
    package let defaultValue: String?
    package let alwaysUseDefaultValue: Bool
    package let required: Bool

    init(_ element: PolicyElement) {
        claimType = element["ClaimTypeReferenceId"] ?? ""
        partnerClaimType = element["PartnerClaimType"]
        transformationClaimType = element["TransformationClaimType"]
        defaultValue = element["DefaultValue"]
        alwaysUseDefaultValue = element["AlwaysUseDefaultValue"]?.lowercased() == "true"
        required = element["Required"]?.lowercased() == "true"
    }

    static func list(_ element: PolicyElement, _ container: String, _ name: String) -> [PolicyClaimReference] {
        element.items(container, name).map(PolicyClaimReference.init)
    }

    /// The `name` children of `element` itself.
    static func list(_ element: PolicyElement, _ name: String) -> [PolicyClaimReference] {
        element.children(name).map(PolicyClaimReference.init)
    }
}

/// A claims transformation: its method, input claims and parameters, output claims.
package struct PolicyTransformation: Sendable, PolicyIdentified {
    let id: String
    let method: String
    let inputClaims: [PolicyClaimReference]
    /// Parameters by id: their data type and value.
    let parameters: [String: (dataType: String, value: String)]
    /// The parameters' ids in the order the policy writes them (`GenerateJson` keeps it).
    let parameterOrder: [String]
    let outputClaims: [PolicyClaimReference]
    /// `SetClaimsIfRegexMatch`'s `matchTo`, compiled with the policy (unanchored, as .NET's
    /// `Regex.Match` searches).
    let search: PolicyPattern.Search?
    /// The key set whose secret the transformation reads: `Hash`'s `randomizerSecret`.
    package var secretKeySet: String? { method == "Hash" ? parameters["randomizerSecret"]?.value : nil }

    init(_ element: PolicyElement) {
        id = element["Id"] ?? ""
        method = element["TransformationMethod"] ?? ""
        inputClaims = PolicyClaimReference.list(element, "InputClaims", "InputClaim")
        var parameters: [String: (String, String)] = [:]
        var order: [String] = []
        for parameter in element.items("InputParameters", "InputParameter") {
            guard let id = parameter["Id"] else { continue }
            if parameters[id] == nil { order.append(id) }
            parameters[id] = (parameter["DataType"] ?? "string", parameter["Value"] ?? "")
        }
        self.parameters = parameters
        parameterOrder = order
        outputClaims = PolicyClaimReference.list(element, "OutputClaims", "OutputClaim")
        search = method == "SetClaimsIfRegexMatch" ? PolicyPattern.Search(parameters["matchTo"]?.1 ?? "") : nil
    }
}

/// A content definition: which hosted page a step shows (by its data URI's contract).
struct PolicyContentDefinition: Sendable, PolicyIdentified {
    let id: String
    let dataURI: String
    /// `LocalizedResourcesReferences`: the resources each language reads, in document order.
    let localizedResources: [(language: String, id: String)]

    init(_ element: PolicyElement) {
        id = element["Id"] ?? ""
        dataURI = element.child("DataUri")?.text ?? ""
        localizedResources = element.items("LocalizedResourcesReferences", "LocalizedResourcesReference").compactMap { reference in
            guard let language = reference["Language"], let id = reference["LocalizedResourcesReferenceId"] else { return nil }
            return (language, id)
        }
    }

    /// `urn:com:microsoft:aad:b2c:elements:contract:unifiedssp:2.1.5` → `unifiedssp`.
    var pageContract: String {
        let parts = dataURI.lowercased().split(separator: ":")
        if let index = parts.firstIndex(of: "contract"), index + 1 < parts.count { return String(parts[index + 1]) }
        // The older form: `urn:com:microsoft:aad:b2c:elements:unifiedssp:1.0.0`.
        return parts.count >= 2 ? String(parts[parts.count - 2]) : ""
    }
}

/// A compiled policy as a flow carries it; two are the same when they are the same policy.
package struct CustomPolicyProgram: Sendable, Equatable {
    package let policy: CompiledPolicy
    package init(policy: CompiledPolicy) { self.policy = policy }
    package static func == (a: Self, b: Self) -> Bool { a.policy.id == b.policy.id }
}
