import Foundation
import IdentityDirectory
import TrustFramework

/// Gives the journey a flow runs.
package protocol JourneyProvider: Sendable {
    func journey(for flow: UserFlow) -> Journey
    /// The password grant's journey.
    var passwordGrant: Journey { get }
}

extension JourneyProvider {
    /// Native authentication's password sign-in (SPEC §2.15): the password grant's journey
    /// without its consent step. External ID has a native app's permissions consented by an
    /// admin (the registration's granted permissions): there is no page to ask a user on.
    package var nativePasswordSignIn: Journey {
        Journey(name: "NativeAuthenticationSignIn", steps: passwordGrant.steps.filter { $0.id != "Consent" })
    }

    /// Native authentication's sign-in once the API has proven the account itself (an email
    /// code, or a sign-up's or reset's continuation token): the same journey without the
    /// password step, so a second factor and a forced password change hold as for every sign-in.
    package var nativeProvenSignIn: Journey {
        Journey(name: "NativeAuthenticationContinuation", steps: nativePasswordSignIn.steps.filter { $0.id != "login-NonInteractive" })
    }
}

/// An account authenticated outside the journey's own steps (``JourneyEngine/runWithoutPages``).
package struct ProvenAccount: Sendable {
    package var user: UserAccount
    package var newUser: Bool
    package var secondFactorPassed: Bool

    package init(user: UserAccount, newUser: Bool, secondFactorPassed: Bool) {
        self.user = user
        self.newUser = newUser
        self.secondFactorPassed = secondFactorPassed
    }
}

/// The journeys of the built-in user flows, as B2C defines them on its own engine: each flow
/// type is an ordered list of steps, each step's preconditions deciding whether it runs for a
/// given sign-in. The steps are made once, each with only the collaborators it uses; this is
/// the one place that knows them all.
package struct JourneyCatalog: JourneyProvider {
    let singleSignOn: SingleSignOnStep
    let identityChoice: IdentityChoiceStep
    let localSignUp: LocalSignUpStep
    let federation: FederationStep
    let federatedAccount: FederatedAccountStep
    let emailVerification: EmailVerificationStep
    let secondFactor: SecondFactorStep
    let forcedPasswordChange: ForcedPasswordChangeStep
    let newPassword: NewPasswordStep
    let profileEdit: ProfileEditStep
    let consent: ConsentStep
    let tokenIssuance: TokenIssuanceStep
    let passwordCredentials: PasswordCredentialsStep
    /// Runs custom policies' technical profiles.
    let policyProfiles: PolicyProfileRunner
    /// Present where the development surface is on.
    let developmentFault: DevelopmentFaultStep?

    init(service: IdentityService, sessions: SingleSignOnSessions) {
        let configuration = service.configuration
        let extensions = PageExtensions(calls: service.extensions, tenants: service.tenants)
        let mailer = VerificationMailer(interactions: service.interactions, limits: configuration.codeLimits, extensions: extensions)
        let connector = ConnectorCall(connectors: service.connectors)
        let cookies = BrowserCookies(secure: configuration.secureCookies)
        singleSignOn = SingleSignOnStep(sessions: sessions)
        identityChoice = IdentityChoiceStep(passwords: service.passwords)
        localSignUp = LocalSignUpStep(users: service.users, hasher: service.hasher, mailer: mailer, connector: connector, extensions: extensions)
        federation = FederationStep(upstream: service.upstream)
        federatedAccount = FederatedAccountStep(users: service.users, connector: connector, extensions: extensions)
        emailVerification = EmailVerificationStep(users: service.users, mailer: mailer)
        secondFactor = SecondFactorStep(secondFactors: service.secondFactors, cookies: cookies)
        forcedPasswordChange = ForcedPasswordChangeStep(users: service.users, hasher: service.hasher)
        newPassword = NewPasswordStep(users: service.users, hasher: service.hasher)
        profileEdit = ProfileEditStep(users: service.users)
        consent = ConsentStep(tenants: service.tenants, consents: service.consents, sessions: sessions)
        tokenIssuance = TokenIssuanceStep(
            tenants: service.tenants, interactions: service.interactions, grants: service.grants, connectors: service.connectors,
            issuer: service.issuer, extensions: extensions, sessions: sessions, codeLifetime: configuration.codeLifetime)
        passwordCredentials = PasswordCredentialsStep(passwords: service.passwords)
        policyProfiles = PolicyProfileRunner(
            directory: PolicyDirectoryProvider(users: service.users, hasher: service.hasher, passwords: service.passwords),
            restful: PolicyRestfulProvider(keySets: service.policyKeySets, certificateClients: service.certificateClients), mailer: mailer,
            federation: PolicyFederation(upstream: service.upstream, keySets: service.policyKeySets, dataKey: service.dataKey),
            hints: PolicyIdTokenHint(keySets: service.policyKeySets, upstream: service.upstream.directory, dataKey: service.dataKey))
        developmentFault = configuration.developmentMailbox ? DevelopmentFaultStep(faults: service.faults) : nil
    }

    /// The journey of `flow`'s type. Order is the rule: whoever the person turns out to be, the
    /// second factor comes before anything done for the account, and the tokens come last.
    package func journey(for flow: UserFlow) -> Journey {
        let journey = builtIn(for: flow)
        guard let developmentFault else { return journey }
        return Journey(name: journey.name, steps: [developmentFault] + journey.steps)
    }

    /// The password grant's journey: no pages, so each step that would ask the person something
    /// fails in the protocol's form instead (a second factor, a temporary password, consent);
    /// the token endpoint issues once it has run.
    package var passwordGrant: Journey {
        Journey(name: "ResourceOwnerPasswordCredentials", steps: [passwordCredentials, secondFactor, forcedPasswordChange, consent])
    }

    private func builtIn(for flow: UserFlow) -> Journey {
        if let program = flow.customPolicy { return custom(program.policy) }
        return switch flow.type {
        case .signUpOrSignIn, .signIn, .signUp:
            Journey(
                name: "SignUpOrSignIn",
                steps: [
                    singleSignOn, identityChoice, localSignUp, federation, federatedAccount, secondFactor, forcedPasswordChange,
                    consent, tokenIssuance,
                ])
        case .profileEdit:
            Journey(
                name: "ProfileEdit",
                steps: [
                    singleSignOn, identityChoice, federation, federatedAccount, secondFactor, forcedPasswordChange, profileEdit,
                    consent, tokenIssuance,
                ])
        case .passwordReset:
            Journey(name: "PasswordReset", steps: [emailVerification, secondFactor, newPassword, consent, tokenIssuance])
        case .ropc:
            // The password grant runs at the token endpoint, not through pages.
            Journey(name: "ResourceOwnerPasswordCredentials", steps: [])
        }
    }

    /// A custom policy's default user journey: each orchestration step on the engine, its
    /// `SendClaims` the token issuance (with the relying party's claims). The engine's rules
    /// hold as for every journey: tokens only for a known, enabled account.
    private func custom(_ policy: CompiledPolicy) -> Journey {
        guard let party = policy.relyingParty, let journey = policy.journey(party.defaultJourney) else {
            return Journey(name: policy.id, steps: [])
        }
        // An operator's temporary password is replaced before any token, as in every flow
        // (``expanded`` puts the change before each token issuance).
        var ordered = expanded(journey, policy, prefix: journey.id, invokers: [], depth: 0)
        if !ordered.contains(where: { $0.id == forcedPasswordChange.id }) { ordered.append(forcedPasswordChange) }
        // A policy whose pages keep their session (B2C's session providers) signs a browser with a
        // live session in without asking, as B2C replays a session's claims.
        let remembers = journey.steps.contains { step in
            step.exchanges.contains { exchange in policy.profile(exchange.profile).map(policy.remembersSession) ?? false }
        }
        if remembers { ordered.insert(singleSignOn, at: 0) }
        return Journey(name: journey.id, steps: ordered)
    }

    /// The engine's steps of `journey`, each `InvokeSubJourney` step followed by its
    /// sub-journey's steps (ids `Journey#2/Sub#1`), which run only when the journey entered the
    /// invocation (its preconditions held when the journey reached it). A `Transfer` sub-journey
    /// ends the journey (its `SendClaims`): one that runs out of steps without doing so fails
    /// rather than return to its caller. A JWT issuer's `SendClaims` is token issuance. The upload
    /// refused cycles and journeys of more than ``PolicyCheck/maximumExpandedSteps`` steps; the
    /// depth limit stands behind that.
    private func expanded(_ journey: PolicyUserJourney, _ policy: CompiledPolicy, prefix: String, invokers: [String], depth: Int)
        -> [any OrchestrationStep]
    {
        var steps: [any OrchestrationStep] = []
        for step in journey.steps {
            switch step.kind {
            case .invokeSubJourney:
                guard depth < PolicyCheck.maximumSubJourneyDepth, let sub = step.subJourney.flatMap(policy.subJourney) else { continue }
                let invocation = PolicyStep(
                    policy: policy, journey: prefix, step: step, profiles: policyProfiles, siblings: journey.steps, invokers: invokers)
                steps.append(invocation)
                let inner = invokers + [invocation.id]
                steps += expanded(sub, policy, prefix: "\(invocation.id)/\(sub.id)", invokers: inner, depth: depth + 1)
                if sub.subJourneyType == .transfer {
                    steps.append(TransferEndStep(id: "\(invocation.id)/\(sub.id)#end", subJourney: sub.id, invokers: inner))
                }
            case .sendClaims where step.issuerProfile.flatMap(policy.profile)?.kind != .oauth2Error:
                // Each token issuance is preceded by the forced password change, under the same
                // guards: whichever `SendClaims` runs, an operator's temporary password is replaced first.
                let guarded = !step.preconditions.isEmpty || !invokers.isEmpty
                let forced: any OrchestrationStep =
                    guarded || steps.contains(where: { $0.id == forcedPasswordChange.id })
                    ? GuardedStep(inner: forcedPasswordChange, policyStep: step, invokers: invokers, renamed: "\(forcedPasswordChange.id)@\(prefix)#\(step.order)")
                    : forcedPasswordChange
                steps.append(forced)
                steps.append(guarded ? GuardedStep(inner: tokenIssuance, policyStep: step, invokers: invokers) : tokenIssuance)
            default:
                steps.append(
                    PolicyStep(policy: policy, journey: prefix, step: step, profiles: policyProfiles, siblings: journey.steps, invokers: invokers))
            }
        }
        return steps
    }
}
