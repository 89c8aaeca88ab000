import Foundation
import Hummingbird
import IdentityDirectory
import TrustFramework

/// Runs a custom policy's technical profiles on a journey's claims bag (SPEC §2.12): directory
/// reads and writes, the in-process password check, claims transformations, and what a
/// self-asserted page collects with its validation profiles.
struct PolicyProfileRunner: Sendable {
    let directory: PolicyDirectoryProvider
    let restful: PolicyRestfulProvider
    let mailer: VerificationMailer
    let federation: PolicyFederation
    let hints: PolicyIdTokenHint

    func resolver(_ run: JourneyRun, _ policy: CompiledPolicy) -> PolicyClaimResolver { PolicyClaimResolver(run, policyID: policy.id) }

    /// What a transformation of `profile` may read: the policy, the page's content definition
    /// (`metadata`'s, the outer page's for a validation profile) and the app's `ui_locales`.
    func context(_ run: JourneyRun, _ policy: CompiledPolicy, profile: String, metadata: [String: String] = [:]) -> ClaimsTransformationContext {
        ClaimsTransformationContext(
            now: run.now, tenantName: run.tenant.name, technicalProfileID: profile, policy: policy,
            contentDefinition: metadata["ContentDefinitionReferenceId"] ?? policy.profile(profile)?.metadata["ContentDefinitionReferenceId"],
            uiLocales: run.authorization.uiLocales)
    }

    /// Runs transformations by id on the bag; an assertion's message comes from `messages`
    /// (the metadata of the profiles running it), else B2C's default. A transformation that
    /// matches patterns runs on the pattern threads within a budget of its own, as a page's
    /// patterns do.
    func transform(_ ids: [String], _ policy: CompiledPolicy, _ claims: inout PolicyClaims, _ run: JourneyRun, profile: String,
        messages: [String: String]) async throws(PolicyProfileFailure)
    {
        var context = context(run, policy, profile: profile, metadata: messages)
        // `Hash` reads its `randomizerSecret` key set's active secret: read before, since a
        // transformation runs synchronously; a set that is missing or empty leaves it unread.
        var secrets: [String: String] = [:]
        for id in ids {
            guard let keySet = policy.transformation(id)?.secretKeySet, secrets[keySet.lowercased()] == nil,
                let secret = try? await restful.keySets.activeSecret(tenantID: run.tenant.id, keySet: keySet)
            else { continue }
            secrets[keySet.lowercased()] = secret
        }
        if !secrets.isEmpty {
            let known = secrets
            context.secret = { known[$0.lowercased()] }
        }
        // One budget for all the pattern transformations of this call, as a page's fields share one.
        var budget: PolicyPattern.Budget?
        for id in ids {
            guard let transformation = policy.transformation(id) else { continue }
            let result: Result<PolicyClaims, ClaimsTransformationFailure>
            if ClaimsTransformations.matchesPatterns(transformation) {
                if budget == nil { budget = PolicyPattern.Budget() }
                context.budget = budget
                let (given, working) = (context, claims)
                do {
                    result = try await PatternThreads.run {
                        var claims = working
                        let context = given
                        do throws(ClaimsTransformationFailure) {
                            try ClaimsTransformations.run(transformation, on: &claims, context: context)
                        } catch { return .failure(error) }
                        return .success(claims)
                    }
                } catch {
                    throw .protocolFailure(error as? ProtocolFailure ?? .temporarilyUnavailable)
                }
            } else {
                var working = claims
                do {
                    try ClaimsTransformations.run(transformation, on: &working, context: context)
                    result = .success(working)
                } catch { result = .failure(error) }
            }
            switch result {
            case .success(let changed): claims = changed
            case .failure(.assertion(let key, let message)):
                // The page's localized `ErrorMessage` first (localization.md), then the profile's metadata.
                let localized = policy.pageStrings(contentDefinition: context.contentDefinition, uiLocales: context.uiLocales).error(key)
                throw .userMessage(localized ?? messages[key] ?? message)
            case .failure(.invalidInput(let message)): throw .protocolFailure(.policyNotRunnable("Claims transformation '\(id)': \(message)"))
            }
            context.budget = nil
        }
    }

    /// Runs a profile that shows no page (a claims exchange step's, or a validation profile);
    /// returns the account it found, wrote or signed in, and whether that proves the person.
    func runWithoutPage(_ profile: PolicyTechnicalProfile, _ policy: CompiledPolicy, _ claims: inout PolicyClaims, _ run: JourneyRun,
        messages: [String: String] = [:]) async throws -> PolicyDirectoryProvider.Outcome?
    {
        let resolver = resolver(run, policy)
        resolver.applyDefaults(profile.inputClaims, to: &claims)
        let messages = messages.merging(profile.metadata) { outer, _ in outer }
        try await transform(profile.inputTransformations, policy, &claims, run, profile: profile.id, messages: messages)
        var account: PolicyDirectoryProvider.Outcome?
        switch profile.kind {
        case .directory:
            account = try await directory.run(
                profile, claims: &claims, tenant: run.tenant, now: run.now, journeyUser: run.claims.userID,
                provenEmail: run.claims.verifiedEmail, provenAlternativeSecurityIds: run.state.policyProvenAlternativeSecurityIds ?? [])
        case .identityProvider where Self.isPasswordCheck(profile):
            let user = try await directory.checkPassword(
                profile, claims: &claims, tenant: run.tenant, source: run.clientAddress, now: run.now, logger: run.logger)
            account = PolicyDirectoryProvider.Outcome(account: user, proves: true)
        case .identityProvider(let name):
            // A provider the browser goes to runs as its orchestration step's page, never as a
            // validation profile.
            throw PolicyProfileFailure.protocolFailure(
                .policyNotRunnable("The \(name) identity provider profile '\(profile.id)' can only run as a claims exchange of its own step."))
        case .restful:
            // The orchestration step's order, as B2C's AADB2C90075 names it.
            let step = run.state.stepID.flatMap { $0.split(separator: "#").last.map(String.init) } ?? ""
            try await restful.call(profile, claims: &claims, policy: policy, tenant: run.tenant, step: step)
        case .idTokenHint:
            // The app's `id_token_hint`, when it sent one; without one nothing is read, and the
            // journey's own steps decide what a missing invitation means.
            if let sealed = run.authorization.idTokenHint {
                let hint: String
                do {
                    hint = try hints.dataKey.open(sealed, context: AuthorizationRequest.idTokenHintContext).value
                } catch {
                    throw PolicyProfileFailure.protocolFailure(.idTokenHintRefused(expired: false))
                }
                try await hints.read(hint, by: profile, Self.hintClaims(profile, policy), into: &claims, policy: policy, tenant: run.tenant, now: run.now)
            }
        case .journeyContext:
            // Each output claim by its partner claim type (else its own id), from the claim
            // resolvers' values; a name the provider does not know is left to its default.
            for reference in profile.outputClaims {
                let name = (reference.partnerClaimType ?? reference.claimType).lowercased()
                guard let template = Self.journeyContext[name] else { continue }
                // The provider's time is a dateTime claim's text, not the resolver's en-US text.
                let text = name == "datetimeinutc" ? DateAndJSONTransformations.format(run.now) : resolver.resolve(template, claims: claims)
                let type = policy.claimType(reference.claimType)?.dataType ?? .string
                if let value = PolicyClaimValue.parse(text, as: type) { claims[reference.claimType] = value }
            }
        case .claimsTransformation, .jwtIssuer, .oauth2Error, .session, .selfAsserted: break
        }
        resolver.applyDefaults(profile.outputClaims, to: &claims)
        try await transform(profile.outputTransformations, policy, &claims, run, profile: profile.id, messages: messages)
        return account
    }

    /// The claims `UserJourneyContextProvider` writes, as the claim resolvers they are.
    static let journeyContext: [String: String] = [
        "ip-address": "{Context:IPAddress}", "correlationid": "{Context:CorrelationId}", "datetimeinutc": "{Context:DateTimeInUtc}",
        "build": "{Context:BuildNumber}",
    ]

    /// What an `id_token_hint` profile reads: its output claims, then the relying party's input
    /// claims it does not name (id-token-hint.md has the relying party repeat them).
    static func hintClaims(_ profile: PolicyTechnicalProfile, _ policy: CompiledPolicy) -> [PolicyClaimReference] {
        let named = Set(profile.outputClaims.map { $0.claimType.lowercased() })
        return profile.outputClaims + (policy.relyingParty?.inputClaims ?? []).filter { !named.contains($0.claimType.lowercased()) }
    }

    /// `login-NonInteractive` and its like: an OpenID Connect profile that sends a `username`
    /// and a `password`, the resource-owner call B2C makes to check a local account's password.
    static func isPasswordCheck(_ profile: PolicyTechnicalProfile) -> Bool {
        let partners = Set(profile.inputClaims.map(PolicyDirectoryProvider.property))
        return partners.contains("username") && partners.contains("password")
    }

    /// What a self-asserted page shows and collects: its `DisplayClaims` in their order where it
    /// has them ("no output claims are displayed by a self-asserted technical profile that
    /// contains at least one display claim", Microsoft's self-asserted reference), else its
    /// output claims that a person types (a claim type with a `UserInputType`); never the
    /// verified email, which has its own control.
    static func fields(_ profile: PolicyTechnicalProfile, _ policy: CompiledPolicy) -> [(PolicyClaimReference, PolicyClaimType)] {
        (profile.displayClaims ?? profile.outputClaims).compactMap { reference in
            guard reference.partnerClaimType?.lowercased() != "verified.email", let type = policy.claimType(reference.claimType), type.userInputType != nil
            else { return nil }
            return (reference, type)
        }
    }

    /// The claim a self-asserted profile proves with a code (`PartnerClaimType="Verified.Email"`).
    static func verifiedEmailClaim(_ profile: PolicyTechnicalProfile) -> String? {
        profile.outputClaims.first { $0.partnerClaimType?.lowercased() == "verified.email" }?.claimType
    }

    /// A self-asserted page's submission: the typed claims checked against their claim types,
    /// the verified email, the passwords, then the validation profiles in order. Returns the
    /// account a validation profile signed in or wrote. The claims change only when the whole
    /// submission succeeds, as in B2C: a failed one leaves nothing a validation profile read.
    func submit(_ profile: PolicyTechnicalProfile, _ policy: CompiledPolicy, _ claims: inout PolicyClaims, _ run: JourneyRun) async throws
        -> PolicyDirectoryProvider.Outcome?
    {
        var working = claims
        let outcome = try await submitting(profile, policy, &working, run)
        claims = working
        return outcome
    }

    /// The fields' patterns and predicate validations, in the fields' order, on the pattern
    /// threads within one budget for the whole submission (issue 44 M-1): the first field that
    /// fails is the page's message; a submission whose matching takes longer than the budget is
    /// refused as such.
    static func checkPatterns(
        _ fields: [(PolicyClaimReference, PolicyClaimType)], _ policy: CompiledPolicy, form: RequestParameters, now: Date = Date()
    ) async throws {
        let checked = fields.compactMap { _, type -> (PolicyClaimType, String)? in
            let raw = (form[type.id] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            guard type.pattern != nil || type.predicateValidation != nil, !raw.isEmpty, raw.count <= PolicyPattern.maximumInput,
                type.userInputType != "Readonly", type.userInputType != "Paragraph"
            else { return nil }
            return (type, raw)
        }
        guard !checked.isEmpty else { return }
        let predicates = policy.predicates
        let problem: String? = try await PatternThreads.run {
            let budget = PolicyPattern.Budget()
            do {
                for (type, raw) in checked {
                    if let pattern = type.pattern, try !PolicyPattern.matches(raw, pattern.expression, budget: budget) {
                        return pattern.helpText ?? "Please enter a valid \(type.displayName)."
                    }
                    if let validation = type.predicateValidation, let problem = try predicates.problem(with: raw, validation: validation, budget: budget, now: now) {
                        return problem
                    }
                }
                return nil
            } catch is PolicyPattern.BudgetExhausted {
                return "What you entered took too long to check. Shorten it and try again."
            }
        }
        if let problem { throw PolicyProfileFailure.userMessage(problem) }
    }

    private func submitting(_ profile: PolicyTechnicalProfile, _ policy: CompiledPolicy, _ claims: inout PolicyClaims, _ run: JourneyRun)
        async throws -> PolicyDirectoryProvider.Outcome?
    {
        let fields = Self.fields(profile, policy)
        let localized = policy.pageStrings(contentDefinition: profile.metadata["ContentDefinitionReferenceId"], uiLocales: run.authorization.uiLocales)
        try await Self.checkPatterns(fields, policy, form: run.form, now: run.now)
        // A display claim is shown and checked; only an output claim goes back to the journey
        // ("the output claims collection returns the claims to the next orchestration step").
        let returned = Set(profile.outputClaims.map { $0.claimType.lowercased() })
        let allowsNull = profile.metadata["AllowGenerationOfClaimsWithNullValues"]?.lowercased() == "true"
        for (reference, type) in fields {
            let raw = (run.form[type.id] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            if type.userInputType == "Readonly" || type.userInputType == "Paragraph" { continue }
            let keeps = profile.displayClaims == nil || returned.contains(type.id.lowercased())
            if type.userInputType == "CheckboxMultiSelect" {
                // Each box ticked is one value; every one must be an item the page offered.
                let offered = localized.options(type.id) ?? type.enumeration
                let ticked = run.form.values(type.id).filter { !$0.isEmpty }
                guard ticked.count <= offered.count, ticked.allSatisfy({ value in offered.contains { $0.value == value } }) else {
                    throw PolicyProfileFailure.userMessage("Please choose a value for \(type.displayName).")
                }
                if ticked.isEmpty, reference.required { throw PolicyProfileFailure.userMessage("\(type.displayName) is required.") }
                var seen = Set<String>()
                let unique = ticked.filter { seen.insert($0).inserted }
                guard keeps else { continue }
                if unique.isEmpty {
                    // As a text field left empty: an empty claim only where the page may generate one.
                    if allowsNull { claims[type.id] = type.dataType == .stringCollection ? .collection([]) : .string("") }
                } else {
                    // A `string` claim (claimsschema.md lists `CheckboxMultiSelect` for strings)
                    // holds the ticked values comma-separated; a `stringCollection` one each item.
                    claims[type.id] = type.dataType == .stringCollection ? .collection(unique) : .string(unique.joined(separator: ","))
                }
                continue
            }
            if raw.isEmpty {
                if reference.required { throw PolicyProfileFailure.userMessage("\(type.displayName) is required.") }
                // self-asserted-technical-profile.md, `AllowGenerationOfClaimsWithNullValues`:
                // with it, a field left empty makes the claim, empty (a prefilled value is
                // replaced); without it, B2C generates no claim and the bag keeps what it had.
                if keeps, allowsNull { claims[type.id] = .string("") }
                continue
            }
            guard raw.count <= PolicyPattern.maximumInput, raw.utf8.count <= 4 * PolicyPattern.maximumInput else { throw PolicyProfileFailure.userMessage("\(type.displayName) is too long.") }
            // The choices the page offered: the policy's localized collection where it has one.
            let offered = localized.options(type.id) ?? type.enumeration
            if !offered.isEmpty, !offered.contains(where: { $0.value == raw }) {
                throw PolicyProfileFailure.userMessage("Please choose a value for \(type.displayName).")
            }
            guard let value = PolicyClaimValue.parse(raw, as: type.dataType) else {
                throw PolicyProfileFailure.userMessage("Please enter a valid \(type.displayName).")
            }
            if keeps { claims[type.id] = value }
        }
        if let claim = Self.verifiedEmailClaim(profile) {
            guard let proven = run.claims.verifiedEmail else { throw PolicyProfileFailure.userMessage("Verify your email address first.") }
            claims[claim] = .string(proven)
        }
        // B2C's self-asserted provider checks the new password pair itself (and its complexity
        // here, where the password rules are the service's).
        if fields.contains(where: { $0.1.id.lowercased() == "newpassword" }), let problem = run.newPasswordProblem() {
            throw PolicyProfileFailure.userMessage(problem)
        }
        resolver(run, policy).applyDefaults(profile.outputClaims, to: &claims)
        try await transform(profile.outputTransformations, policy, &claims, run, profile: profile.id, messages: profile.metadata)
        var account: PolicyDirectoryProvider.Outcome?
        for validation in profile.validationProfiles {
            if validation.preconditions.contains(where: { $0.action == "SkipThisValidationTechnicalProfile" && $0.holds(in: claims) }) {
                continue
            }
            guard let validator = policy.profile(validation.profile) else { continue }
            do {
                if let found = try await runWithoutPage(validator, policy, &claims, run, messages: profile.metadata) {
                    // Two profiles of one submission proving two different people is no sign-in.
                    if let earlier = account, earlier.proves, found.proves, earlier.account.id != found.account.id {
                        throw PolicyProfileFailure.protocolFailure(.policyNotRunnable("'\(profile.id)' proved two different accounts."))
                    }
                    if account?.proves != true || found.proves { account = found }
                }
            } catch let failure as PolicyProfileFailure where validation.continueOnError {
                run.logger.debug("validation profile failed, continuing", metadata: ["profile": "\(validator.id)", "failure": "\(failure)"])
            }
            if !validation.continueOnSuccess { break }
        }
        return account
    }
}
