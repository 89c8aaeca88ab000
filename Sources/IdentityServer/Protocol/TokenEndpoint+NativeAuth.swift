import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

extension TokenEndpoint {
    /// The token request that ends a native-authentication sign-in (SPEC §2.15): the
    /// continuation token of the flow's `token` step, `grant_type=password` with the password,
    /// and `scope`. The password grant's journey checks it (lockout, a disabled account, a second
    /// factor, a forced password change; consent is the admin's, as External ID has it for
    /// native apps), so the API signs in no one the hosted pages would not; what needs a page
    /// answers `challenge_type: redirect`. A wrong password counts against the flow, which
    /// ends after five; the tokens end it.
    func nativeToken(_ request: Request, form: RequestParameters, context: PolicyRequestContext, now: Date) async throws -> Response {
        guard let native = nativeSignIn else { throw ProtocolFailure.grantTypeNotSupported(form["grant_type"] ?? "") }
        let tenant = context.tenant
        return try await native.answering(context) {
            let client = try await native.client(form, tenant: tenant)
            let flow = try await native.flow(form, client: client, tenant: tenant, step: .token)
            guard let grantType = form.nonEmpty("grant_type") else { throw NativeAuthError.missing("grant_type") }
            guard grantType == "password", flow.method == "password" else {
                throw NativeAuthError(error: "unsupported_grant_type", code: 70_003, message: "The app requested an unsupported grant type '\(grantType.prefix(40))'.")
            }
            guard let password = form["password"], !password.isEmpty else { throw NativeAuthError.missing("password") }
            guard form.nonEmpty("scope") != nil else { throw NativeAuthError.missing("scope") }
            guard let user = try await users.user(id: flow.userID), user.tenantID == tenant.id else { throw NativeAuthError.userNotFound }
            let userFlow = try await tenants.userFlow(tenantID: tenant.id, name: client.userFlow ?? tenant.defaultPolicy) ?? context.flow
            // A second factor needs a page here (the API's MFA steps are not served yet).
            if userFlow.mfa.isOn { return NativeAuthSignIn.redirect }
            let scopes = [String].scopes(form["scope"])
            let attempt = AuthorizationRequest(
                tenantID: tenant.id, tenantSegment: context.route.tenantSegment, policy: userFlow.name, clientID: client.clientIDString,
                redirectURI: "", responseTypes: [], responseMode: .query, scopes: scopes, state: nil, nonce: nil, codeChallenge: nil,
                codeChallengeMethod: nil, prompt: nil, loginHint: nil, domainHint: nil, maxAge: nil, origin: hosts.origin(of: request),
                face: .entra)
            let record = InteractionRecord(id: "native-sign-in", request: attempt, csrfHash: "", expiresAt: now)
            let credentials = RequestParameters(pairs: [("username", user.signInName), ("password", password)])
            let run: JourneyRun
            do {
                run = try await journeys.runWithoutPages(
                    journeys.catalog.nativePasswordSignIn, record: record, tenant: tenant, flow: userFlow, request: request, form: credentials,
                    context: context)
            } catch let failure as ProtocolFailure {
                switch failure {
                case .invalidCredentials:
                    _ = try await native.flows.failed(flow)
                    throw NativeAuthError.wrongPassword
                case .accountLocked: throw NativeAuthError.locked
                case .accountDisabled: throw NativeAuthError.disabled
                case .multiFactorRequired, .grantNotConsented, .passwordChangeRequired: return NativeAuthSignIn.redirect
                default: throw NativeAuthError(error: "invalid_request", code: failure.entra.code, message: failure.entra.message)
                }
            }
            guard let signedIn = run.user, signedIn.id == user.id else { throw NativeAuthError.wrongPassword }
            let granted: GrantedScopes
            do {
                granted = try GrantedScopes.resolve(scopes, client: client, tenantApps: try await tenants.applications(tenantID: tenant.id))
            } catch let failure as ProtocolFailure {
                throw NativeAuthError(error: "invalid_scope", code: failure.entra.code, message: failure.entra.message)
            }
            // The proof is spent once: a request racing with the same token gets nothing.
            guard try await native.flows.finish(flow) else { throw NativeAuthError.invalidToken }
            let issuance = IssuanceContext(
                tenant: tenant, flow: userFlow, client: client, user: signedIn,
                issuer: HostPolicy.issuer(origin: hosts.origin(of: request), tenant: tenant, face: .entra), scopes: granted, nonce: nil,
                authTime: now, newUser: false, identityProvider: .local, face: .entra)
            let refreshToken = granted.offlineAccess ? try await startFamily(issuance, now: now, forCode: nil) : nil
            return try await respond(issuance, refreshToken: refreshToken, clientInfo: true, now: now)
        }
    }
}
