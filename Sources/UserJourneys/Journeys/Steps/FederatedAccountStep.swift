import Foundation
import Hummingbird
import IdentityDirectory

/// The account of a provider's identity (B2C's `AAD-UserReadUsingAlternativeSecurityId`, then
/// its write): the existing one, or, on first sign-in, a new one with its own object id
/// (https://github.com/MicrosoftDocs/azure-docs/issues/48396). A sign-up flow shows the attribute page first, prefilled
/// from the provider's claims, the "after federating" connector and the OnAttributeCollectionStart
/// extension, and runs the OnAttributeCollectionSubmit extension and the "before creating the
/// user" connector; only then is the account made (SPEC §2.11, §2.15).
struct FederatedAccountStep: OrchestrationStep {
    let users: any UserDirectory
    let connector: ConnectorCall
    let extensions: PageExtensions

    let id = "AAD-UserReadUsingAlternativeSecurityId"
    var pages: Set<HostedPage> { [.federated] }

    func applies(to run: JourneyRun) -> Bool { run.claims.userID == nil && run.claims.federated != nil }

    /// Whether a new federated user of `flow` goes through the attribute page first.
    static func collectsAttributes(_ flow: UserFlow) -> Bool { flow.type == .signUpOrSignIn || flow.type == .signUp }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        guard let identity = run.claims.federated else { return .next }
        if let existing = try await users.user(tenantID: run.tenant.id, provider: identity.provider, signInName: identity.subject) {
            return signedIn(existing, newUser: false, &run)
        }
        if Self.collectsAttributes(run.flow) { return .interact(.redirecting(to: run.url(.federated), status: .seeOther)) }
        var created = UserAccount(
            tenantID: run.tenant.id, identityProvider: identity.provider, signInName: identity.subject, email: identity.email,
            displayName: identity.displayName, attributes: identity.attributes, createdAt: run.now,
            // Proven only when the provider vouches for it.
            emailVerified: identity.email != nil && identity.emailVerified != false)
        // No page collects attributes here, but the extensions that gate a sign-up still decide:
        // the start's values fill what the provider left out, the submit's refusal blocks.
        if let stop = try await extensions.attributeCollectionStart(
            &run, identity: Self.startIdentity(identity), signUp: signUpInfo(identity, created.displayName, created.attributes))
        {
            run.claims.federated = nil
            return stop
        }
        Self.prefill(PageExtensions.prefill(run, identity: Self.startIdentity(identity)), displayName: &created.displayName, attributes: &created.attributes)
        switch try await extensions.attributeCollectionSubmit(run, signUp: signUpInfo(identity, created.displayName, created.attributes)) {
        case .stop(let outcome):
            run.claims.federated = nil
            return outcome
        case .refused(let message):
            run.claims.federated = nil
            return .interact(try extensions.blocked(run, message))
        case .proceed(let changed):
            if let changed {
                created.displayName = changed.displayName ?? created.displayName
                created.attributes = changed.applied(to: created.attributes)
            }
        }
        return try await create(created, &run)
    }

    /// Whom the start extension answers for: the provider's account.
    private static func startIdentity(_ pending: FederatedSignUp) -> String { "\(pending.provider.rawValue):\(pending.subject)" }

    /// A provider's sign-up as the attribute-collection extensions see it.
    private func signUpInfo(_ pending: FederatedSignUp, _ displayName: String, _ attributes: [String: String]) -> SignUpInfo {
        SignUpInfo(
            email: pending.email ?? "", displayName: displayName, attributes: attributes,
            identity: ("federated", pending.provider.rawValue, pending.subject))
    }

    /// The start extension's values where the provider gave none.
    private static func prefill(_ values: SignUpAttributeValues.Read?, displayName: inout String, attributes: inout [String: String]) {
        guard let values else { return }
        if displayName.isEmpty, let name = values.displayName { displayName = name }
        attributes.merge(values.attributes) { given, _ in given }
    }

    private func create(_ user: UserAccount, _ run: inout JourneyRun) async throws -> StepOutcome {
        do {
            try await users.create(user)
            run.logger.info("federated account created", metadata: ["oid": "\(user.objectID)", "idp": "\(user.identityProvider.rawValue)"])
            return signedIn(user, newUser: true, &run)
        } catch UserDirectoryError.duplicate {
            // The same person finished another sign-in first: that account.
            guard let existing = try await users.user(tenantID: run.tenant.id, provider: user.identityProvider, signInName: user.signInName)
            else { throw PageError(status: .internalServerError, title: "Sign-in failed", message: "The account could not be created.") }
            return signedIn(existing, newUser: false, &run)
        }
    }

    private func signedIn(_ user: UserAccount, newUser: Bool, _ run: inout JourneyRun) -> StepOutcome {
        let provider = run.claims.federated?.provider ?? user.identityProvider
        run.claims.authenticated(user, by: provider, at: run.now, newUser: newUser)
        run.claims.federated = nil
        run.user = user
        return .next
    }

    private func subject(_ pending: FederatedSignUp, displayName: String, attributes: [String: String]) -> ConnectorSubject {
        ConnectorSubject(
            email: pending.email, identities: [("federated", pending.provider.rawValue, pending.subject)], displayName: displayName,
            objectID: nil, attributes: attributes)
    }

    private func pending(_ run: JourneyRun) throws -> FederatedSignUp {
        guard let pending = run.claims.federated, Self.collectsAttributes(run.flow) else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in with your identity provider first.")
        }
        return pending
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        var pending = try pending(run)
        // B2C's "after federating with an identity provider" connector, once: its claims
        // prefill the page; it may also block the sign-up.
        if !(pending.connectorCalled ?? false) {
            let name = run.flow.connectors.afterFederatingIdentityProvider
            switch try await connector.run(
                name, step: .postFederationSignup,
                subject: subject(pending, displayName: pending.displayName, attributes: pending.attributes), run,
                form: { _ in
                    // A validation error is not one of this step's answers.
                    let failure = ConnectorFailure(
                        connector: name ?? "", step: .postFederationSignup, code: "400",
                        reason: "a ValidationError is not an answer at this step")
                    return .fail(failure.b2cError)
                })
            {
            case .stop(let outcome):
                // Blocked (or failed): the pending sign-up is gone, so the form cannot be posted anyway.
                run.claims.federated = nil
                return outcome
            case .proceed(let overrides):
                for (key, value) in overrides {
                    if key == UserAttribute.displayName.rawValue { pending.displayName = value } else { pending.attributes[key] = value }
                }
            }
            pending.connectorCalled = true
            run.claims.federated = pending
        }
        // External ID's OnAttributeCollectionStart, once: its values fill what is still empty.
        if PageExtensions.startPending(run, identity: Self.startIdentity(pending)) {
            if let stop = try await extensions.attributeCollectionStart(
                &run, identity: Self.startIdentity(pending), signUp: signUpInfo(pending, pending.displayName, pending.attributes))
            {
                run.claims.federated = nil
                return stop
            }
            Self.prefill(PageExtensions.prefill(run, identity: Self.startIdentity(pending)), displayName: &pending.displayName, attributes: &pending.attributes)
            run.claims.federated = pending
        }
        return .interact(try attributePage(run, pending))
    }

    private func attributePage(_ run: JourneyRun, _ pending: FederatedSignUp, error: String? = nil, status: HTTPResponse.Status = .ok)
        throws -> Response
    {
        var values: [String: Any] = [
            "title": run.text("signup_title"), "action": run.url(.federated), "email": pending.email ?? "",
            "attributes": run.attributeFields(run.flow.signUpAttributes) { attribute in
                run.form[attribute.rawValue] ?? (attribute == .displayName ? pending.displayName : pending.attributes[attribute.rawValue])
            },
        ]
        if let error { values["error"] = error }
        return try run.page(.federated, values, status: status)
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        let pending = try pending(run)
        // The "after federating" connector must have agreed (on the page's first showing) before
        // the form can create anything.
        guard run.flow.connectors.afterFederatingIdentityProvider == nil || pending.connectorCalled == true, !PageExtensions.startPending(run, identity: Self.startIdentity(pending)) else {
            return try await show(page, &run)
        }
        let posted: (displayName: String?, attributes: [String: String])
        switch run.postedAttributes(run.flow.signUpAttributes, over: pending.attributes) {
        case .success(let values): posted = values
        case .failure(let problem): return .interact(try attributePage(run, pending, error: problem.message, status: .badRequest))
        }
        var attributes = posted.attributes
        var displayName = posted.displayName ?? pending.displayName
        switch try await extensions.attributeCollectionSubmit(run, signUp: signUpInfo(pending, displayName, attributes)) {
        case .stop(let outcome):
            run.claims.federated = nil
            return outcome
        case .refused(let message): return .interact(try attributePage(run, pending, error: message, status: .badRequest))
        case .proceed(let changed?):
            displayName = changed.displayName ?? displayName
            attributes = changed.applied(to: attributes)
        case .proceed(nil): break
        }
        let current = run
        switch try await connector.run(
            run.flow.connectors.beforeCreatingUser, step: .postAttributeCollection,
            subject: subject(pending, displayName: displayName, attributes: attributes), run,
            form: { .interact(try attributePage(current, pending, error: $0, status: .badRequest)) })
        {
        case .stop(let outcome): return outcome
        case .proceed(let overrides):
            for (key, value) in overrides {
                if key == UserAttribute.displayName.rawValue { displayName = value } else { attributes[key] = value }
            }
        }
        let user = UserAccount(
            tenantID: run.tenant.id, identityProvider: pending.provider, signInName: pending.subject, email: pending.email,
            displayName: displayName, attributes: attributes, createdAt: run.now,
            // Proven only when the provider vouched for it.
            emailVerified: pending.email != nil && pending.emailVerified != false)
        return try await create(user, &run)
    }
}
