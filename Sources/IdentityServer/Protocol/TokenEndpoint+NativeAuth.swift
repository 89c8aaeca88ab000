import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

extension TokenEndpoint {
    /// The token request that ends a native-authentication sign-in (SPEC §2.15): the flow's
    /// continuation token, `scope`, and its proof by `grant_type`:
    /// - `password` with the password (the flow's `token` step, for an account with one);
    /// - `oob` with the mailed code (the `token` step, for an account without a password);
    /// - `continuation_token` alone, after a sign-up or reset proved the account;
    /// - `mfa_oob` with the second factor's code, after `mfa_required`.
    /// The sign-in journey runs after the proof (lockout, a disabled account, the flow's second
    /// factor, a forced password change; consent is the admin's, as External ID has it for native
    /// apps), so the API signs in no one the hosted pages would not. A second factor the client
    /// can answer (`capabilities=mfa_required`) is `mfa_required`; anything else that needs a page
    /// is `challenge_type: redirect`. A wrong password or code counts against the flow, which
    /// ends after five; the tokens end it.
    func nativeToken(_ request: Request, form: RequestParameters, context: PolicyRequestContext, now: Date) async throws -> Response {
        guard let api = nativeAuth else { throw ProtocolFailure.grantTypeNotSupported(form["grant_type"] ?? "") }
        if let armed = try api.armedFault(request) { return armed }
        let client = try await api.client(form, tenant: context.tenant)
        return try await NativeAuthCall.$current.withValue(api.call(request, context, client: client)) {
            try await nativeTokenSteps(request, form: form, client: client, context: context, now: now)
        }
    }

    private func nativeTokenSteps(_ request: Request, form: RequestParameters, client: AppRegistration, context: PolicyRequestContext, now: Date)
        async throws -> Response
    {
        guard let api = nativeAuth else { throw ProtocolFailure.grantTypeNotSupported(form["grant_type"] ?? "") }
        let tenant = context.tenant
        do {
            guard let grantType = form.nonEmpty("grant_type") else { throw NativeAuthError.missing("grant_type") }
            let steps: Set<NativeAuthFlow.Step> =
                switch grantType {
                case "password", "oob": [.token]
                case "continuation_token": [.signedIn]
                case "mfa_oob": [.secondFactorToken]
                default: throw NativeAuthError.unsupportedGrant(grantType)
                }
            let flow = try await api.flow(form, client: client, tenant: tenant, at: steps)
            guard form.nonEmpty("scope") != nil else { throw NativeAuthError.missing("scope") }
            guard let userID = flow.userID, let user = try await users.user(id: userID), user.tenantID == tenant.id, let email = flow.email else {
                throw NativeAuthError.userNotFound
            }
            GrantNote.current?.user = user
            GrantNote.current?.nativeOutcome.newUser = flow.data.newUser
            // A sign-up's or reset's client names the account again; it must be the flow's.
            if let username = form.nonEmpty("username"), EmailAddress.canonical(username) != email { throw NativeAuthError.invalidUsername }
            var proven: ProvenAccount?
            switch grantType {
            case "password":
                guard flow.method == "password" else { throw NativeAuthError.unsupportedGrant(grantType) }
                guard form["password"]?.isEmpty == false else { throw NativeAuthError.missing("password") }
            case "oob":
                guard flow.method == "oob" else { throw NativeAuthError.unsupportedGrant(grantType) }
                try await api.checkCodeCounting(form, for: flow, email: email, tenant: tenant)
                proven = ProvenAccount(user: user, newUser: false, secondFactorPassed: false)
            case "mfa_oob":
                try await api.checkCodeCounting(form, for: flow, email: email, tenant: tenant)
                proven = ProvenAccount(user: user, newUser: flow.data.newUser, secondFactorPassed: true)
            default:
                // A registration's code was the second factor too.
                proven = ProvenAccount(user: user, newUser: flow.data.newUser, secondFactorPassed: flow.data.secondFactorPassed)
            }
            return try await nativeSignIn(request, form: form, flow: flow, client: client, user: user, proven: proven, context: context, now: now)
        }
    }

    /// ``nativeToken(_:form:context:now:)``, its end kept in the sign-in log: tokens, or the
    /// API's error (an answer that only sends the client to the browser is no sign-in yet).
    func nativeTokenLogged(_ request: Request, form: RequestParameters, context: PolicyRequestContext, now: Date) async throws -> Response {
        var refusal: NativeAuthError?
        let response: Response
        do {
            response = try await nativeToken(request, form: form, context: context, now: now)
        } catch let error as NativeAuthError {
            refusal = error
            response = error.response(correlationID: context.correlationID, at: clock.now)
        } catch let browser as NativeAuthAPI.BrowserNeeded {
            response = NativeAuthAPI.redirect(because: browser.reason)
        }
        let outcome = GrantNote.current?.nativeOutcome ?? (policy: nil, newUser: false, issued: false)
        if refusal != nil || outcome.issued {
            await signIns.nativeAuthentication(
                tenantID: context.tenant.id, grant: form["grant_type"] ?? "", appID: form["client_id"], policy: outcome.policy,
                user: GrantNote.current?.user, newUser: outcome.newUser, errorCode: refusal?.code ?? 0, reason: refusal?.message,
                clientAddress: context.clientAddress, correlationID: context.correlationID, at: clock.now, logger: context.logger)
        }
        return response
    }

    /// Runs the sign-in journey for the flow's account (with the password, or `proven` by the
    /// API), then issues the Entra face's tokens with `client_info`.
    private func nativeSignIn(
        _ request: Request, form: RequestParameters, flow: NativeAuthFlow, client: AppRegistration, user: UserAccount, proven: ProvenAccount?,
        context: PolicyRequestContext, now: Date
    ) async throws -> Response {
        guard let api = nativeAuth else { throw NativeAuthError.invalidToken }
        let tenant = context.tenant
        // The flow must still allow what this sign-in ends (a sign-up's, a reset's, a sign-in).
        let userFlow = try await api.rules(for: client, tenant: tenant, flow.data.newUser ? .signUp : flow.data.afterReset ? .passwordReset : .signIn)
        GrantNote.current?.nativeOutcome.policy = userFlow.name
        let scopes = [String].scopes(form["scope"])
        let attempt = AuthorizationRequest(
            tenantID: tenant.id, tenantSegment: context.route.tenantSegment, policy: userFlow.name, clientID: client.clientIDString,
            redirectURI: "", responseTypes: [], responseMode: .query, scopes: scopes, state: nil, nonce: nil, codeChallenge: nil,
            codeChallengeMethod: nil, prompt: nil, loginHint: nil, domainHint: nil, maxAge: nil, origin: hosts.origin(of: request), face: .entra)
        let record = InteractionRecord(id: "native-sign-in", request: attempt, csrfHash: "", expiresAt: now)
        let run: JourneyRun
        do {
            if let proven {
                run = try await journeys.runWithoutPages(
                    journeys.catalog.nativeProvenSignIn, record: record, tenant: tenant, flow: userFlow, request: request,
                    form: RequestParameters(pairs: []), context: context, proven: proven)
            } else {
                let credentials = RequestParameters(pairs: [("username", user.signInName), ("password", form["password"] ?? "")])
                run = try await journeys.runWithoutPages(
                    journeys.catalog.nativePasswordSignIn, record: record, tenant: tenant, flow: userFlow, request: request, form: credentials,
                    context: context)
            }
        } catch let failure as ProtocolFailure {
            switch failure {
            case .invalidCredentials:
                _ = try await api.flows.failed(flow)
                throw NativeAuthError.wrongPassword
            case .accountLocked: throw NativeAuthError.locked
            case .accountDisabled: throw NativeAuthError.disabled
            case .multiFactorRequired: return try await secondFactorNeeded(api, flow: flow, user: user, flowRules: userFlow)
            case .grantNotConsented, .passwordChangeRequired: return NativeAuthAPI.redirect(because: "The sign-in needs the browser.")
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
        // The flow's "before sending the token" connector holds here as on every other way to
        // tokens: its values go into them, its failure ends the sign-in.
        let overrides: [String: String]
        switch await connectors.tokenClaimOverrides(
            flow: userFlow, user: signedIn, tenant: tenant, clientID: client.clientIDString, uiLocales: nil, logger: context.logger)
        {
        case .success(let values): overrides = values
        case .failure(let failure):
            throw NativeAuthError(error: "server_error", code: 90_075, message: "The sign-in's API connector failed: \(failure.reason).")
        }
        // The claims provider answers before the proof is spent: if it fails, the person may try
        // the same step again. None go into a Microsoft Graph token.
        let provided: ExtraClaims
        do {
            provided = try await providedClaims(
                flow: userFlow, tenant: tenant, client: client, user: signedIn, scopes: granted, request: request, context: context)
        } catch ProtocolFailure.extensionFailed {
            throw NativeAuthError.extensionFailure
        }
        // The proof is spent once: a request racing with the same token gets nothing.
        guard try await api.flows.finish(flow) else { throw NativeAuthError.invalidToken }
        // External ID has a native app's permissions consented by an admin (no page asks a
        // person): the grant is kept as the account's, so its refresh tokens go on as any
        // consented grant does on this face (SPEC §2.9), and never beyond what was granted.
        try await consents.grant(granted.consentKeys, userID: signedIn.id, clientID: client.clientIDString, now: now)
        let issuanceBase = IssuanceContext(
            tenant: tenant, flow: userFlow, client: client, user: signedIn,
            issuer: HostPolicy.issuer(origin: hosts.origin(of: request), tenant: tenant, face: .entra), scopes: granted, nonce: nil,
            authTime: now, newUser: proven?.newUser ?? false, identityProvider: .local, face: .entra, claimOverrides: overrides)
        var issuance = issuanceBase
        issuance.extraClaims = provided
        let refreshToken = granted.offlineAccess ? try await startFamily(issuance, now: now, forCode: nil) : nil
        return try await respond(issuance, refreshToken: refreshToken, clientInfo: true, now: now)
    }

    /// The flow's second factor stopped the sign-in: `mfa_required` with the flow's next token
    /// when the client said it can answer it and the factor is a mailed code (the API's only
    /// method here); `registration_required` first when no code has proven the account's address
    /// yet; otherwise the browser, which serves every method.
    private func secondFactorNeeded(_ api: NativeAuthAPI, flow: NativeAuthFlow, user: UserAccount, flowRules: UserFlow) async throws -> Response {
        guard flow.data.capabilities.contains("mfa_required") || !user.emailVerified else {
            return NativeAuthAPI.redirect(because: "Client is missing mfa_required capability.")
        }
        guard try await !api.usesAuthenticator(user, flow: flowRules), flowRules.mfa.methods.contains(.email), user.presentableEmail != nil else {
            return NativeAuthAPI.redirect(because: "The account's second factor needs the browser.")
        }
        // An address no code has proven is registered first (register/v1.0).
        guard user.emailVerified else {
            guard flow.data.capabilities.contains("registration_required") else {
                return NativeAuthAPI.redirect(because: "Client is missing registration_required capability.")
            }
            throw NativeAuthError.registrationRequired.continuing(try await api.advance(flow, to: .registration))
        }
        let next = try await api.advance(flow, to: .secondFactor)
        throw NativeAuthError.secondFactorRequired.continuing(next)
    }
}
