import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// Native authentication's just-in-time registration of the second factor (SPEC §2.15;
/// Microsoft's reference, `register/v1.0/*`). The flow's second factor here is a code mailed to
/// the account's address; an account whose address no code has proven yet (one made without
/// verification: a flow that skips it, an import) registers it first: `introspect` offers the
/// address, `challenge` mails a code to it, `continue` takes the code. The address is then
/// proven (the account's `emailVerified`), and the code counts as the sign-in's second factor,
/// as the reference says a just-verified only method does; the token endpoint signs in with the
/// continuation token. Only the account's own address is registered: another would need a
/// place to keep a second address, which accounts here do not have (noted in the README).
struct NativeAuthRegistration: Sendable {
    let api: NativeAuthAPI

    private func account(_ flow: NativeAuthFlow, tenant: Tenant) async throws -> UserAccount {
        guard let userID = flow.userID, let user = try await api.service.users.user(id: userID), user.tenantID == tenant.id,
            user.signInName == flow.email, user.email != nil
        else { throw NativeAuthError.userNotFound }
        return user
    }

    /// `POST …/register/v1.0/introspect`: the methods the account may register.
    @Sendable func introspect(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.registration])
            let user = try await account(flow, tenant: context.tenant)
            let next = try await api.advance(flow, to: .registration)
            // The reference's register introspect shows the address itself, to fill in the field.
            let method: JSONText = .object([
                ("id", .string("email")), ("challenge_type", .string("oob")), ("challenge_channel", .string("email")),
                ("login_hint", .string(user.email ?? "")),
            ])
            return NativeAuthAPI.answer([("continuation_token", .string(next)), ("methods", .array([method]))])
        }
    }

    /// `POST …/register/v1.0/challenge` (`challenge_type=oob`, `challenge_target`, optional
    /// `challenge_channel`): mails a code to the address to register.
    @Sendable func challenge(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.registration, .registrationCode])
            let user = try await account(flow, tenant: context.tenant)
            guard form.nonEmpty("challenge_type")?.split(separator: " ").contains("oob") == true else { throw NativeAuthError.missing("challenge_type") }
            // A phone needs the browser (no text messages are sent here).
            if let channel = form.nonEmpty("challenge_channel"), channel != "email" { return NativeAuthAPI.redirect }
            guard let target = form.nonEmpty("challenge_target") else { throw NativeAuthError.missing("challenge_target") }
            guard let email = flow.email, EmailAddress.canonical(target) == email, let address = user.email else {
                throw NativeAuthError(error: "invalid_request", code: 90_100, message: "Only the account's own email address can be registered.")
            }
            try await api.sendCode(for: flow, to: address, email: email, userID: user.id, tenant: context.tenant, logger: context.logger)
            let next = try await api.advance(flow, to: .registrationCode)
            return NativeAuthAPI.answer([
                ("continuation_token", .string(next)), ("challenge_type", .string("oob")), ("binding_method", .string("prompt")),
                ("challenge_target", .string(address)), ("challenge_channel", .string("email")), ("code_length", .int(Int64(NativeAuthAPI.codeLength))),
            ])
        }
    }

    /// `POST …/register/v1.0/continue` (`grant_type=oob`, `oob`): the address is proven.
    @Sendable func `continue`(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.registrationCode])
            guard form.nonEmpty("grant_type") == "oob" else { throw NativeAuthError.unsupportedGrant(form["grant_type"] ?? "") }
            guard let email = flow.email else { throw NativeAuthError.invalidToken }
            try await api.checkCodeCounting(form, for: flow, email: email, tenant: context.tenant)
            let user = try await account(flow, tenant: context.tenant)
            try await api.service.users.markEmailVerified(id: user.id, now: api.now)
            context.logger.info("second factor registered", metadata: ["oid": "\(user.objectID)", "via": "native authentication"])
            var data = flow.data
            data.secondFactorPassed = true
            return NativeAuthAPI.continuation(try await api.advance(flow, to: .signedIn, data: data))
        }
    }
}
