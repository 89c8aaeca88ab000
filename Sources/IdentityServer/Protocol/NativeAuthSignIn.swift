import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// Native authentication's sign-in (SPEC §2.15; Microsoft's native-authentication API
/// reference): `oauth2/v2.0/initiate` names the account, `oauth2/v2.0/challenge` says how it
/// proves itself (its password, or a code mailed to it when it has none), and the token endpoint
/// takes the proof with the continuation token (``TokenEndpoint/nativeToken(_:form:context:now:)``).
/// When the flow's second factor stops the sign-in, `introspect` lists the account's methods and
/// `challenge` with a method's `id` mails that factor's code. What needs a browser answers
/// `challenge_type: redirect`.
struct NativeAuthSignIn: Sendable {
    let api: NativeAuthAPI

    /// `POST …/oauth2/v2.0/initiate` (`client_id`, `username`, `challenge_type`, `capabilities`).
    @Sendable func initiate(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let types = try NativeAuthAPI.challengeTypes(form)
            try await api.admitNewFlow(context)
            guard let username = form.nonEmpty("username"), let email = EmailAddress.canonical(username) else { throw NativeAuthError.invalidUsername }
            _ = try await api.rules(for: client, tenant: context.tenant, .signIn)
            // Neither a password nor a code offered: the browser it is.
            guard types.contains("password") || types.contains("oob") else { return NativeAuthAPI.redirect }
            guard let user = try await api.service.users.user(tenantID: context.tenant.id, provider: .local, signInName: email) else {
                throw NativeAuthError.userNotFound
            }
            var data = NativeAuthFlowData()
            data.capabilities = NativeAuthAPI.capabilities(form)
            let token = try await api.flows.start(
                tenantID: context.tenant.id, clientID: client.clientIDString, userID: user.id, email: email, step: .challenge, data: data,
                now: api.now)
            return NativeAuthAPI.continuation(token)
        }
    }

    /// `POST …/oauth2/v2.0/challenge` (`client_id`, `continuation_token`, `challenge_type`, and
    /// `id` for a second factor).
    @Sendable func challenge(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.challenge, .token, .secondFactor, .secondFactorToken])
            guard let userID = flow.userID, let user = try await api.service.users.user(id: userID), let email = flow.email else {
                throw NativeAuthError.userNotFound
            }
            if flow.step == .secondFactor || flow.step == .secondFactorToken {
                return try await secondFactorChallenge(form, flow: flow, user: user, context: context)
            }
            let types = try NativeAuthAPI.challengeTypes(form)
            // The account's own method: its password; a code only for an account without one
            // (made by a sign-up with codes). An account from a provider needs the browser.
            guard user.identityProvider == .local else { return NativeAuthAPI.redirect }
            if user.passwordHash != nil {
                guard types.contains("password") else { return NativeAuthAPI.redirect }
                let next = try await api.advance(flow, to: .token, method: "password")
                return NativeAuthAPI.answer([("continuation_token", .string(next)), ("challenge_type", .string("password"))])
            }
            guard types.contains("oob") else { return NativeAuthAPI.redirect }
            // A new code each time (a re-send); the one before it is void.
            try await api.sendCode(for: flow, to: user.email ?? email, email: email, userID: user.id, tenant: context.tenant, logger: context.logger)
            let next = try await api.advance(flow, to: .token, method: "oob")
            return NativeAuthAPI.codeSent(next, to: user.email ?? email)
        }
    }

    /// The second factor's method id: one per account, so a client can keep it between calls.
    static func emailMethodID(_ user: UserAccount) -> String {
        UUID(nameBased: "native-auth-mfa-email:" + user.id.uuidString).uuidString.lowercased()
    }

    /// `POST …/oauth2/v2.0/introspect`: the second-factor methods the account can use here.
    @Sendable func introspect(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.secondFactor])
            guard let userID = flow.userID, let user = try await api.service.users.user(id: userID), let address = user.presentableEmail else {
                throw NativeAuthError.userNotFound
            }
            let next = try await api.advance(flow, to: .secondFactor)
            let method: JSONText = .object([
                ("id", .string(Self.emailMethodID(user))), ("challenge_type", .string("oob")), ("challenge_channel", .string("email")),
                ("login_hint", .string(NativeAuthAPI.masked(address))),
            ])
            return NativeAuthAPI.answer([("continuation_token", .string(next)), ("methods", .array([method]))])
        }
    }

    /// `challenge` with a method `id` after `mfa_required`: mails the second factor's code.
    private func secondFactorChallenge(_ form: RequestParameters, flow: NativeAuthFlow, user: UserAccount, context: PolicyRequestContext)
        async throws -> Response
    {
        guard let id = form.nonEmpty("id") else { throw NativeAuthError.missing("id") }
        guard id == Self.emailMethodID(user), let address = user.presentableEmail, let email = flow.email else {
            throw NativeAuthError(error: "invalid_request", code: 90_100, message: "The id parameter does not name one of the account's methods.")
        }
        try await api.sendCode(for: flow, to: address, email: email, userID: user.id, tenant: context.tenant, logger: context.logger)
        let next = try await api.advance(flow, to: .secondFactorToken, method: "oob")
        return NativeAuthAPI.codeSent(next, to: address)
    }
}
