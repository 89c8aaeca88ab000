import Foundation
import Hummingbird
import IdentityDirectory
import TrustFramework

/// One orchestration step of a custom policy's user journey, run by the same engine as the
/// built-in flows (SPEC §2.12): `CombinedSignInAndSignUp` shows the unified page and validates
/// with its claims exchange's profile; `ClaimsExchange` runs its technical profile (a
/// self-asserted page, a directory read or write, a transformation); preconditions on the
/// claims bag skip it. `SendClaims` is the token issuance step (``JourneyCatalog``).
struct PolicyStep: OrchestrationStep {
    let policy: CompiledPolicy
    let journey: String
    let step: PolicyOrchestrationStep
    let profiles: PolicyProfileRunner
    /// The steps of the journey or sub-journey this step is in (where its page's buttons point).
    var siblings: [PolicyOrchestrationStep] = []
    /// The ids of the `InvokeSubJourney` steps this step runs under, outermost first.
    var invokers: [String] = []

    var id: String { "\(journey)#\(step.order)" }

    var pages: Set<HostedPage> {
        switch step.kind {
        case .combinedSignInAndSignUp: [.unified, .forgotPassword]
        case .claimsProviderSelection: [.unified]
        case .claimsExchange: [.selfAsserted]
        case .sendClaims, .invokeSubJourney, .getClaims: []
        }
    }

    /// Its own preconditions, under `InvokeSubJourney` steps the journey entered: skipping an
    /// invoking step skips its whole sub-journey.
    func applies(to run: JourneyRun) -> Bool {
        Self.invoked(invokers, run) && !step.skipped(for: run.state.policyClaims ?? PolicyClaims())
    }

    /// Whether the journey entered every one of `invokers` (decided when it reached each).
    static func invoked(_ invokers: [String], _ run: JourneyRun) -> Bool {
        invokers.allSatisfy { run.state.policyInvocations?.contains($0) == true }
    }

    /// The profile this step runs: the exchange a page chose (a sign-up target), else its first.
    private func profile(_ run: JourneyRun) -> PolicyTechnicalProfile? {
        let chosen = step.exchanges.first { $0.id.lowercased() == run.state.policyExchange?.lowercased() } ?? step.exchanges.first
        return chosen.flatMap { policy.profile($0.profile) }
    }

    /// The combined page's own profile: the exchange its `ValidationClaimsExchangeId` names.
    var signInProfile: PolicyTechnicalProfile? {
        let exchange = step.selections.compactMap(\.validation).first
        return (step.exchanges.first { $0.id == exchange } ?? step.exchanges.first).flatMap { policy.profile($0.profile) }
    }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        var claims = run.state.policyClaims ?? PolicyClaims()
        defer { run.state.policyClaims = claims }
        // Signed in by a live session: a page whose profile keeps its session is not asked again;
        // its session's claims (the account's object id) are replayed, as B2C replays them.
        if run.claims.sessionHash != nil, let user = run.user {
            let profile = step.kind == .combinedSignInAndSignUp ? signInProfile : profile(run)
            if let profile, profile.kind == .selfAsserted, policy.remembersSession(profile) {
                claims["objectId"] = .string(user.objectID)
                claims["authenticationSource"] = .string(user.identityProvider == .local ? "localAccountAuthentication" : "socialIdpAuthentication")
                return .next
            }
        }
        switch step.kind {
        case .invokeSubJourney:
            run.state.policyInvocations = (run.state.policyInvocations ?? []).union([id])
            return .next
        case .sendClaims:
            // The only `SendClaims` this step runs is the OAuth2 error profile's (the catalog
            // gives a JWT issuer's to token issuance): the journey ends with the policy's error.
            guard let issuer = step.issuerProfile.flatMap(policy.profile), issuer.kind == .oauth2Error else { return .next }
            profiles.resolver(run, policy).applyDefaults(issuer.inputClaims, to: &claims)
            let code = issuer.inputClaims.first { $0.claimType.lowercased() == "errorcode" }.flatMap { claims.text($0.claimType) } ?? ""
            let message = issuer.inputClaims.first { $0.claimType.lowercased() == "errormessage" }.flatMap { claims.text($0.claimType) } ?? ""
            return .fail(.policyError(code: code, message: message))
        case .getClaims:
            // The relying party's input claims from the app's `id_token_hint`, by the profile the
            // step names (id-token-hint.md); a hint that fails its checks ends the journey.
            guard let issuer = step.issuerProfile.flatMap(policy.profile) else { return .next }
            do {
                _ = try await profiles.runWithoutPage(issuer, policy, &claims, run)
            } catch PolicyProfileFailure.userMessage(let message) {
                throw PageError(status: .badRequest, title: "Something went wrong", message: message)
            } catch PolicyProfileFailure.protocolFailure(let failure) {
                return .fail(failure)
            }
            return .next
        case .combinedSignInAndSignUp:
            if let hinted = hintedExchange(run) {
                run.state.policyExchange = hinted
                return .next
            }
            if let profile = signInProfile { profiles.resolver(run, policy).applyDefaults(profile.inputClaims, to: &claims) }
            return .interact(.redirecting(to: run.url(.unified)))
        case .claimsProviderSelection:
            // B2C's identity provider selection page (`api.idpselections`): the buttons alone.
            if let hinted = hintedExchange(run) {
                run.state.policyExchange = hinted
                return .next
            }
            return providerExchanges.isEmpty ? .next : .interact(.redirecting(to: run.url(.unified)))
        case .claimsExchange:
            guard let profile = profile(run) else { return .next }
            if PolicyFederation.isFederation(profile) { return try await federate(with: profile, &run) }
            if profile.kind == .selfAsserted {
                profiles.resolver(run, policy).applyDefaults(profile.inputClaims, to: &claims)
                if let failure = try await transforming(profile.inputTransformations, of: profile, &claims, run) { return .fail(failure) }
                return .interact(.redirecting(to: run.url(.selfAsserted)))
            }
            do {
                let outcome = try await profiles.runWithoutPage(profile, policy, &claims, run)
                if let failure = signIn(outcome, &run) { return .fail(failure) }
            } catch PolicyProfileFailure.userMessage(let message) {
                throw PageError(status: .badRequest, title: "Something went wrong", message: message)
            } catch PolicyProfileFailure.protocolFailure(let failure) {
                return .fail(failure)
            }
            return .next
        }
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        switch page {
        case .unified: return .interact(try unifiedPage(run))
        case .forgotPassword:
            guard run.authorization.protocolFace.dialect.handsPasswordResetToApp else { return .interact(.redirecting(to: run.url(.unified))) }
            return .fail(.forgotPassword(loginHint: run.authorization.loginHint))
        default:
            guard let profile = profile(run), profile.kind == .selfAsserted else { throw JourneyEngine.notThisStep }
            return .interact(try await selfAssertedPage(profile, run))
        }
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        var claims = run.state.policyClaims ?? PolicyClaims()
        // Whatever the outcome, what was typed as a password is not kept with the journey.
        defer { run.state.policyClaims = claims.removingSecrets(of: policy) }
        if page == .unified {
            if run.form["action"] == "provider" {
                // A provider button: the claims exchange its `ClaimsProviderSelection` targets,
                // and only one this page offers.
                guard let exchange = run.form["exchange"], let chosen = providerExchanges.first(where: { $0.lowercased() == exchange.lowercased() })
                else { return .interact(try unifiedPage(run, error: "This identity provider is not offered here.", status: .badRequest)) }
                run.state.policyExchange = chosen
                return .next
            }
            if step.kind == .claimsProviderSelection {
                return .interact(try unifiedPage(run, error: "Choose an identity provider.", status: .badRequest))
            }
            if run.form["action"] == "signup" {
                // "Sign up now": the exchange the sign-in profile names as its `SignUpTarget`,
                // and only that; what a failed sign-in read is gone with it.
                guard let target = signInProfile?.metadata["SignUpTarget"] else {
                    return .interact(try unifiedPage(run, error: "This page does not offer sign-up.", status: .badRequest))
                }
                run.state.policyExchange = target
                return .next
            }
            guard let profile = signInProfile else { throw JourneyEngine.notThisStep }
            claims["signInName"] = (run.form["signInName"]).map(PolicyClaimValue.string)
            claims["password"] = (run.form["password"]).map(PolicyClaimValue.string)
            do {
                let outcome = try await profiles.submit(profile, policy, &claims, run)
                if let failure = signIn(outcome, &run) { return .fail(failure) }
                return .next
            } catch PolicyProfileFailure.userMessage(let message) {
                let typed = run.form["signInName"].map { String($0.prefix(256)) }
                return .interact(try unifiedPage(run, error: message, status: .badRequest, typed: typed))
            } catch PolicyProfileFailure.protocolFailure(let failure) {
                return .fail(failure)
            }
        }
        guard page == .selfAsserted, let profile = profile(run), profile.kind == .selfAsserted else { throw JourneyEngine.notThisStep }
        let reload = StepOutcome.interact(.redirecting(to: run.url(.selfAsserted), status: .seeOther))
        switch run.form["action"] {
        case "send":
            guard let claim = PolicyProfileRunner.verifiedEmailClaim(profile), let email = EmailAddress(run.form[claim] ?? "") else {
                return .interact(try await selfAssertedPage(profile, run, error: run.text("error_email"), status: .badRequest))
            }
            run.claims.pendingEmail = email.canonical
            run.claims.verifiedEmail = nil
            let current = run
            guard try await VerificationMailer.takingTheSameTime({ try await profiles.mailer.send(to: email.display, for: email.canonical, account: nil, current) })
            else { return .interact(try await selfAssertedPage(profile, run, error: run.text("error_throttled"), status: .tooManyRequests)) }
            return reload
        case "verify":
            guard let claim = PolicyProfileRunner.verifiedEmailClaim(profile), let email = run.claims.pendingEmail else { return reload }
            switch try await profiles.mailer.check(run.form["\(claim)_ver_input"] ?? "", for: email, run) {
            case .proves(account: nil): run.claims.verifiedEmail = email
            case .throttled: return .interact(try await selfAssertedPage(profile, run, error: run.text("error_tooManyCodes"), status: .tooManyRequests))
            case .proves, .refused: return .interact(try await selfAssertedPage(profile, run, error: run.text("error_codeMismatch"), status: .badRequest))
            }
            return reload
        default:
            do {
                let outcome = try await profiles.submit(profile, policy, &claims, run)
                if let failure = signIn(outcome, &run) { return .fail(failure) }
                return .next
            } catch PolicyProfileFailure.userMessage(let message) {
                return .interact(try await selfAssertedPage(profile, run, error: message, status: .badRequest))
            } catch PolicyProfileFailure.protocolFailure(let failure) {
                return .fail(failure)
            }
        }
    }

    /// The journey's user from what a profile did: an account it proved (the password check,
    /// a sign-up, the address proven with a code) signs the person in; an account it only read
    /// (by a name or id someone typed) is the journey's user only if it already was. A proof of
    /// another account than the one signed in ends the journey.
    private func signIn(_ outcome: PolicyDirectoryProvider.Outcome?, _ run: inout JourneyRun) -> ProtocolFailure? {
        guard let outcome else { return nil }
        let account = outcome.account
        if let current = run.claims.userID {
            guard current == account.id else {
                return outcome.proves ? .policyNotRunnable("The policy proved another account than the one signed in.") : nil
            }
            run.user = account
        } else if outcome.proves {
            run.claims.authenticated(account, by: account.identityProvider, at: run.now, newUser: outcome.created)
            run.user = account
        }
        return nil
    }

    /// The exchanges the page's buttons target (`ClaimsProviderSelection`
    /// `TargetClaimsExchangeId`s): on the combined page those whose profile sends the browser to
    /// a provider (the local account is the form); on a selection page, every one.
    var providerExchanges: [String] {
        step.selections.compactMap(\.target).filter { target in
            guard let profile = targetProfile(target) else { return false }
            return step.kind == .claimsProviderSelection || PolicyFederation.isFederation(profile)
        }
    }

    /// The button a `domain_hint` presses: the target whose profile's claims provider has that
    /// `Domain` (B2C's direct sign-in), so the page is not shown.
    private func hintedExchange(_ run: JourneyRun) -> String? {
        guard let hint = run.authorization.domainHint?.lowercased(), !hint.isEmpty else { return nil }
        return providerExchanges.first { target in targetProfile(target).flatMap(policy.domain(of:)) == hint }
    }

    /// The profile of the claims exchange `target` names, in any step of this journey.
    func targetProfile(_ target: String) -> PolicyTechnicalProfile? {
        let exchange = siblings.lazy.flatMap(\.exchanges).first { $0.id.lowercased() == target.lowercased() }
        return exchange.flatMap { policy.profile($0.profile) }
    }

    /// Sends the browser to the identity provider `profile` describes; its answer comes back
    /// through the federation callback to ``receive(_:_:)``.
    private func federate(with profile: PolicyTechnicalProfile, _ run: inout JourneyRun) async throws -> StepOutcome {
        // Nothing may be asked of the person: not even the provider's metadata is fetched.
        guard run.authorization.prompt != .silent else { return .fail(.noSession) }
        if profile.isFacebook, run.flow.offersFacebook {
            return .interact(.redirecting(to: SimulatedFacebook.authorizeURL(record: run.record)))
        }
        do {
            let provider = try await profiles.federation.provider(profile, tenant: run.tenant)
            let url = try await profiles.federation.upstream.authorizationURL(
                provider: provider, record: run.record, callback: UpstreamFederation.callback(for: run.record, provider: provider), now: run.now)
            return .interact(.redirecting(to: url))
        } catch let failure as PolicyProfileFailure {
            if case .protocolFailure(let failure) = failure { return .fail(failure) }
            throw failure
        } catch let failure as UpstreamOIDC.Failure {
            run.logger.warning("upstream provider unusable", metadata: ["profile": "\(profile.id)", "reason": "\(failure.message)"])
            return .fail(failure.b2cError)
        }
    }

    /// The provider's verified answer: its ID token's claims onto the profile's output claims,
    /// then the profile's output transformations. Only the provider this step sent the browser
    /// to may answer it. The `alternativeSecurityId` it yields is what later directory profiles
    /// may sign in or create by.
    func receive(_ identity: FederatedIdentity, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard step.kind == .claimsExchange, let profile = profile(run),
            PolicyFederation.isFederation(profile), PolicyFederation.answers(identity, profile)
        else { throw JourneyEngine.notThisStep }
        var claims = run.state.policyClaims ?? PolicyClaims()
        defer { run.state.policyClaims = claims }
        // Nothing from before the answer stands in for what the answer says.
        for reference in profile.outputClaims { claims.remove(reference.claimType) }
        PolicyFederation.map(identity, profile, into: &claims, policy: policy)
        profiles.resolver(run, policy).applyDefaults(profile.outputClaims, to: &claims)
        if let failure = try await transforming(profile.outputTransformations, of: profile, &claims, run) { return .fail(failure) }
        run.state.policyProvenAlternativeSecurityIds = PolicyFederation.proven(claims, by: identity, policy: policy, profile: profile)
        return .next
    }

    /// Runs `profile`'s transformations `ids` on `claims`: a failed assertion is shown as a page,
    /// any other failure is returned to end the journey with.
    private func transforming(_ ids: [String], of profile: PolicyTechnicalProfile, _ claims: inout PolicyClaims, _ run: JourneyRun)
        async throws -> ProtocolFailure?
    {
        do {
            try await profiles.transform(ids, policy, &claims, run, profile: profile.id, messages: profile.metadata)
            return nil
        } catch {
            switch error {
            case .userMessage(let message): throw PageError(status: .badRequest, title: "Something went wrong", message: message)
            case .protocolFailure(let failure): return failure
            }
        }
    }
}
