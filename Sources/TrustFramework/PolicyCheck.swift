import Foundation
import WireCoding

/// The checks a policy passes at upload, as B2C makes them: each file on its own (its root, its
/// tenant, only elements of the supported set), then the effective policy of its base chain
/// (every reference resolvable, every step type, handler and transformation one this service
/// runs). Each problem names the element, its id and its line.
package enum PolicyCheck {
    /// B2C's limit on levels of inheritance ("Azure AD B2C service limits").
    package static let maximumChainLength = 10

    /// What is wrong with one file: its root attributes and the elements it uses.
    package static func file(_ root: PolicyElement, tenantName: String) -> [String] {
        var problems: [String] = []
        guard root.name == "TrustFrameworkPolicy" else {
            return ["The root element is '\(root.name)'; a policy's root is TrustFrameworkPolicy."]
        }
        if root["PolicySchemaVersion"] != "0.3.0.0" {
            problems.append("PolicySchemaVersion is '\(root["PolicySchemaVersion"] ?? "")'; it must be 0.3.0.0.")
        }
        let id = root["PolicyId"] ?? ""
        if !CustomPolicyID.isValid(id) {
            problems.append("PolicyId '\(id)' must start with B2C_1A_ and use letters, digits and underscores only.")
        }
        for (element, tenant) in [("TrustFrameworkPolicy", root["TenantId"]), ("BasePolicy", root.child("BasePolicy")?.child("TenantId")?.text)]
        where tenant != nil && tenant?.lowercased() != tenantName.lowercased() {
            problems.append("The \(element)'s TenantId '\(tenant ?? "")' is not this tenant, '\(tenantName)'.")
        }
        if root["TenantId"] == nil { problems.append("TrustFrameworkPolicy has no TenantId.") }
        if let base = root.child("BasePolicy"), base.child("PolicyId")?.text.isEmpty ?? true {
            problems.append("BasePolicy has no PolicyId.")
        }
        walk(root) { element, parent in
            guard let parent, let allowed = PolicySchema.children[parent.name] else { return }
            if !allowed.contains(element.name) {
                problems.append(
                    "The element '\(element.name)' in '\(parent.name)' (line \(element.line)) is not supported by this service.")
            }
        }
        return problems
    }

    /// What is wrong with an effective (merged) policy: references that lead nowhere, and step
    /// types, protocols, handlers, transformations or data types outside the supported set.
    package static func effective(_ policy: PolicyElement) -> [String] {
        var problems: [String] = []
        let blocks = policy.child("BuildingBlocks")
        let claimTypes = ids(blocks?.items("ClaimsSchema", "ClaimType"))
        var dataTypes: [String: PolicyClaimType.DataType] = [:]
        for claimType in blocks?.items("ClaimsSchema", "ClaimType") ?? [] {
            if let id = claimType["Id"], let type = PolicyClaimType.DataType(rawValue: claimType.child("DataType")?.text ?? "") {
                dataTypes[id.lowercased()] = type
            }
        }
        let transformations = ids(blocks?.items("ClaimsTransformations", "ClaimsTransformation"))
        let contentDefinitions = ids(blocks?.items("ContentDefinitions", "ContentDefinition"))
        let predicates = ids(blocks?.items("Predicates", "Predicate"))
        let predicateValidations = ids(blocks?.items("PredicateValidations", "PredicateValidation"))
        let profiles = (policy.child("ClaimsProviders")?.children("ClaimsProvider") ?? []).flatMap { $0.items("TechnicalProfiles", "TechnicalProfile") }
        let profileIDs = ids(profiles)
        let journeys = ids(policy.items("UserJourneys", "UserJourney"))

        func missing(_ kind: String, _ id: String?, in known: Set<String>, at element: PolicyElement) {
            guard let id, !known.contains(id.lowercased()) else { return }
            problems.append(
                "Policy '\(policy["PolicyId"] ?? "")' makes a reference to \(kind) with id '\(id)' (line \(element.line)) but neither the policy nor any of its base policies contain such an element."
            )
        }

        for claimType in blocks?.items("ClaimsSchema", "ClaimType") ?? [] {
            let type = claimType.child("DataType")?.text ?? ""
            if !PolicySchema.dataTypes.contains(type) {
                problems.append("ClaimType '\(claimType["Id"] ?? "")' has the DataType '\(type)', which is not supported by this service.")
            }
            if let pattern = claimType.child("Restriction")?.child("Pattern")?["RegularExpression"], PolicyPattern.compile(pattern) == nil {
                problems.append("ClaimType '\(claimType["Id"] ?? "")' has a Restriction Pattern that is not a valid regular expression.")
            }
            if let mask = claimType.child("Mask") {
                switch mask["Type"]?.lowercased() {
                case "simple": break
                case "regex" where (mask["Regex"] ?? "").isEmpty || PolicyPattern.Search(mask["Regex"] ?? "").expression == nil:
                    problems.append("ClaimType '\(claimType["Id"] ?? "")' has a Mask (line \(mask.line)) whose Regex is not a valid regular expression.")
                case "regex": break
                default:
                    problems.append("ClaimType '\(claimType["Id"] ?? "")' has a Mask (line \(mask.line)) of the Type '\(mask["Type"] ?? "")'; the types are Simple and Regex.")
                }
            }
            for reference in claimType.children("PredicateValidationReference") {
                missing("PredicateValidation", reference["Id"], in: predicateValidations, at: reference)
            }
        }
        for predicate in blocks?.items("Predicates", "Predicate") ?? [] {
            let method = predicate["Method"] ?? ""
            if !PolicyPredicates.methods.contains(method) {
                problems.append("Predicate '\(predicate["Id"] ?? "")' uses the method '\(method)', which is not supported by this service.")
            } else if method == "MatchesRegex",
                PolicyPattern.compile(predicate.items("Parameters", "Parameter").first { $0["Id"] == "RegularExpression" }?.text ?? "") == nil
            {
                problems.append("Predicate '\(predicate["Id"] ?? "")' has a RegularExpression that is not a valid regular expression.")
            }
        }
        for validation in blocks?.items("PredicateValidations", "PredicateValidation") ?? [] {
            walk(validation) { element, _ in
                if element.name == "PredicateReference" { missing("Predicate", element["Id"], in: predicates, at: element) }
                if element.name == "PredicateReferences", element.children("PredicateReference").count > PolicyPredicates.maximumReferencesPerGroup {
                    problems.append(
                        "PredicateValidation '\(validation["Id"] ?? "")' has a group of more than \(PolicyPredicates.maximumReferencesPerGroup) PredicateReferences (line \(element.line)).")
                }
            }
        }
        for transformation in blocks?.items("ClaimsTransformations", "ClaimsTransformation") ?? [] {
            let method = transformation["TransformationMethod"] ?? ""
            if !PolicySchema.transformations.contains(method) {
                problems.append(
                    "ClaimsTransformation '\(transformation["Id"] ?? "")' uses the method '\(method)', which is not supported by this service.")
            }
            if method == "SetClaimsIfRegexMatch",
                PolicyPattern.Search(transformation.items("InputParameters", "InputParameter").first { $0["Id"] == "matchTo" }?["Value"] ?? "")
                    .expression == nil
            {
                problems.append("ClaimsTransformation '\(transformation["Id"] ?? "")' has a matchTo that is not a valid regular expression.")
            }
            for claim in transformation.items("InputClaims", "InputClaim") + transformation.items("OutputClaims", "OutputClaim") {
                missing("ClaimType", claim["ClaimTypeReferenceId"], in: claimTypes, at: claim)
            }
            problems += TransformationSignatures.problems(transformation) { id in
                dataTypes[id.lowercased()]
            }
        }
        for profile in profiles {
            let id = profile["Id"] ?? ""
            let protocolElement = profile.child("Protocol")
            if let name = protocolElement?["Name"] {
                if !PolicySchema.protocols.contains(name) {
                    problems.append("TechnicalProfile '\(id)' uses the protocol '\(name)', which is not supported by this service.")
                } else if name == "Proprietary" {
                    let handler = Self.handlerName(protocolElement?["Handler"])
                    if !PolicySchema.handlers.contains(handler) {
                        problems.append(
                            "TechnicalProfile '\(id)' uses the handler '\(protocolElement?["Handler"] ?? "")', which is not supported by this service.")
                    }
                }
            }
            let metadata = Dictionary(profile.items("Metadata", "Item").compactMap { item in item["Key"].map { ($0, item.text) } }) { a, _ in a }
            let partners = Set(profile.items("InputClaims", "InputClaim").compactMap { $0["PartnerClaimType"] ?? $0["ClaimTypeReferenceId"] })
            // `login-NonInteractive` (a username and a password sent) is the in-process password
            // check, not a provider the browser goes to.
            if protocolElement?["Name"] == "OpenIdConnect", !(partners.contains("username") && partners.contains("password")) {
                // What a base may leave to the file built on it (the client id, the metadata URL)
                // is checked when the profile runs; a value that is present is checked now.
                if let problem = Self.openIDConnectProblem(id: id, metadata: metadata, complete: false) { problems.append(problem) }
            }
            if protocolElement?["Name"] == "OAuth2" {
                if let problem = Self.oAuth2Problem(id: id, metadata: metadata, complete: false) { problems.append(problem) }
            }
            if Self.handlerName(protocolElement?["Handler"]) == "RestfulProvider" {
                let sendsIn = (metadata["SendClaimsIn"] ?? "Body").lowercased()
                let serviceURL = metadata["ServiceUrl"] ?? ""
                if !OutboundURLRule.isAllowed(sendsIn == "url" ? RestfulURL.template(serviceURL) : serviceURL) {
                    problems.append("TechnicalProfile '\(id)' needs a ServiceUrl that is https (or http on loopback) without credentials.")
                }
                if sendsIn == "url", RestfulURL.placeholderBeforePath(serviceURL) {
                    problems.append("TechnicalProfile '\(id)' has a claim in the host of its ServiceUrl; with SendClaimsIn Url, claims go in the path and the query only.")
                }
                if sendsIn == "header" {
                    for claim in profile.items("InputClaims", "InputClaim") {
                        let name = (claim["PartnerClaimType"] ?? claim["ClaimTypeReferenceId"] ?? "").lowercased()
                        if !Self.isClaimHeaderName(name) {
                            problems.append("TechnicalProfile '\(id)' sends the claim '\(claim["ClaimTypeReferenceId"] ?? "")' (line \(claim.line)) in a header named '\(name)', which a request cannot carry.")
                        }
                    }
                }
                let authentication = (metadata["AuthenticationType"] ?? "None").lowercased()
                if !["none", "basic", "bearer", "clientcertificate"].contains(authentication) {
                    problems.append("TechnicalProfile '\(id)' uses the AuthenticationType '\(metadata["AuthenticationType"] ?? "")', which is not supported by this service.")
                }
                if authentication == "clientcertificate", !(metadata["ServiceUrl"] ?? "").lowercased().hasPrefix("https://") {
                    problems.append("TechnicalProfile '\(id)' presents a client certificate, which needs a ServiceUrl that is https.")
                }
                if !["body", "form", "querystring", "url", "header"].contains(sendsIn) {
                    problems.append("TechnicalProfile '\(id)' sends claims in '\(metadata["SendClaimsIn"] ?? "")', which is not supported by this service.")
                }
            }
            for container in ["InputClaims", "OutputClaims", "PersistedClaims", "DisplayClaims"] {
                for claim in profile.child(container)?.children ?? [] {
                    missing("ClaimType", claim["ClaimTypeReferenceId"], in: claimTypes, at: claim)
                }
            }
            // A display control (verification, TOTP, CAPTCHA) is the next issue's: refused by
            // name until it runs, never silently left off the page.
            for claim in profile.child("DisplayClaims")?.children ?? [] {
                if let control = claim["DisplayControlReferenceId"] {
                    problems.append(
                        "TechnicalProfile '\(id)' shows the display control '\(control)' (line \(claim.line)), which is not supported by this service.")
                } else if claim["ClaimTypeReferenceId"] == nil {
                    problems.append("A DisplayClaim of TechnicalProfile '\(id)' (line \(claim.line)) names no ClaimTypeReferenceId.")
                }
            }
            for container in ["InputClaimsTransformations", "OutputClaimsTransformations"] {
                for reference in profile.child(container)?.children ?? [] {
                    missing("ClaimsTransformation", reference["ReferenceId"], in: transformations, at: reference)
                }
            }
            for reference in profile.items("ValidationTechnicalProfiles", "ValidationTechnicalProfile")
                + profile.children("IncludeTechnicalProfile") + profile.children("UseTechnicalProfileForSessionManagement")
            {
                missing("TechnicalProfile", reference["ReferenceId"], in: profileIDs, at: reference)
            }
            for item in profile.items("Metadata", "Item") where item["Key"] == "ContentDefinitionReferenceId" {
                missing("ContentDefinition", item.text, in: contentDefinitions, at: item)
            }
        }
        let subJourneys = ids(policy.items("SubJourneys", "SubJourney"))
        for journey in policy.items("UserJourneys", "UserJourney") {
            missing("TechnicalProfile", journey["DefaultCpimIssuerTechnicalProfileReferenceId"], in: profileIDs, at: journey)
        }
        problems += subJourneyProblems(policy)
        for journey in policy.items("UserJourneys", "UserJourney") + policy.items("SubJourneys", "SubJourney") {
            for step in journey.items("OrchestrationSteps", "OrchestrationStep") {
                let type = step["Type"] ?? ""
                if !PolicySchema.stepTypes.contains(type) {
                    problems.append(
                        "OrchestrationStep \(step["Order"] ?? "?") of \(journey.name) '\(journey["Id"] ?? "")' has the type '\(type)', which is not supported by this service.")
                }
                let candidates = step.items("JourneyList", "Candidate")
                if type == "InvokeSubJourney", candidates.count != 1 {
                    problems.append(
                        "OrchestrationStep \(step["Order"] ?? "?") of \(journey.name) '\(journey["Id"] ?? "")' (line \(step.line)) must name exactly one sub-journey in its JourneyList.")
                }
                for candidate in candidates { missing("SubJourney", candidate["SubJourneyReferenceId"], in: subJourneys, at: candidate) }
                missing("ContentDefinition", step["ContentDefinitionReferenceId"], in: contentDefinitions, at: step)
                missing("TechnicalProfile", step["CpimIssuerTechnicalProfileReferenceId"], in: profileIDs, at: step)
                if type == "SendClaims", step["CpimIssuerTechnicalProfileReferenceId"] == nil, journey["DefaultCpimIssuerTechnicalProfileReferenceId"] == nil,
                    journey.name == "UserJourney"
                {
                    problems.append("OrchestrationStep \(step["Order"] ?? "?") of UserJourney '\(journey["Id"] ?? "")' (line \(step.line)) sends claims but names no issuer.")
                }
                for exchange in step.items("ClaimsExchanges", "ClaimsExchange") {
                    missing("TechnicalProfile", exchange["TechnicalProfileReferenceId"], in: profileIDs, at: exchange)
                }
                for precondition in step.items("Preconditions", "Precondition") {
                    if !PolicySchema.preconditionTypes.contains(precondition["Type"] ?? "") {
                        problems.append("A Precondition (line \(precondition.line)) has the type '\(precondition["Type"] ?? "")', which is not supported by this service.")
                    }
                    if let action = precondition.child("Action")?.text, !PolicySchema.preconditionActions.contains(action) {
                        problems.append("A Precondition (line \(precondition.line)) has the action '\(action)', which is not supported by this service.")
                    }
                    if let claim = precondition.children("Value").first?.text { missing("ClaimType", claim, in: claimTypes, at: precondition) }
                }
            }
        }
        if let party = policy.child("RelyingParty") {
            problems += unsignedIssuers(policy, profiles: profiles)
            problems += idTokenHintProblems(policy, profiles: profiles)
            missing("UserJourney", party.child("DefaultUserJourney")?["ReferenceId"], in: journeys, at: party)
            for endpoint in party.items("Endpoints", "Endpoint") {
                missing("UserJourney", endpoint["UserJourneyReferenceId"], in: journeys, at: endpoint)
            }
            for claim in party.child("TechnicalProfile")?.items("OutputClaims", "OutputClaim") ?? [] {
                missing("ClaimType", claim["ClaimTypeReferenceId"], in: claimTypes, at: claim)
            }
        }
        return problems
    }

    /// `Web.TPEngine.Providers.SelfAssertedAttributeProvider, Web.TPEngine, Version=…` → `SelfAssertedAttributeProvider`.
    /// Why an OpenID Connect identity provider profile cannot run here, or nil. `complete`: the
    /// profile as it runs, whose required keys must all be there; otherwise only the values
    /// present are checked (a base policy may leave the client id to its extension).
    package static func openIDConnectProblem(id: String, metadata: [String: String], complete: Bool) -> String? {
        let suffix = "/.well-known/openid-configuration"
        if let url = metadata["METADATA"] {
            if !OutboundURLRule.isAllowed(url) || !url.hasSuffix(suffix) {
                return "TechnicalProfile '\(id)' needs a METADATA URL that is https (or http on loopback) and ends in \(suffix)."
            }
        } else if complete {
            return "TechnicalProfile '\(id)' has no METADATA."
        }
        if complete, (metadata["client_id"] ?? "").isEmpty { return "TechnicalProfile '\(id)' has no client_id." }
        // `code` (with PKCE), or B2C's default `id_token`, which comes back in a form post.
        if let types = metadata["response_types"], types != "code", types != "id_token" {
            return "TechnicalProfile '\(id)' asks for response_types '\(types)': code (with PKCE) or id_token (form_post) are served."
        }
        if (metadata["response_types"] ?? "id_token") == "id_token", let mode = metadata["response_mode"], mode != "form_post" {
            return "TechnicalProfile '\(id)' asks for an id_token with response_mode '\(mode)': an ID token comes back by form_post only."
        }
        if let method = metadata["token_endpoint_auth_method"], !["client_secret_post", "client_secret_basic"].contains(method) {
            return "TechnicalProfile '\(id)' uses the token_endpoint_auth_method '\(method)', which is not supported by this service."
        }
        return nil
    }

    /// The JWT issuers of a relying party's journeys without the `issuer_secret` key that signs
    /// their tokens: B2C requires it (jwt-issuer-technical-profile, "Cryptographic keys"), and a
    /// policy's tokens are signed with it here too. Looked for through `IncludeTechnicalProfile`.
    static func unsignedIssuers(_ policy: PolicyElement, profiles: [PolicyElement]) -> [String] {
        var byID: [String: PolicyElement] = [:]
        for profile in profiles { if let id = profile["Id"] { byID[id.lowercased()] = profile } }
        func hasSecret(_ id: String, depth: Int) -> Bool {
            guard depth < 10, let profile = byID[id.lowercased()] else { return false }
            if profile.items("CryptographicKeys", "Key").contains(where: { $0["Id"] == "issuer_secret" && !($0["StorageReferenceId"] ?? "").isEmpty }) {
                return true
            }
            return profile.child("IncludeTechnicalProfile")?["ReferenceId"].map { hasSecret($0, depth: depth + 1) } ?? false
        }
        var problems: [String] = []
        // Sub-journeys' steps too, and a journey's default issuer where a step names none.
        for journey in policy.items("UserJourneys", "UserJourney") + policy.items("SubJourneys", "SubJourney") {
            for step in journey.items("OrchestrationSteps", "OrchestrationStep") where step["Type"] == "SendClaims" {
                guard let id = step["CpimIssuerTechnicalProfileReferenceId"] ?? journey["DefaultCpimIssuerTechnicalProfileReferenceId"],
                    byID[id.lowercased()] != nil, !hasSecret(id, depth: 0)
                else { continue }
                let message = "TechnicalProfile '\(id)' issues tokens but has no CryptographicKeys Key 'issuer_secret' naming the key set that signs them."
                if !problems.contains(message) { problems.append(message) }
            }
        }
        return problems
    }

    /// Why the `GetClaims` steps of a relying party's journeys cannot run: each must name, as its
    /// `CpimIssuerTechnicalProfileReferenceId`, an `id_token_hint` profile (protocol `None`)
    /// that says how the hint is checked (id-token-hint.md): `METADATA` (https, or http on
    /// loopback), or the symmetric key's `client_secret` with `issuer` and `IdTokenAudience`.
    /// Read through `IncludeTechnicalProfile`, as the profile runs.
    static func idTokenHintProblems(_ policy: PolicyElement, profiles: [PolicyElement]) -> [String] {
        var byID: [String: PolicyElement] = [:]
        for profile in profiles { if let id = profile["Id"] { byID[id.lowercased()] = profile } }
        /// The profile's metadata, keys and protocol, its included profiles' beneath its own.
        func folded(_ id: String, depth: Int) -> (metadata: [String: String], keys: Set<String>, protocol: String?)? {
            guard depth < 10, let profile = byID[id.lowercased()] else { return nil }
            var result = profile.child("IncludeTechnicalProfile")?["ReferenceId"].flatMap { folded($0, depth: depth + 1) } ?? ([:], [], nil)
            for item in profile.items("Metadata", "Item") { if let key = item["Key"] { result.metadata[key] = item.text } }
            for key in profile.items("CryptographicKeys", "Key") where !(key["StorageReferenceId"] ?? "").isEmpty { result.keys.insert(key["Id"] ?? "") }
            if let name = profile.child("Protocol")?["Name"] { result.protocol = name }
            return result
        }
        var problems: [String] = []
        for journey in policy.items("UserJourneys", "UserJourney") + policy.items("SubJourneys", "SubJourney") {
            for step in journey.items("OrchestrationSteps", "OrchestrationStep") where step["Type"] == "GetClaims" {
                let place = "OrchestrationStep \(step["Order"] ?? "?") of \(journey.name) '\(journey["Id"] ?? "")' (line \(step.line))"
                guard let id = step["CpimIssuerTechnicalProfileReferenceId"] else {
                    problems.append("\(place) reads claims (GetClaims) but names no CpimIssuerTechnicalProfileReferenceId.")
                    continue
                }
                guard let profile = folded(id, depth: 0) else { continue }  // a missing reference is reported as such
                let message: String?
                if !PolicyTechnicalProfile.isIDTokenHint(protocol: profile.protocol, metadata: profile.metadata) {
                    message = "TechnicalProfile '\(id)' that \(place) names is not an id_token_hint profile: Protocol None with METADATA, or with IdTokenAudience, issuer and a client_secret key."
                } else if let url = profile.metadata["METADATA"] {
                    message = OutboundURLRule.isAllowed(url) ? nil : "TechnicalProfile '\(id)' needs a METADATA URL that is https (or http on loopback) without credentials."
                } else if profile.metadata["issuer"] == nil || !profile.keys.contains("client_secret") {
                    message = "TechnicalProfile '\(id)' checks a symmetric id_token_hint, which needs the issuer and IdTokenAudience metadata and a client_secret key."
                } else {
                    message = nil
                }
                if let message, !problems.contains(message) { problems.append(message) }
            }
        }
        return problems
    }

    /// Every key set a policy file names (`CryptographicKeys/Key/@StorageReferenceId` of its
    /// technical profiles), with the profile and key id that name it. B2C refuses an upload whose
    /// key set does not exist (its setup has the keys made before the starter pack uploads).
    package static func keyReferences(_ root: PolicyElement) -> [(profile: String, key: String, keySet: String)] {
        var found: [(profile: String, key: String, keySet: String)] = []
        walk(root) { element, _ in
            guard element.name == "TechnicalProfile" else { return }
            for key in element.items("CryptographicKeys", "Key") {
                guard let keySet = key["StorageReferenceId"], !keySet.isEmpty else { continue }
                found.append((element["Id"] ?? "", key["Id"] ?? "", keySet))
            }
        }
        return found
    }

    /// Why a plain OAuth 2.0 identity provider profile cannot run here, or nil; `complete` as for
    /// ``openIDConnectProblem(id:metadata:complete:)``. Facebook's profile is answered by the
    /// simulated Facebook and not checked here.
    package static func oAuth2Problem(id: String, metadata: [String: String], complete: Bool) -> String? {
        if isFacebook(metadata) { return nil }
        if metadata["METADATA"] != nil {
            return "TechnicalProfile '\(id)' is an OAuth2 profile with METADATA: a plain OAuth 2.0 provider is named by its endpoints (an OpenID Connect one is Protocol OpenIdConnect)."
        }
        for key in ["authorization_endpoint", "AccessTokenEndpoint", "ClaimsEndpoint"] {
            if let url = metadata[key] {
                if !OutboundURLRule.isAllowed(url) { return "TechnicalProfile '\(id)' needs a \(key) that is https (or http on loopback)." }
            } else if complete {
                return "TechnicalProfile '\(id)' has no \(key)."
            }
        }
        if complete, (metadata["client_id"] ?? "").isEmpty { return "TechnicalProfile '\(id)' has no client_id." }
        let served: [(key: String, values: Set<String>)] = [
            ("response_types", ["code"]), ("AccessTokenResponseFormat", ["json"]), ("HttpBinding", ["get", "post"]),
            ("BearerTokenTransmissionMethod", ["authorizationheader", "querystring"]),
            ("token_endpoint_auth_method", ["client_secret_post", "client_secret_basic"]),
        ]
        for (key, values) in served {
            if let value = metadata[key], !values.contains(value.lowercased()) {
                return "TechnicalProfile '\(id)' sets \(key) to '\(value)', which is not supported by this service."
            }
        }
        return nil
    }

    /// Whether OAuth2 metadata describes Facebook (`ProviderName` facebook or its endpoints).
    package static func isFacebook(_ metadata: [String: String]) -> Bool {
        let host = metadata["authorization_endpoint"].flatMap { URLComponents(string: $0)?.host?.lowercased() } ?? ""
        return metadata["ProviderName"]?.lowercased() == "facebook" || host == "facebook.com" || host.hasSuffix(".facebook.com")
    }

    static func handlerName(_ handler: String?) -> String {
        let type = handler?.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        return type.split(separator: ".").last.map(String.init) ?? ""
    }

    /// Ids lower-cased: B2C resolves references without regard to case (Microsoft's own starter
    /// pack refers to the claim type `surname` as `surName`).
    private static func ids(_ elements: [PolicyElement]?) -> Set<String> { Set((elements ?? []).compactMap { $0["Id"]?.lowercased() }) }

    /// Visits every element under `root` with its parent, depth first.
    static func walk(_ root: PolicyElement, _ visit: (PolicyElement, PolicyElement?) -> Void) {
        var pending: [(PolicyElement, PolicyElement?)] = [(root, nil)]
        while let (element, parent) = pending.popLast() {
            visit(element, parent)
            for child in element.children.reversed() { pending.append((child, element)) }
        }
    }
}

/// A custom policy's id: `B2C_1A_` and letters, digits and underscores (B2C adds the prefix in
/// the portal and requires it in the XML).
package enum CustomPolicyID {
    static let prefix = "B2C_1A_"

    package static func isValid(_ id: String) -> Bool {
        id.count <= 128 && id.uppercased().hasPrefix(prefix) && id.count > prefix.count
            && id.unicodeScalars.allSatisfy { ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || $0 == "_" }
    }

    /// Whether a policy path segment (`B2C_1A_…`, any case) names a custom policy.
    package static func names(_ segment: String) -> Bool { segment.uppercased().hasPrefix(prefix) }
}

extension PolicyCheck {
    /// How deep sub-journeys may invoke sub-journeys.
    package static let maximumSubJourneyDepth = 8
    /// The most steps a journey may have with its sub-journeys written out: each invocation
    /// repeats its sub-journey, so a few of them in a chain could otherwise multiply to millions.
    package static let maximumExpandedSteps = 1000

    /// A sub-journey of a `Type` other than `Call` or `Transfer`; sub-journeys that invoke one
    /// another in a cycle, or more than ``maximumSubJourneyDepth`` deep; a journey of more than
    /// ``maximumExpandedSteps`` steps with its sub-journeys written out. Each sub-journey is
    /// visited once (a depth-first walk that remembers what it finished).
    static func subJourneyProblems(_ policy: PolicyElement) -> [String] {
        var problems: [String] = []
        var invokes: [String: [String]] = [:]
        var ownSteps: [String: Int] = [:]
        var names: [String: String] = [:]
        for sub in policy.items("SubJourneys", "SubJourney") {
            guard let id = sub["Id"]?.lowercased() else { continue }
            names[id] = sub["Id"]
            if !["Call", "Transfer"].contains(sub["Type"] ?? "") {
                problems.append("SubJourney '\(sub["Id"] ?? "")' (line \(sub.line)) has the Type '\(sub["Type"] ?? "")'; the types are Call and Transfer.")
            }
            let steps = sub.items("OrchestrationSteps", "OrchestrationStep")
            invokes[id] = steps.flatMap { $0.items("JourneyList", "Candidate") }.compactMap { $0["SubJourneyReferenceId"]?.lowercased() }
            ownSteps[id] = steps.count
        }
        // Depth-first, each sub-journey finished once: its longest chain and its steps written out.
        var depth: [String: Int] = [:]
        var expanded: [String: Int] = [:]
        var visiting: [String] = []
        var cyclic = false
        func visit(_ id: String) {
            if depth[id] != nil || cyclic { return }
            if let start = visiting.firstIndex(of: id) {
                let cycle = (visiting[start...] + [id]).map { names[$0] ?? $0 }.joined(separator: " → ")
                problems.append("The sub-journeys \(cycle) invoke one another in a cycle.")
                cyclic = true
                return
            }
            visiting.append(id)
            var longest = 0
            var total = ownSteps[id] ?? 0
            for next in invokes[id] ?? [] where invokes[next] != nil {
                visit(next)
                if cyclic { return }
                longest = max(longest, depth[next] ?? 0)
                total = min(total + (expanded[next] ?? 0), maximumExpandedSteps + 1)
            }
            visiting.removeLast()
            depth[id] = longest + 1
            expanded[id] = total
        }
        for id in invokes.keys.sorted() { visit(id) }
        guard !cyclic else { return problems }
        if let (id, deepest) = depth.max(by: { $0.value < $1.value }), deepest > maximumSubJourneyDepth {
            problems.append("Sub-journeys invoke one another more than \(maximumSubJourneyDepth) levels deep (from '\(names[id] ?? id)').")
        }
        for journey in policy.items("UserJourneys", "UserJourney") {
            let steps = journey.items("OrchestrationSteps", "OrchestrationStep")
            var total = steps.count
            for candidate in steps.flatMap({ $0.items("JourneyList", "Candidate") }) {
                total += candidate["SubJourneyReferenceId"].flatMap { expanded[$0.lowercased()] } ?? 0
            }
            if total > maximumExpandedSteps {
                problems.append(
                    "UserJourney '\(journey["Id"] ?? "")' has more than \(maximumExpandedSteps) steps with its sub-journeys written out.")
            }
        }
        return problems
    }
}

extension PolicyCheck {
    /// Headers a REST profile's claims may not be sent as (`SendClaimsIn` `Header`): those that
    /// frame the request or say who sends it, which the service writes itself.
    package static func isClaimHeaderName(_ name: String) -> Bool {
        !name.isEmpty && !reservedHeaders.contains(name.lowercased())
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }

    static let reservedHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "content-type", "authorization", "accept", "expect", "upgrade",
        "te", "trailer", "keep-alive", "proxy-authorization", "traceparent", "tracestate",
    ]
}
