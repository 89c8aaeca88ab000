import Foundation
import Hummingbird
import TrustFramework

/// The pages of a custom policy's steps, with B2C's element ids (`signInName`, `password`,
/// `next`, `createAccount`, `email_ver_but_send`, `email_ver_input`, `email_ver_but_verify`,
/// `continue`, and each claim type's id for its input).
extension PolicyStep {
    /// - Parameter typed: the sign-in name the person just typed, kept on the page after a refused
    ///   sign-in as B2C keeps it (the journey itself keeps nothing a failed sign-in read).
    func unifiedPage(_ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok, typed: String? = nil) throws -> Response {
        let claims = run.state.policyClaims ?? PolicyClaims()
        let localized = policy.pageStrings(contentDefinition: step.contentDefinition, uiLocales: run.authorization.uiLocales)
        let overrides = localized.pageOverrides
        var values: [String: Any] = [
            "title": overrides["signin_title"] ?? run.text("signin_title"), "action": run.url(.unified),
            "signInName": typed ?? claims.text("signInName") ?? run.authorization.loginHint ?? "",
            "signInNameLabel": localized.claim("signInName", "DisplayName") ?? overrides["email"] ?? policy.claimType("signInName")?.displayName
                ?? run.text("email"),
            "signUp": signInProfileOffersSignUp,
            // A `ClaimsProviderSelection` step, or a combined step without a local sign-in
            // exchange (the social-only starter pack), is the providers' buttons and nothing else.
            "selectionOnly": step.kind == .claimsProviderSelection || signInProfile == nil,
        ]
        if let error { values["error"] = error }
        if run.authorization.protocolFace.dialect.handsPasswordResetToApp { values["forgotURL"] = run.url(.forgotPassword) }
        // A button per provider the step's selections target, with the exchange's id as B2C's.
        let providers: [[String: Any]] = providerExchanges.compactMap { exchange in
            targetProfile(exchange).map { ["id": exchange, "name": $0.displayName ?? $0.id] }
        }
        if !providers.isEmpty {
            values["hasProviders"] = true
            values["providers"] = providers
        }
        return try run.page(.unified, values, status: status, strings: overrides, language: localized.language)
    }

    private var signInProfileOffersSignUp: Bool {
        step.exchanges.contains { policy.profile($0.profile)?.metadata["SignUpTarget"] != nil }
    }

    func selfAssertedPage(_ profile: PolicyTechnicalProfile, _ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok)
        async throws -> Response
    {
        let claims = run.state.policyClaims ?? PolicyClaims()
        let localized = policy.pageStrings(contentDefinition: profile.metadata["ContentDefinitionReferenceId"], uiLocales: run.authorization.uiLocales)
        var values: [String: Any] = ["title": profile.displayName ?? run.text("signup_title"), "action": run.url(.selfAsserted)]
        if let error { values["error"] = error }
        if let claim = PolicyProfileRunner.verifiedEmailClaim(profile) {
            let label = localized.claim(claim, "DisplayName") ?? policy.claimType(claim)?.displayName ?? run.text("email")
            if let verified = run.claims.verifiedEmail {
                values["verifiedEmail"] = ["claim": claim, "label": label, "email": verified]
                values["showForm"] = true
            } else {
                var verification: [String: Any] = ["claim": claim, "label": label]
                if let pending = run.claims.pendingEmail {
                    verification["stepCode"] = true
                    verification["email"] = pending
                    if let outbox = run.outboxURL { verification["outboxURL"] = outbox }
                } else {
                    verification["stepEmail"] = true
                    verification["email"] = claims.text(claim) ?? ""
                }
                values["verification"] = verification
            }
        } else {
            values["showForm"] = true
        }
        let fields = PolicyProfileRunner.fields(profile, policy)
        let masked = try await Self.masked(fields.map(\.1), claims)
        values["fields"] = fields.map { reference, type in
            var shown = field(type, required: reference.required, value: claims, localized: localized)
            if let value = masked[type.id] { shown["value"] = value }
            return shown
        }
        return try run.page(.selfAsserted, values, status: status, strings: localized.pageOverrides, language: localized.language)
    }

    /// The values of the fields a person cannot edit (`Readonly`, `Paragraph`) whose claim type
    /// has a `Mask`, as the mask shows them; the page carries nothing else of them. An editable
    /// field shows its value as it is, since what the page posts back is what the claim becomes.
    /// Regular-expression masks run on the pattern threads within one budget.
    static func masked(_ types: [PolicyClaimType], _ claims: PolicyClaims) async throws -> [String: String] {
        let wanted = types.compactMap { type -> (String, PolicyMask, String)? in
            guard let mask = type.mask, type.userInputType == "Readonly" || type.userInputType == "Paragraph",
                let value = claims.text(type.id), !value.isEmpty
            else { return nil }
            return (type.id, mask, value)
        }
        guard !wanted.isEmpty else { return [:] }
        return try await PatternThreads.run {
            let budget = PolicyPattern.Budget()
            var shown: [String: String] = [:]
            for (id, mask, value) in wanted { shown[id] = mask.apply(to: value, budget: budget) }
            return shown
        }
    }

    /// A claim type's input, by its `UserInputType`; its label, help and options in the page's
    /// language where the policy localizes them.
    private func field(_ type: PolicyClaimType, required: Bool, value claims: PolicyClaims, localized: PolicyPageStrings) -> [String: Any] {
        let secret = type.userInputType == "Password"
        let current = secret ? "" : (claims.text(type.id) ?? "")
        let label = localized.claim(type.id, "DisplayName") ?? type.displayName
        var field: [String: Any] = ["id": type.id, "label": label, "required": required, "value": current]
        if let help = localized.claim(type.id, "UserHelpText") ?? type.userHelpText { field["help"] = help }
        let options = localized.options(type.id) ?? type.enumeration.map { (text: $0.text, value: $0.value) }
        // While the claim has no value, the items marked `SelectByDefault` are selected.
        let defaults = claims[type.id] == nil ? (localized.selectedByDefault(type.id) ?? type.selectedByDefault) : []
        switch type.userInputType {
        case "Paragraph": field["paragraph"] = true
        case "RadioSingleSelect" where !options.isEmpty, "CheckboxMultiSelect" where !options.isEmpty:
            // B2C's markup: one input per item, named by the claim, its id `{claim}_{value}`.
            let multiple = type.userInputType == "CheckboxMultiSelect"
            let chosen: Set<String>
            if case .collection(let items)? = claims[type.id] { chosen = Set(items) } else { chosen = defaults.isEmpty ? [current] : Set(multiple ? defaults : [defaults[0]]) }
            field[multiple ? "checkboxes" : "radio"] = true
            field["options"] = options.map { option -> [String: Any] in
                ["text": option.text, "value": option.value, "name": type.id, "id": "\(type.id)_\(option.value)",
                 "selected": chosen.contains(option.value)]
            }
        case "DropdownSingleSelect" where !options.isEmpty:
            field["select"] = true
            let selected = defaults.first ?? current
            field["options"] = options.map { ["text": $0.text, "value": $0.value, "selected": $0.value == selected] }
        case _ where type.dataType == .boolean:
            field["checkbox"] = true
            field["checked"] = claims.bool(type.id) == true
        default:
            field["input"] = true
            field["readonly"] = type.userInputType == "Readonly"
            field["inputType"] =
                switch type.userInputType {
                case "Password": "password"
                case "EmailBox": "email"
                case "DateTimeDropdown": "date"
                default: "text"
                }
            field["autocomplete"] = secret ? "new-password" : "off"
        }
        return field
    }
}
