import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// Native authentication's self-service password reset (SPEC §2.15; Microsoft's reference,
/// `resetpassword/v1.0/*`): `start` names the account, `challenge` mails a code bound to it,
/// `continue` takes the code, `submit` the new password, and `poll_completion` says it is set;
/// its continuation token then signs in at the token endpoint. Setting the password does what
/// the hosted reset does: it unlocks the account, marks the address proven, and revokes the
/// account's refresh tokens (https://github.com/Azure-Samples/active-directory-b2c-dotnetcore-webapp/issues/36). Here the password is set
/// within `submit`, so the first poll already answers `succeeded`.
struct NativeAuthPasswordReset: Sendable {
    let api: NativeAuthAPI

    /// The reference's `poll_interval` (seconds).
    static let pollInterval: Int64 = 1

    /// `POST …/resetpassword/v1.0/start` (`client_id`, `username`, `challenge_type`, `capabilities`).
    @Sendable func start(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let types = try NativeAuthAPI.challengeTypes(form)
            try await api.admitNewFlow(context)
            guard let username = form.nonEmpty("username"), let email = EmailAddress.canonical(username) else { throw NativeAuthError.invalidUsername }
            let flow = try await api.rules(for: client, tenant: context.tenant, .passwordReset)
            guard types.contains("oob") else { return NativeAuthAPI.redirect }
            guard let user = try await api.service.users.user(tenantID: context.tenant.id, provider: .local, signInName: email) else {
                throw NativeAuthError.userNotFound
            }
            // An account that signs in with codes has no password to reset.
            guard user.passwordHash != nil else { throw NativeAuthError.noPassword }
            guard user.accountEnabled else { throw NativeAuthError.disabled }
            // The hosted reset asks for the second factor before the new password; here the
            // mailed code is the only proof, so an account whose second factor is an
            // authenticator app resets in the browser.
            if flow.mfa.isOn, try await api.usesAuthenticator(user, flow: flow) {
                throw NativeAuthAPI.BrowserNeeded(reason: "The account's second factor is an authenticator app.")
            }
            var data = NativeAuthFlowData()
            data.capabilities = NativeAuthAPI.capabilities(form)
            let token = try await api.flows.start(
                tenantID: context.tenant.id, clientID: client.clientIDString, userID: user.id, email: email, step: .resetChallenge, data: data,
                now: api.now)
            return NativeAuthAPI.continuation(token)
        }
    }

    /// `POST …/resetpassword/v1.0/challenge`: mails a code to the account (again, for a re-send).
    @Sendable func challenge(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.resetChallenge, .resetCode])
            if let types = form.nonEmpty("challenge_type"), !types.split(separator: " ").contains("oob") { return NativeAuthAPI.redirect }
            guard let userID = flow.userID, let user = try await api.service.users.user(id: userID), let email = flow.email,
                user.signInName == email
            else { throw NativeAuthError.userNotFound }
            let address = user.email ?? email
            try await api.sendCode(for: flow, to: address, email: email, userID: user.id, tenant: context.tenant, logger: context.logger)
            return NativeAuthAPI.codeSent(try await api.advance(flow, to: .resetCode), to: address)
        }
    }

    /// `POST …/resetpassword/v1.0/continue` (`grant_type=oob`, `oob`): the address is proven.
    @Sendable func `continue`(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.resetCode])
            guard form.nonEmpty("grant_type") == "oob" else { throw NativeAuthError.unsupportedGrant(form["grant_type"] ?? "") }
            guard let email = flow.email else { throw NativeAuthError.invalidToken }
            try await api.checkCodeCounting(form, for: flow, email: email, tenant: context.tenant)
            let next = try await api.advance(flow, to: .resetSubmit)
            let left = max(0, Int64(flow.expiresAt.timeIntervalSince(api.now).rounded(.down)))
            return NativeAuthAPI.answer([("continuation_token", .string(next)), ("expires_in", .int(min(left, 600)))])
        }
    }

    /// `POST …/resetpassword/v1.0/submit` (`new_password`).
    @Sendable func submit(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.resetSubmit])
            guard let password = form["new_password"], !password.isEmpty else { throw NativeAuthError.missing("new_password") }
            if let problem = NativeAuthAPI.passwordProblem(password) { throw problem }
            // The account the code was bound to, and only while it still has the proven address.
            guard let userID = flow.userID, let user = try await api.service.users.user(id: userID), user.tenantID == context.tenant.id,
                user.identityProvider == .local, user.signInName == flow.email
            else { throw NativeAuthError.userNotFound }
            guard user.accountEnabled else { throw NativeAuthError.disabled }
            let hash = try await api.service.hasher.hash(password)
            // Set, then the step taken: a poll never says `succeeded` for a password not set. (Two
            // submits racing with one token both hold the same proof; the later password stays.)
            try await api.service.users.setPassword(id: user.id, hash: hash, emailProven: true, forceChange: false, now: api.now)
            let next = try await api.advance(flow, to: .resetPoll)
            context.logger.info("password reset", metadata: ["oid": "\(user.objectID)", "via": "native authentication"])
            return NativeAuthAPI.answer([("continuation_token", .string(next)), ("poll_interval", .int(Self.pollInterval))])
        }
    }

    /// `POST …/resetpassword/v1.0/poll_completion`: `succeeded`, with the token that signs in.
    @Sendable func pollCompletion(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.resetPoll])
            var data = flow.data
            data.afterReset = true
            let next = try await api.advance(flow, to: .signedIn, data: data)
            return NativeAuthAPI.answer([("status", .string("succeeded")), ("continuation_token", .string(next))])
        }
    }
}
