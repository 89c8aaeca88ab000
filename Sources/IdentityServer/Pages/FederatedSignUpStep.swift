import Foundation
import Hummingbird

/// A first federated sign-in in a sign-up flow (SPEC §2.11): the attribute page, prefilled from
/// the provider's claims and the flow's "after federating" connector, then the "before creating
/// the user" connector, and only then the account.
extension InteractionFlow {
    /// Whether a new federated user of `userFlow` goes through the attribute page first.
    static func collectsAttributes(_ userFlow: UserFlow) -> Bool {
        userFlow.type == .signUpOrSignIn || userFlow.type == .signUp
    }

    /// Keeps `identity` on the transaction and sends the browser to the attribute page.
    func startFederatedSignUp(_ identity: FederatedIdentity, record: InteractionRecord) async throws -> Response {
        var attributes: [String: String] = [:]
        attributes[UserAttribute.givenName.rawValue] = identity.givenName
        attributes[UserAttribute.surname.rawValue] = identity.surname
        let signUp = FederatedSignUp(
            provider: identity.provider, subject: identity.subject, email: identity.email, displayName: identity.displayName,
            attributes: attributes, connectorCalled: false, emailVerified: identity.emailVerified)
        try await service.interactions.setPendingSignUp(interactionID: record.id, signUp: signUp)
        return .redirecting(to: pageURL("federated", record: record), status: .seeOther)
    }
}

extension PageStep {
    private func pendingSignUp() throws -> FederatedSignUp {
        guard let pending = record.pendingSignUp, InteractionFlow.collectsAttributes(userFlow) else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in with your identity provider first.")
        }
        return pending
    }

    private func subject(_ pending: FederatedSignUp, displayName: String, attributes: [String: String]) -> ConnectorSubject {
        ConnectorSubject(
            email: pending.email, identities: [("federated", pending.provider.rawValue, pending.subject)], displayName: displayName,
            objectID: nil, attributes: attributes)
    }

    func federatedSignUpPage(error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        try flow.requireStartingBrowser(request, record: record)
        var pending = try pendingSignUp()
        // B2C's "after federating with an identity provider" connector, once: its claims
        // prefill the page; it may also block the sign-up.
        if !(pending.connectorCalled ?? false) {
            switch try await runConnector(
                userFlow.connectors.afterFederatingIdentityProvider, step: .postFederationSignup,
                subject: subject(pending, displayName: pending.displayName, attributes: pending.attributes),
                form: { _ in
                    // A validation error is not one of this step's answers.
                    let failure = ConnectorFailure(
                        connector: userFlow.connectors.afterFederatingIdentityProvider ?? "", step: .postFederationSignup, code: "400",
                        reason: "a ValidationError is not an answer at this step")
                    return try await flow.fail(record, with: failure.b2cError, context: context)
                })
            {
            case .respond(let response):
                // Blocked (or failed): the pending sign-up is gone, so the form cannot be posted anyway.
                try await service.interactions.setPendingSignUp(interactionID: record.id, signUp: nil)
                return response
            case .proceed(let overrides):
                for (key, value) in overrides {
                    if key == UserAttribute.displayName.rawValue { pending.displayName = value } else { pending.attributes[key] = value }
                }
            }
            pending.connectorCalled = true
            try await service.interactions.setPendingSignUp(interactionID: record.id, signUp: pending)
        }
        var values: [String: Any] = [
            "title": text("signup_title"), "action": flow.pageURL("federated", record: record), "email": pending.email ?? "",
            "attributes": attributeFields(userFlow.signUpAttributes) { attribute in
                form[attribute.rawValue] ?? (attribute == .displayName ? pending.displayName : pending.attributes[attribute.rawValue])
            },
        ]
        if let error { values["error"] = error }
        return try page("federated", values, status: status)
    }

    func federatedSignUp() async throws -> Response {
        let pending = try pendingSignUp()
        // The "after federating" connector must have agreed (on the page's first showing) before
        // the form can create anything.
        guard userFlow.connectors.afterFederatingIdentityProvider == nil || pending.connectorCalled == true else {
            return try await federatedSignUpPage()
        }
        let posted: (displayName: String?, attributes: [String: String])
        switch postedAttributes(userFlow.signUpAttributes, over: pending.attributes) {
        case .success(let values): posted = values
        case .failure(let problem): return try await federatedSignUpPage(error: problem.message, status: .badRequest)
        }
        var attributes = posted.attributes
        var displayName = posted.displayName ?? pending.displayName
        switch try await runConnector(
            userFlow.connectors.beforeCreatingUser, step: .postAttributeCollection,
            subject: subject(pending, displayName: displayName, attributes: attributes),
            form: { try await federatedSignUpPage(error: $0, status: .badRequest) })
        {
        case .respond(let response): return response
        case .proceed(let overrides):
            for (key, value) in overrides {
                if key == UserAttribute.displayName.rawValue { displayName = value } else { attributes[key] = value }
            }
        }
        let user = UserAccount(
            tenantID: tenant.id, identityProvider: pending.provider, signInName: pending.subject, email: pending.email,
            displayName: displayName, attributes: attributes, createdAt: service.now,
            // Proven only when the provider vouched for it.
            emailVerified: pending.email != nil && pending.emailVerified != false)
        var newUser = true
        var account = user
        do {
            try await service.users.create(user)
            context.logger.info("federated account created", metadata: ["oid": "\(user.objectID)", "idp": "\(pending.provider.rawValue)"])
        } catch UserDirectoryError.duplicate {
            // The same person finished another sign-up first: sign in to that account.
            guard let existing = try await service.users.user(tenantID: tenant.id, provider: pending.provider, signInName: pending.subject)
            else { throw PageError(status: .internalServerError, title: "Sign-in failed", message: "The account could not be created.") }
            account = existing
            newUser = false
        }
        try await service.interactions.setPendingSignUp(interactionID: record.id, signUp: nil)
        return try await flow.complete(
            record, user: account, identityProvider: pending.provider, newUser: newUser, authTime: service.now, request: request,
            context: context)
    }
}
