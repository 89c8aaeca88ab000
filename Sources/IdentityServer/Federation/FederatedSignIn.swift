import Foundation
import Hummingbird
import WireCoding

extension InteractionFlow {
    /// The tenant of a federation callback (`/{tenant}/oauth2/authresp`), which must be the
    /// transaction's, reached by the browser that started the transaction.
    func callbackTenant(of record: InteractionRecord, request: Request, context: IdentityRequestContext) async throws -> Tenant {
        let tenant = try await service.tenants.resolveSegment(PolicyResolver.decoded(context.parameters.get("tenant") ?? ""))
        guard tenant.id == record.request.tenantID else {
            throw PageError(status: .badRequest, title: "Invalid request", message: "The callback does not match the sign-in.")
        }
        try requireStartingBrowser(request, record: record)
        return tenant
    }

    /// The browser finishing a step must be the one that started the sign-in (its CSRF cookie is
    /// the transaction's), or an attacker could send a victim a callback link that signs the
    /// victim in as the attacker, or read a page meant for another browser.
    func requireStartingBrowser(_ request: Request, record: InteractionRecord) throws {
        guard let cookie = request.cookies[Self.csrfCookie]?.value,
            Secrets.constantTimeEquals(Secrets.sha256Hex(cookie), record.csrfHash)
        else {
            throw PageError(
                status: .forbidden, title: "Request blocked",
                message: "This sign-in was started in another browser. Start again from the application.")
        }
    }

    /// The end of every federated sign-in (the simulated Facebook, upstream OpenID Connect
    /// providers): the account of that provider and subject, made on first sign-in as B2C makes
    /// a stub account with its own object id (research/b2c-protocol.md §5.3), then the profile
    /// page of a profile-edit flow or the completion, both behind the flow's second factor.
    func finishFederated(
        _ identity: FederatedIdentity, record: InteractionRecord, tenant: Tenant, userFlow: UserFlow, request: Request,
        context: some IdentityContext
    ) async throws -> Response {
        var newUser = false
        var user = try await service.users.user(tenantID: tenant.id, provider: identity.provider, signInName: identity.subject)
        // A sign-up flow shows the attribute page, prefilled, before the account is made.
        if user == nil, Self.collectsAttributes(userFlow) {
            return try await startFederatedSignUp(identity, record: record)
        }
        if user == nil {
            var attributes: [String: String] = [:]
            attributes[UserAttribute.givenName.rawValue] = identity.givenName
            attributes[UserAttribute.surname.rawValue] = identity.surname
            let created = UserAccount(
                tenantID: tenant.id, identityProvider: identity.provider, signInName: identity.subject, email: identity.email,
                displayName: identity.displayName, attributes: attributes, createdAt: service.now,
                // Proven only when the provider vouches for it.
                emailVerified: identity.email != nil && identity.emailVerified)
            do {
                try await service.users.create(created)
                newUser = true
                user = created
                context.logger.info(
                    "federated account created", metadata: ["oid": "\(created.objectID)", "idp": "\(identity.provider.rawValue)"])
            } catch UserDirectoryError.duplicate {
                user = try await service.users.user(tenantID: tenant.id, provider: identity.provider, signInName: identity.subject)
            }
        }
        guard let user else {
            throw PageError(status: .internalServerError, title: "Sign-in failed", message: "The account could not be created.")
        }
        if userFlow.type == .profileEdit {
            if let ask = try await secondFactorGate(
                record, user: user, identityProvider: identity.provider, newUser: newUser, authTime: service.now, session: .start,
                next: .profile, request: request, context: context)
            {
                return ask
            }
            try await service.interactions.setPendingUser(interactionID: record.id, userID: user.id)
            return .redirecting(to: pageURL("profile", record: record))
        }
        return try await complete(
            record, user: user, identityProvider: identity.provider, newUser: newUser, authTime: service.now, request: request,
            context: context)
    }
}
