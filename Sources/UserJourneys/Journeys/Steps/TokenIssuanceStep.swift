import Crypto
import Foundation
import Hummingbird
import IdentityDirectory
import TrustFramework
import WireCoding

/// The journey's last step (B2C's `SendClaims` with its `JwtIssuer`): the flow's "before sending
/// the token" connector and OnTokenIssuanceStart extension, then the app's code and/or tokens in
/// the requested response mode, and the SSO session the browser keeps.
struct TokenIssuanceStep: OrchestrationStep {
    let tenants: any TenantDirectory
    let interactions: any InteractionStore
    let grants: any GrantStore
    let connectors: ConnectorCaller
    let issuer: TokenIssuer
    let extensions: PageExtensions
    let sessions: SingleSignOnSessions
    let codeLifetime: TimeInterval

    let id = "JwtIssuer"
    var actsForUser: Bool { true }
    var servesPolicySubject: Bool { true }

    /// The native-client redirect URI of the ADAL era (RFC 8252's predecessor, "out of band").
    static let outOfBand = "urn:ietf:wg:oauth:2.0:oob"

    /// The id of the SSO session the journey ends with: the one it continues, unless a second
    /// factor passed in this journey now backs a session that had none (then a new session that
    /// says so), else a new one.
    static func sessionID(for user: UserAccount, sessions: SingleSignOnSessions, _ run: inout JourneyRun) async throws -> String {
        let claims = run.claims
        if let hash = claims.sessionHash {
            // The engine entered this step only while the session lives; its id is the cookie's.
            guard let id = sessions.id(hashed: hash, in: run.request, tenant: run.tenant) else {
                throw PageError(
                    status: .forbidden, title: "Sign in again",
                    message: "Your session ended while you were signing in. Return to the application and start again.")
            }
            if claims.sessionHasSecondFactor || !claims.secondFactorPassedNow { return id }
        }
        let id = try await sessions.start(
            user: user, identityProvider: claims.identityProvider ?? user.identityProvider, authTime: claims.authTime ?? run.now,
            secondFactor: claims.secondFactorPassedNow, tenant: run.tenant)
        run.claims.sessionHash = Secrets.sha256Hex(id)
        run.claims.sessionHasSecondFactor = claims.secondFactorPassedNow
        return id
    }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        let user: UserAccount
        var policySubject: String?
        if let signedIn = run.user {
            user = signedIn
        } else {
            // A custom policy that signed nobody in (the engine lets no other journey here
            // without an account): its token names the relying party's subject.
            guard let program = run.flow.customPolicy, run.claims.userID == nil else { throw JourneyEngine.notThisStep }
            let resolver = PolicyClaimResolver(run, policyID: program.policy.id)
            guard let subject = PolicyTokenClaims.subject(program.policy, claims: run.state.policyClaims ?? PolicyClaims(), resolver: resolver)
            else { return .fail(.policyNotRunnable("The journey signed nobody in, and its relying party sends no subject.")) }
            // Departure, named in the README: a code or refresh token here names an account, and
            // an access token's subject is what APIs key their data by (the Task API: `oid`, else
            // `sub`), so a subject the policy made up gets an ID token only, on B2C's face.
            if run.authorization.wantsCode || run.authorization.wantsAccessToken || run.authorization.protocolFace != .b2c {
                return .fail(.policyNotRunnable("A journey that signs nobody in answers response_type=id_token here (no code, no access token)."))
            }
            user = Self.policySubjectAccount(subject, tenantID: run.tenant.id, now: run.now)
            policySubject = subject
        }
        let now = run.now
        let authorization = run.authorization
        let (tenant, flow) = (run.tenant, run.flow)
        guard let client = try await tenants.application(tenantID: tenant.id, clientID: authorization.clientID) else {
            throw PageError(status: .badRequest, title: "Unknown application", message: "The application is no longer registered.")
        }
        let identityProvider = run.claims.identityProvider ?? user.identityProvider
        let authTime = run.claims.authTime ?? now
        let newUser = run.claims.newUser
        // B2C's "Before sending the token" connector: its values go into this sign-in's tokens.
        var overrides: [String: String] = [:]
        if let program = flow.customPolicy {
            // The subject the policy's claims name must be the account signed in.
            if policySubject == nil, let subject = run.state.policyClaims?.text("objectId"), subject != user.objectID {
                return .fail(.policyNotRunnable("The policy's objectId is not the account signed in."))
            }
            // The JWT issuer's key set must hold a signing key before the journey completes, so a
            // missing key is named on the page, not found later at the token endpoint.
            do {
                _ = try await issuer.signingKey(for: flow, tenantID: tenant.id)
            } catch let failure as ProtocolFailure {
                return .fail(failure)
            }
            let resolver = PolicyClaimResolver(run, policyID: program.policy.id)
            overrides = PolicyTokenClaims.values(program.policy, claims: run.state.policyClaims ?? PolicyClaims(), resolver: resolver)
        } else {
            switch await connectors.tokenClaimOverrides(
            flow: flow, user: user, tenant: tenant, clientID: authorization.clientID, uiLocales: authorization.uiLocales,
            logger: run.logger)
            {
            case .success(let values): overrides = values
            case .failure(let failure): return .fail(failure.b2cError)
            }
        }
        // External ID's OnTokenIssuanceStart (a custom claims provider): its claims go into this
        // sign-in's tokens; its failure ends the sign-in before any code. Not for a sign-in for
        // Microsoft Graph, whose tokens carry only what Graph grants.
        var provided = ExtraClaims()
        if flow.extensions.onTokenIssuanceStart != nil {
            let apps = try await tenants.applications(tenantID: tenant.id)
            if (try? GrantedScopes.resolve(authorization.scopes, client: client, tenantApps: apps))?.isForMicrosoftGraph != true {
                switch try await extensions.tokenClaims(run, client: client, user: user) {
                case .success(let claims): provided = claims
                case .failure(let failure): return .fail(failure)
                }
            }
        }
        // Each transaction yields one result: two racing requests cannot both issue. The
        // completion, its code and the answer kept for a reload commit together (issue 51): a
        // crash leaves either a transaction still to finish or one whose answer can be sent again.
        let recordID = run.record.id
        let (parameters, code) = try await interactions.atomically { () async throws -> ([(String, String)], String?) in
            guard try await interactions.completeInteraction(id: recordID, now: now) else { throw JourneyEngine.alreadyCompleted }
            var parameters: [(String, String)] = []
            var code: String?
            if authorization.wantsCode {
                let value = Secrets.randomToken()
                let grant = AuthorizationCodeGrant(
                    tenantID: tenant.id, clientID: client.clientIDString, userID: user.id, policy: flow.name,
                    redirectURI: authorization.redirectURI, scopes: authorization.scopes, nonce: authorization.nonce,
                    codeChallenge: authorization.codeChallenge, codeChallengeMethod: authorization.codeChallengeMethod,
                    authTime: authTime, newUser: newUser, identityProvider: identityProvider, createdAt: now,
                    expiresAt: now.addingTimeInterval(codeLifetime), face: authorization.protocolFace,
                    claimOverrides: overrides.isEmpty ? nil : overrides, extraClaims: provided.stored.isEmpty ? nil : provided.stored)
                try await grants.saveCode(value, grant: grant)
                code = value
                parameters.append(("code", value))
            }
            if authorization.wantsIDToken || authorization.wantsAccessToken {
                let apps = try await tenants.applications(tenantID: tenant.id)
                var scopes = try GrantedScopes.resolve(authorization.scopes, client: client, tenantApps: apps)
                if !authorization.wantsAccessToken { scopes.resource = nil }
                if !authorization.wantsIDToken { scopes.openID = false }
                let face = authorization.protocolFace
                var issuance = IssuanceContext(
                    tenant: tenant, flow: flow, client: client, user: user,
                    issuer: HostPolicy.issuer(origin: authorization.origin, tenant: tenant, face: face), scopes: scopes,
                    nonce: authorization.nonce, authTime: authTime, newUser: newUser, identityProvider: identityProvider, face: face,
                    claimOverrides: overrides)
                issuance.extraClaims = ExtraClaims(kept: provided.stored, scopes: scopes)
            issuance.policySubject = policySubject
                let tokens = try await issuer.issue(issuance, now: now, code: code, hashAccessToken: true)
                if let accessToken = tokens.accessToken {
                    parameters += [
                        ("access_token", accessToken), ("token_type", "Bearer"), ("expires_in", String(tokens.accessTokenLifetime)),
                        ("scope", scopes.granted.joined(separator: " ")),
                    ]
                }
                if let idToken = tokens.idToken { parameters.append(("id_token", idToken)) }
            }
            if let state = authorization.state { parameters.append(("state", state)) }
            if code != nil, let clientInfo = authorization.protocolFace.dialect.authorizeClientInfo(user: user, tenant: tenant) {
                parameters.append(("client_info", clientInfo))
            }
            // Kept for a reload only when it is a code alone: an answer carrying tokens is not
            // stored, as a later person at the same browser could be sent on with them.
            if code != nil, !parameters.contains(where: { $0.0 == "id_token" || $0.0 == "access_token" }) {
                try await interactions.saveAnswer(id: recordID, parameters: parameters)
            }
            return (parameters, code)
        }
        run.logger.info(
            "interaction completed",
            metadata: [
                "oid": "\(user.objectID)", "policy": "\(flow.name)", "client_id": "\(client.clientIDString)", "new_user": "\(newUser)",
            ])
        var response: Response
        if authorization.redirectURI == Self.outOfBand, let code {
            // As B2C does: the browser is sent on to `urn:ietf:wg:oauth:2.0:oob?code=…&state=…`,
            // which the embedded web views of the ADAL-era apps watch for (SPEC §2.8); a desktop
            // browser cannot follow it and stays on the page, which shows the code to a person.
            let target = Self.outOfBand + "?" + FormEncoding.encode(parameters)
            response = try run.page(
                .outOfBand, ["title": run.text("oob_title"), "code": code, "navigateTo": target])
        } else {
            response = RedirectResponder.respond(
                redirectURI: authorization.redirectURI, mode: authorization.responseMode, parameters: parameters)
        }
        // A subject that is no account has no single-sign-on session to start.
        if policySubject == nil {
            let sessionID = try await Self.sessionID(for: user, sessions: sessions, &run)
            run.cookies.append(sessions.cookie(current: sessionID, request: run.request, tenant: tenant))
        }
        return .finish(response)
    }

    /// The account a policy subject stands in for while its tokens are made: stored nowhere,
    /// its id derived from the tenant and the subject (the same subject, the same id).
    static func policySubjectAccount(_ subject: String, tenantID: UUID, now: Date) -> UserAccount {
        var bytes = Array(SHA256.hash(data: Data("policy-subject|\(tenantID.uuidString.lowercased())|\(subject)".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50  // a name-based UUID's version and variant bits
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let id = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        return UserAccount(
            id: id, tenantID: tenantID, identityProvider: .local, signInName: subject, email: nil, displayName: "", createdAt: now, emailVerified: false)
    }
}
