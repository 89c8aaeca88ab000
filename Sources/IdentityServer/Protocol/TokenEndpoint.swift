import Crypto
import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import UserJourneys
import Synchronization
import WireCoding

/// `POST …/oauth2/v2.0/token` (SPEC §2.4): the four grants, client authentication and the
/// B2C token response.
struct TokenEndpoint: Sendable {
    let tenants: any TenantDirectory
    let users: any UserDirectory
    let grants: any GrantStore
    /// What users granted apps on the Entra face; refresh and ROPC there stay within it.
    let consents: any ConsentStore
    let tokens: TokenIssuer
    let clock: any IdentityClock
    let hosts: HostPolicy
    /// The flows' "before sending the token" connectors, for password sign-in.
    let connectors: ConnectorCaller
    /// Runs the password grant's journey (``JourneyCatalog/passwordGrant``).
    let journeys: JourneyEngine
    /// How long a rotated refresh token still gets its successor (a client racing itself):
    /// ``IdentityServerConfiguration/refreshTokenReuseInterval``.
    let refreshReuseInterval: TimeInterval
    /// Each grant's end, granted or refused, goes to the sign-in log.
    let signIns: SignInRecorder
    /// Native authentication's sign-in (SPEC §2.15), on the routes that serve it.
    var nativeAuth: NativeAuthAPI? = nil

    /// The user a grant issued tokens for, noted where the tokens are made (``respond(_:refreshToken:clientInfo:now:)``)
    /// for the sign-in log's record of the request.
    final class GrantNote: Sendable {
        @TaskLocal static var current: GrantNote?
        private let noted = Mutex<UserAccount?>(nil)
        var user: UserAccount? {
            get { noted.withLock { $0 } }
            set { noted.withLock { $0 = newValue } }
        }
        /// What a native-authentication sign-in established: the flow's policy, whether the
        /// account was just made, and whether tokens were issued.
        private let native = Mutex<(policy: String?, newUser: Bool, issued: Bool)>((nil, false, false))
        var nativeOutcome: (policy: String?, newUser: Bool, issued: Bool) {
            get { native.withLock { $0 } }
            set { native.withLock { $0 = newValue } }
        }
    }

    /// Errors are B2C's JSON form, written by the route group's ``OAuthErrorMiddleware``.
    @Sendable func handle(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let now = clock.now
        let form = try await FormBody.read(request, context: context)
        let note = GrantNote()
        func log(_ failure: ProtocolFailure?) async {
            await signIns.granted(
                tenantID: context.tenant.id, grantType: form["grant_type"] ?? "",
                appID: form["client_id"] ?? BasicCredentials(header: request.headers[.authorization])?.user,
                policy: context.flow.name, user: note.user, attemptedName: form["username"], failure: failure, face: context.route.face,
                clientAddress: context.clientAddress, correlationID: context.correlationID, at: clock.now, logger: context.logger)
        }
        // A native-authentication sign-in's last step names its flow by continuation token.
        if form["continuation_token"] != nil, nativeAuth != nil {
            return try await GrantNote.$current.withValue(note) { try await nativeTokenLogged(request, form: form, context: context, now: now) }
        }
        do {
            let response = try await GrantNote.$current.withValue(note) { try await grant(request, form: form, now: now, context: context) }
            await log(nil)
            return response
        } catch let failure as ProtocolFailure {
            await log(failure)
            throw failure
        }
    }

    private func grant(_ request: Request, form: RequestParameters, now: Date, context: PolicyRequestContext) async throws -> Response {
        let (tenant, face) = (context.tenant, context.route.face)
        let client = try await authenticateClient(request, form: form, tenant: tenant, now: now)
        guard let named = form.nonEmpty("grant_type") else { throw ProtocolFailure.missingParameter("grant_type") }
        guard let grantType = GrantType(rawValue: named) else { throw ProtocolFailure.grantTypeNotSupported(named) }
        let flow = face.dialect.runsAppBoundFlow ? try await appBoundFlow(of: client, resolved: context.flow) : context.flow
        let origin = hosts.origin(of: request)
        let issuer = HostPolicy.issuer(origin: origin, tenant: tenant, face: face)
        let wantsClientInfo = form["client_info"] == "1"
        context.logger.debug(
            "token request",
            metadata: ["grant_type": "\(grantType.rawValue)", "client_id": "\(client.clientIDString)", "policy": "\(flow.name)"])
        switch grantType {
        case .authorizationCode:
            return try await authorizationCode(
                form, tenant: tenant, flow: flow, client: client, issuer: issuer, clientInfo: wantsClientInfo, now: now, face: face)
        case .refreshToken:
            return try await refreshToken(
                form, tenant: tenant, flow: flow, client: client, issuer: issuer, clientInfo: wantsClientInfo, now: now, face: face,
                request: request, context: context)
        case .password:
            return try await password(
                form, tenant: tenant, flow: flow, client: client, issuer: issuer, clientInfo: wantsClientInfo, now: now,
                request: request, context: context, face: face)
        case .clientCredentials:
            return try await clientCredentials(form, tenant: tenant, flow: flow, client: client, issuer: issuer, now: now, face: face)
        }
    }

    /// External ID's app-bound user flow for a policy-less request (SPEC §2.9), else the
    /// tenant's default the route resolved: the flow a code or refresh token is bound to.
    private func appBoundFlow(of client: AppRegistration, resolved: UserFlow) async throws -> UserFlow {
        guard let name = client.userFlow, name.lowercased() != resolved.name.lowercased() else { return resolved }
        // A bound flow that is gone fails closed, as at authorize: falling back to the tenant's
        // default could skip the bound flow's second factor.
        guard let flow = try await tenants.userFlow(tenantID: client.tenantID, name: name) else {
            throw ProtocolFailure.unknownPolicy(name, tenant: client.tenantID.uuidString.lowercased())
        }
        return flow
    }

    // MARK: Client authentication (RFC 6749 §2.3; https://learn.microsoft.com/azure/active-directory-b2c/openid-connect#get-a-token)

    private func authenticateClient(_ request: Request, form: RequestParameters, tenant: Tenant, now: Date) async throws -> AppRegistration
    {
        var clientID = form.nonEmpty("client_id")
        var secret = form.nonEmpty("client_secret")
        if let basic = BasicCredentials(header: request.headers[.authorization]) {
            // RFC 6749 §2.3.1: a client must not use more than one authentication method.
            if secret != nil {
                throw ProtocolFailure.malformedRequest("The client sent credentials in both the body and the Authorization header.")
            }
            if let clientID, clientID.lowercased() != basic.user.lowercased() {
                throw ProtocolFailure.malformedRequest("The client_id does not match the Authorization header.")
            }
            clientID = basic.user
            // Some libraries send `client_id:` with an empty secret for public clients.
            secret = basic.password.isEmpty ? secret : basic.password
        }
        guard let clientID else { throw ProtocolFailure.missingClientID }
        guard let client = try await tenants.application(tenantID: tenant.id, clientID: clientID) else {
            throw ProtocolFailure.clientNotRegistered(clientID, tenant: tenant.name)
        }
        switch client.kind {
        case .public:
            if secret != nil { throw ProtocolFailure.publicClientSentSecret }
        case .confidential:
            guard let secret else { throw ProtocolFailure.secretRequired }
            guard try await tenants.verifySecret(clientID: client.clientID, secret: secret, now: now) else {
                throw ProtocolFailure.secretMismatch
            }
        }
        return client
    }

    // MARK: Grants

    private func authorizationCode(
        _ form: RequestParameters, tenant: Tenant, flow: UserFlow, client: AppRegistration, issuer: String,
        clientInfo: Bool, now: Date, face: ProtocolFace
    ) async throws -> Response {
        guard let code = form.nonEmpty("code") else { throw ProtocolFailure.missingParameter("code") }
        let grant: AuthorizationCodeGrant
        switch try await grants.redeemCode(code, clientID: client.clientIDString, policy: flow.name, face: face, now: now) {
        case .unknown: throw ProtocolFailure.malformedGrant
        case .replayed: throw ProtocolFailure.grantRevoked
        case .expired(let expired): throw ProtocolFailure.grantExpired(now: now, issued: expired.createdAt, expires: expired.expiresAt)
        case .wrongBinding(let other):
            if other.clientID != client.clientIDString {
                throw ProtocolFailure.grantNotForThisEndpoint(actual: client.clientIDString, expected: other.clientID)
            }
            if other.face != face {
                throw ProtocolFailure.grantNotForThisEndpoint(actual: face.dialect.endpointName, expected: other.face.dialect.endpointName)
            }
            throw ProtocolFailure.grantNotForThisEndpoint(actual: flow.name, expected: other.policy)
        case .redeemed(let redeemed): grant = redeemed
        }
        guard grant.tenantID == tenant.id else { throw ProtocolFailure.malformedGrant }
        // RFC 6749 §4.1.3: the redirect_uri must be identical to the one authorized.
        guard let redirectURI = form.nonEmpty("redirect_uri") else { throw ProtocolFailure.missingParameter("redirect_uri") }
        guard redirectURI == grant.redirectURI else {
            throw ProtocolFailure.redirectNotRegistered(redirectURI, clientID: client.clientIDString)
        }
        try PKCE.verify(verifier: form["code_verifier"], challenge: grant.codeChallenge, method: grant.codeChallengeMethod)
        guard let user = try await users.user(id: grant.userID) else { throw ProtocolFailure.accountGone }
        guard user.accountEnabled else { throw ProtocolFailure.accountDisabled }
        let apps = try await tenants.applications(tenantID: tenant.id)
        let scopes = try GrantedScopes.resolve(grant.scopes, client: client, tenantApps: apps)
        var issuance = IssuanceContext(
            tenant: tenant, flow: flow, client: client, user: user, issuer: issuer, scopes: scopes, nonce: grant.nonce,
            authTime: grant.authTime, newUser: grant.newUser, identityProvider: grant.identityProvider, face: face,
            claimOverrides: grant.claimOverrides ?? [:])
        issuance.extraClaims = ExtraClaims(kept: grant.extraClaims, scopes: scopes)
        let refreshToken = scopes.offlineAccess ? try await startFamily(issuance, now: now, forCode: code) : nil
        return try await respond(issuance, refreshToken: refreshToken, clientInfo: clientInfo, now: now)
    }

    private func refreshToken(
        _ form: RequestParameters, tenant: Tenant, flow: UserFlow, client: AppRegistration, issuer: String,
        clientInfo: Bool, now: Date, face: ProtocolFace, request: Request, context: PolicyRequestContext
    ) async throws -> Response {
        guard let presented = form.nonEmpty("refresh_token") else { throw ProtocolFailure.missingParameter("refresh_token") }
        let replacement = Secrets.randomToken()
        let lifetime = TimeInterval(flow.lifetimes.refreshTokenSeconds)
        let clientID = client.clientIDString
        let flowName = flow.name
        let apps = try await tenants.applications(tenantID: tenant.id)
        let requested = [String].scopes(form["scope"])
        if face.asksConsent, let family = try await grants.family(ofRefreshToken: presented), family.face == face,
            family.clientID == clientID
        {
            // Refused before the rotation, so a refresh asking beyond consent does not cost the
            // client its token. Consent only grows, so the check cannot go stale before the rotation.
            var scopes = try GrantedScopes.resolve(requested.isEmpty ? family.scopes : requested, client: client, tenantApps: apps)
            scopes.offlineAccess = true
            try await requireConsent(scopes, userID: family.userID, client: client)
        }
        let outcome = try await grants.rotateRefreshToken(
            presented, replacement: replacement,
            binding: RefreshTokenBinding(tenantID: tenant.id, clientID: clientID, policy: flowName, face: face),
            admit: { family in
                // A refresh stays within its original grant (RFC 6749 §6; the security issue's M-3).
                try GrantedScopes.checkRefresh(requested, family: family, client: client, tenantApps: apps)
            },
            replacementExpiresAt: { family in
                let byLifetime = now.addingTimeInterval(lifetime)
                return family.slidingExpiresAt.map { min($0, byLifetime) } ?? byLifetime
            }, reuseInterval: refreshReuseInterval, now: now)
        let family: RefreshTokenFamily
        var issuedRefreshToken = replacement
        switch outcome {
        case .unknown: throw ProtocolFailure.malformedGrant
        case .wrongClient(let other): throw ProtocolFailure.grantNotForThisEndpoint(actual: clientID, expected: other.clientID)
        case .wrongPolicy(let other) where other.face != face:
            throw ProtocolFailure.grantNotForThisEndpoint(actual: face.dialect.endpointName, expected: other.face.dialect.endpointName)
        case .wrongPolicy(let other): throw ProtocolFailure.grantNotForThisEndpoint(actual: flowName, expected: other.policy)
        case .expired(_, let issuedAt, let expiresAt): throw ProtocolFailure.grantExpired(now: now, issued: issuedAt, expires: expiresAt)
        case .revoked, .reused: throw ProtocolFailure.grantRevoked
        case .rotated(let rotated, _): family = rotated
        case .reissued(let rotated, let successor, _):
            family = rotated
            issuedRefreshToken = successor
        }
        guard let user = try await users.user(id: family.userID) else { throw ProtocolFailure.accountGone }
        guard user.accountEnabled else { throw ProtocolFailure.accountDisabled }
        // offline_access stays granted.
        var scopes = try GrantedScopes.resolve(requested.isEmpty ? family.scopes : requested, client: client, tenantApps: apps)
        if !scopes.offlineAccess {
            scopes.offlineAccess = true
            scopes.granted.append("offline_access")
        }
        var issuance = IssuanceContext(
            tenant: tenant, flow: flow, client: client, user: user, issuer: issuer, scopes: scopes, nonce: nil,
            authTime: family.authTime, newUser: false, identityProvider: family.identityProvider, face: face,
            claimOverrides: family.claimOverrides ?? [:])
        // Tokens issued again: the flow's claims provider is asked again (its claims may have changed).
        issuance.extraClaims = try await providedClaims(flow: flow, tenant: tenant, client: client, user: user, scopes: scopes, request: request, context: context)
        return try await respond(issuance, refreshToken: issuedRefreshToken, clientInfo: clientInfo, now: now)
    }

    private func password(
        _ form: RequestParameters, tenant: Tenant, flow: UserFlow, client: AppRegistration, issuer: String,
        clientInfo: Bool, now: Date, request: Request, context: PolicyRequestContext, face: ProtocolFace
    ) async throws -> Response {
        // ROPC runs only in a ROPC user flow, for an app that allows public client flows
        // (https://learn.microsoft.com/azure/active-directory-b2c/add-ropc-policy). On the Entra face the app's "allow public client
        // flows" decides, as in an Entra app registration, within the flow it signs in with.
        try Self.admitPasswordGrant(flow: flow, face: face)
        guard client.allowPublicClientFlows else { throw ProtocolFailure.ropcNotEnabled }
        let scopes = [String].scopes(form["scope"])
        // The grant's own journey: the password, then what a sign-in with pages would ask
        // (a second factor, a temporary password's change, consent), each refused here as the
        // grant cannot ask it. The engine's rules hold as for the hosted pages.
        let attempt = AuthorizationRequest(
            tenantID: tenant.id, tenantSegment: context.route.tenantSegment, policy: flow.name, clientID: client.clientIDString,
            redirectURI: "", responseTypes: [], responseMode: .query, scopes: scopes, state: nil, nonce: nil, codeChallenge: nil,
            codeChallengeMethod: nil, prompt: nil, loginHint: nil, domainHint: nil, maxAge: nil, origin: hosts.origin(of: request),
            face: face)
        let record = InteractionRecord(id: "password-grant", request: attempt, csrfHash: "", expiresAt: now)
        let run = try await journeys.runWithoutPages(
            journeys.catalog.passwordGrant, record: record, tenant: tenant, flow: flow, request: request, form: form, context: context)
        guard let user = run.user else { throw ProtocolFailure.invalidCredentials }
        let apps = try await tenants.applications(tenantID: tenant.id)
        let granted = try GrantedScopes.resolve(scopes, client: client, tenantApps: apps)
        // The flow's "before sending the token" connector runs here as at the end of its pages:
        // its values go into these tokens, and its failure ends the grant (AADB2C90075).
        let overrides: [String: String]
        switch await connectors.tokenClaimOverrides(
            flow: flow, user: user, tenant: tenant, clientID: client.clientIDString, uiLocales: nil, logger: context.logger)
        {
        case .success(let values): overrides = values
        case .failure(let failure): throw failure.b2cError
        }
        var issuance = IssuanceContext(
            tenant: tenant, flow: flow, client: client, user: user, issuer: issuer, scopes: granted, nonce: nil,
            authTime: now, newUser: false, identityProvider: .local, face: face, claimOverrides: overrides)
        issuance.extraClaims = try await providedClaims(flow: flow, tenant: tenant, client: client, user: user, scopes: granted, request: request, context: context)
        let refreshToken = granted.offlineAccess ? try await startFamily(issuance, now: now, forCode: nil) : nil
        return try await respond(issuance, refreshToken: refreshToken, clientInfo: clientInfo, now: now)
    }

    /// Whether a password alone may sign in through `flow`. B2C: only a ROPC flow (which has
    /// no MFA, no connector and local accounts only). Entra: a sign-up-or-sign-in or sign-in
    /// flow with local accounts, and never one that asks for a second factor — Entra refuses
    /// ROPC where MFA is required (AADSTS50076, suberror `basic_action`), since the password
    /// grant has no way to ask for it (the second outside attack's F-1).
    static func admitPasswordGrant(flow: UserFlow, face: ProtocolFace) throws {
        guard face.dialect.admitsPasswordGrant(in: flow) else { throw ProtocolFailure.grantTypeNotSupported(GrantType.password.rawValue) }
        if flow.mfa.isOn { throw ProtocolFailure.multiFactorRequired }
    }

    /// An app calling an API as itself: an access token with the app as subject and no user claims.
    private func clientCredentials(
        _ form: RequestParameters, tenant: Tenant, flow: UserFlow, client: AppRegistration, issuer: String, now: Date,
        face: ProtocolFace
    ) async throws -> Response {
        guard client.kind == .confidential else { throw ProtocolFailure.grantTypeNotSupported(GrantType.clientCredentials.rawValue) }
        let apps = try await tenants.applications(tenantID: tenant.id)
        let requested = [String].scopes(form["scope"])
        guard !requested.isEmpty else { throw ProtocolFailure.missingScope }
        let scopes = try GrantedScopes.resolve(requested, client: client, tenantApps: apps, appOnly: true)
        guard let resource = scopes.resource else { throw ProtocolFailure.scopeNeedsResource(requested.joined(separator: " ")) }
        let lifetime = flow.lifetimes.accessTokenSeconds
        let roles = client.permission(on: resource.audience)?.roles ?? []
        let token = try await self.tokens.appToken(
            client: client, resource: resource, roles: roles, issuer: issuer, lifetime: lifetime, now: now, face: face, tenant: tenant,
            flow: flow)
        let body = face.dialect.appTokenResponse(token: token, resource: resource, scopes: scopes, lifetime: lifetime, now: now)
        return .json(body, noStore: true)
    }

    /// On the Entra face a grant without a page may carry only what the user consented to
    /// (SPEC §2.9): a refresh cannot move to another API's scopes, ROPC cannot skip consent.
    private func requireConsent(_ scopes: GrantedScopes, userID: UUID, client: AppRegistration) async throws {
        let granted = try await consents.granted(userID: userID, clientID: client.clientIDString)
        guard scopes.consentKeys.isSubset(of: granted) else {
            throw ProtocolFailure.grantNotConsented(clientID: client.clientIDString, name: client.displayName)
        }
    }

    // MARK: Response

    func startFamily(_ issuance: IssuanceContext, now: Date, forCode code: String?) async throws -> String {
        let token = Secrets.randomToken()
        let lifetimes = issuance.flow.lifetimes
        // The sliding window counts from the last time the user entered credentials
        // (https://learn.microsoft.com/azure/active-directory-b2c/tokens-overview#configuration).
        let sliding = lifetimes.slidingWindowSeconds.map { issuance.authTime.addingTimeInterval(TimeInterval($0)) }
        let family = RefreshTokenFamily(
            id: Secrets.randomUUIDString(), tenantID: issuance.tenant.id, clientID: issuance.client.clientIDString,
            userID: issuance.user.id, policy: issuance.flow.name, scopes: issuance.scopes.granted,
            authTime: issuance.authTime, identityProvider: issuance.identityProvider, createdAt: now,
            slidingExpiresAt: sliding, revokedAt: nil, consented: issuance.client.apiPermissions, face: issuance.face,
            claimOverrides: issuance.claimOverrides.isEmpty ? nil : issuance.claimOverrides)
        let expires = now.addingTimeInterval(TimeInterval(lifetimes.refreshTokenSeconds))
        try await grants.createFamily(family, firstToken: token, tokenExpiresAt: min(expires, sliding ?? expires), forCode: code)
        return token
    }

    /// The B2C token response, fields in B2C's order, numbers as JSON numbers
    /// (https://learn.microsoft.com/azure/active-directory-b2c/add-ropc-policy#redeem-a-refresh-token).
    func respond(_ issuance: IssuanceContext, refreshToken: String?, clientInfo: Bool, now: Date) async throws -> Response {
        GrantNote.current?.user = issuance.user
        GrantNote.current?.nativeOutcome.issued = true
        return .json(try await tokenResponse(issuance, refreshToken: refreshToken, clientInfo: clientInfo, now: now), noStore: true)
    }

    /// Tokens for a user authenticated some other way (the test-control surface's minting,
    /// ``IdentityServer/mintTokens(tenantID:_:origin:)``): the same issuer, refresh-token
    /// family and response as a grant.
    func mint(_ issuance: IssuanceContext, now: Date) async throws -> JSONText {
        let refreshToken = issuance.scopes.offlineAccess ? try await startFamily(issuance, now: now, forCode: nil) : nil
        return try await tokenResponse(issuance, refreshToken: refreshToken, clientInfo: true, now: now)
    }

    private func tokenResponse(_ issuance: IssuanceContext, refreshToken: String?, clientInfo: Bool, now: Date) async throws -> JSONText {
        // A custom policy whose signing key set lost its key since the sign-in is named, not a 500
        // (``TokenIssuer/signingKey(for:tenantID:)``).
        let tokens = try await self.tokens.issue(issuance, now: now)
        return issuance.face.dialect.tokenResponse(issuance, tokens: tokens, refreshToken: refreshToken, clientInfo: clientInfo, now: now)
    }
}
