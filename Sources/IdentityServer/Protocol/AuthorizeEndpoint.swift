import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import Synchronization
import UserJourneys
import WireCoding

/// `GET|POST …/oauth2/v2.0/authorize` (SPEC §2.3). Problems with the client or redirect URI are
/// shown on a page and never redirected (RFC 6749 §4.1.2.1); everything else goes back to the
/// app's redirect URI as a B2C error.
struct AuthorizeEndpoint: Sendable {
    let service: IdentityService
    let journeys: JourneyEngine

    /// Upper bounds on the values a transaction stores: generous for every real client
    /// (RFC 7636 §4.1 caps a verifier, so its challenge, at 128; RFC 5321 an address at 254).
    /// The public apps already told that they sign in without PKCE (one log line per app and
    /// process; only registered apps get this far, so the set stays as small as the tenant).
    static let warnedWithoutPKCE = Mutex<Set<UUID>>([])

    static let lengthLimits: [(String, Int)] = [
        ("state", 4096), ("nonce", 1024), ("scope", 2048), ("login_hint", 320), ("domain_hint", 253), ("code_challenge", 128),
        ("redirect_uri", 2048), ("max_age", 16), ("response_type", 64), ("response_mode", 32), ("prompt", 64),
    ]

    /// Page-level problems are thrown to the route group's ``PageErrorMiddleware``; once the
    /// redirect URI is trusted, errors go back to it.
    @Sendable func handle(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        var parameters = RequestParameters(query: request.uri.query)
        if request.method == .post {
            parameters = parameters.merging(try await FormBody.read(request, context: context))
        }
        // Page-level checks: client and redirect URI (tenant and policy are resolved already).
        let (tenant, face) = (context.tenant, context.route.face)
        guard let clientID = parameters.nonEmpty("client_id") else { throw ProtocolFailure.missingClientID }
        guard let client = try await service.tenants.application(tenantID: tenant.id, clientID: clientID) else {
            throw ProtocolFailure.clientNotRegistered(clientID, tenant: tenant.name)
        }
        // A policy-less (Entra) authorization runs the app's own user flow when it names one
        // (External ID, SPEC §2.9), else the tenant's default.
        let userFlow = face.dialect.runsAppBoundFlow ? try await service.entraFlow(for: client, resolved: context.flow) : context.flow
        guard !client.redirectURIs.isEmpty else { throw ProtocolFailure.noRedirectURIs(clientID: client.clientIDString) }
        guard let redirectURI = parameters.nonEmpty("redirect_uri") else { throw ProtocolFailure.missingParameter("redirect_uri") }
        guard parameters.count(of: "redirect_uri") == 1, client.isRegisteredRedirect(redirectURI) else {
            throw ProtocolFailure.redirectNotRegistered(redirectURI, clientID: client.clientIDString)
        }

        let responseTypes = Set([String].scopes(parameters["response_type"]))
        let defaultMode: ResponseMode = responseTypes == ["code"] ? .query : .fragment
        var responseMode = defaultMode
        if let mode = parameters.nonEmpty("response_mode"), let parsed = ResponseMode(rawValue: mode) { responseMode = parsed }
        let state = parameters["state"]
        do {
            let authorization = try await validate(
                parameters, tenant: tenant, userFlow: userFlow, client: client, redirectURI: redirectURI,
                responseTypes: responseTypes, responseMode: responseMode, origin: service.origin(of: request),
                tenantSegment: context.route.tenantSegment, face: face, logger: context.logger)
            return try await begin(authorization, tenant: tenant, userFlow: userFlow, request: request, context: context)
        } catch let error as ProtocolFailure {
            context.logger.info("authorize refused", metadata: ["code": "\(error.code)", "error": "\(error.oauthError)"])
            // A response mode we do not know cannot be used to answer; fall back to the default.
            return RedirectResponder.error(
                error, redirectURI: redirectURI, mode: responseMode, state: state, correlationID: context.correlationID,
                now: service.now, face: face, origin: service.origin(of: request))
        }
    }

    private func validate(
        _ parameters: RequestParameters, tenant: Tenant, userFlow: UserFlow, client: AppRegistration, redirectURI: String,
        responseTypes words: Set<String>, responseMode: ResponseMode, origin: String, tenantSegment: String, face: ProtocolFace,
        logger: Logger
    ) async throws -> AuthorizationRequest {
        try FormBody.rejectRepeats(parameters)
        // The request is stored for the length of the sign-in: each value is bounded, so an
        // anonymous caller cannot park large rows (the security issue's L-4).
        for (name, limit) in Self.lengthLimits {
            if let value = parameters[name], value.utf8.count > limit {
                throw ProtocolFailure.malformedRequest("The '\(name)' parameter is longer than \(limit) bytes.")
            }
        }
        let rawType = parameters["response_type"] ?? ""
        guard !words.isEmpty else { throw ProtocolFailure.missingParameter("response_type") }
        guard let responseTypes = ResponseType.parse(words) else { throw ProtocolFailure.responseTypeNotSupported(rawType) }
        if responseTypes.contains(.token) || responseTypes.contains(.idToken), !client.allowImplicit {
            throw ProtocolFailure.implicitNotAllowed
        }
        if let mode = parameters.nonEmpty("response_mode") {
            guard let parsed = ResponseMode(rawValue: mode) else { throw ProtocolFailure.responseModeNotSupported(mode) }
            // Tokens must not travel in a query string (OAuth 2.0 Multiple Response Type Encoding §5).
            if parsed == .query, responseTypes != [.code] { throw ProtocolFailure.responseModeNotSupported(mode) }
        }
        guard let scopeValue = parameters.nonEmpty("scope") else { throw ProtocolFailure.missingScope }
        let scopes = [String].scopes(scopeValue)
        let apps = try await service.tenants.applications(tenantID: tenant.id)
        let granted = try GrantedScopes.resolve(scopes, client: client, tenantApps: apps)
        if responseTypes.contains(.idToken), !granted.openID { throw ProtocolFailure.openIDRequiredForIDToken }
        if responseTypes.contains(.token), granted.resource == nil { throw ProtocolFailure.scopeNeedsResource(scopeValue) }
        // OIDC Core §3.2.2.1: nonce is required when an ID token comes back from /authorize.
        if responseTypes.contains(.idToken), parameters.nonEmpty("nonce") == nil { throw ProtocolFailure.missingParameter("nonce") }

        var challenge = parameters.nonEmpty("code_challenge")
        var method: CodeChallengeMethod?
        if let given = challenge {
            let named = parameters.nonEmpty("code_challenge_method") ?? CodeChallengeMethod.plain.rawValue
            guard let chosen = CodeChallengeMethod(rawValue: named), chosen == .s256 || client.allowPlainPKCE else {
                throw ProtocolFailure.challengeMethodNotSupported(named)
            }
            guard PKCE.isWellFormedChallenge(given, method: chosen) else {
                throw ProtocolFailure.malformedRequest("The code_challenge is not well formed (RFC 7636 §4.2).")
            }
            method = chosen
        } else {
            method = nil
            challenge = nil
            // As B2C has it: PKCE is optional for native and web apps, unless the registration
            // requires it (AADB2C99059) or the redirect is a single-page app's, where Entra and
            // B2C take only the code flow with PKCE. A public client without it is told once, in the log.
            if responseTypes.contains(.code) {
                if client.requiresPKCE(for: redirectURI) { throw ProtocolFailure.codeChallengeRequired }
                if client.kind == .public, Self.warnedWithoutPKCE.withLock({ $0.insert(client.clientID).inserted }) {
                    logger.warning(
                        "a public client signs in without PKCE: accepted as B2C does, but RFC 9700 §2.1.1 says public clients must use it",
                        metadata: ["client_id": "\(client.clientIDString)"])
                }
            }
        }

        var prompt: Prompt?
        if let value = parameters.nonEmpty("prompt") {
            let words = Set([String].scopes(value))
            let values = Set(words.compactMap(Prompt.init(rawValue:)))
            guard !values.isEmpty, values.count == words.count, !(values.contains(.silent) && values.count > 1) else {
                throw ProtocolFailure.invalidPrompt
            }
            // Precedence when several are given: the order of the cases.
            prompt = Prompt.allCases.first { values.contains($0) }
        }
        var maxAge: Int?
        if let value = parameters.nonEmpty("max_age") {
            guard let parsed = Int(value), parsed >= 0 else { throw ProtocolFailure.invalidMaxAge(value) }
            maxAge = parsed
        }
        guard userFlow.type != .ropc else {
            throw ProtocolFailure.malformedRequest("The user flow '\(userFlow.name)' does not support interactive sign-in.")
        }
        var authorization = AuthorizationRequest(
            tenantID: tenant.id, tenantSegment: tenantSegment, policy: userFlow.name, clientID: client.clientIDString,
            redirectURI: redirectURI, responseTypes: responseTypes.sorted(), responseMode: responseMode, scopes: scopes,
            state: parameters["state"], nonce: parameters["nonce"], codeChallenge: challenge, codeChallengeMethod: method,
            prompt: prompt, loginHint: parameters.nonEmpty("login_hint"), domainHint: parameters.nonEmpty("domain_hint")?.lowercased(),
            maxAge: maxAge, origin: origin, face: face, uiLocales: Self.uiLocales(parameters["ui_locales"]))
        // Only a custom policy reads them (`{OAUTH-KV:…}`); a user flow's transaction keeps none.
        if userFlow.customPolicy != nil {
            authorization.extraParameters = ExtraParameters.kept(from: parameters.pairs)
            if let hint = parameters.nonEmpty("id_token_hint") {
                // A JWT's three base64url parts and their dots, bounded: the transaction keeps it.
                guard hint.utf8.count <= AuthorizationRequest.maximumIDTokenHintBytes,
                    hint.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-_".contains($0)) })
                else { throw ProtocolFailure.idTokenHintRefused(expired: false) }
                // Sealed with the data key while the transaction keeps it: it is a bearer invitation.
                authorization.idTokenHint = try service.dataKey.seal(hint, context: AuthorizationRequest.idTokenHintContext)
            }
        }
        return authorization
    }

    /// `ui_locales` (OIDC Core §3.1.2.1): space-separated BCP 47 tags, kept only when each is
    /// letters, digits and hyphens (at most five tags), so nothing else reaches pages or connectors.
    static func uiLocales(_ raw: String?) -> String? {
        guard let raw else { return nil }
        let tags: [String] = raw.split(separator: " ").prefix(5).map(String.init).filter { tag in
            (1...35).contains(tag.count) && tag.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
        return tags.isEmpty ? nil : tags.joined(separator: " ")
    }

    /// Starts the transaction and its journey: SSO when possible, else the flow's first page.
    private func begin(
        _ authorization: AuthorizationRequest, tenant: Tenant, userFlow: UserFlow, request: Request,
        context: PolicyRequestContext
    ) async throws -> Response {
        let (csrf, isNewCSRF) = TransactionCookies.csrfToken(from: request)
        let id = Secrets.randomToken(byteCount: 24)
        let saved = try await service.interactions.saveInteraction(
            id: id, request: authorization, csrfHash: Secrets.sha256Hex(csrf), clientAddress: context.clientAddress,
            limitPerHour: service.configuration.transactionsPerAddressPerHour, now: service.now,
            expiresAt: service.now.addingTimeInterval(service.configuration.interactionLifetime))
        guard saved else {
            context.logger.warning("too many sign-ins started from one address", metadata: ["address": "\(context.clientAddress)"])
            throw PageError(
                status: .tooManyRequests, title: "Too many sign-ins",
                message: "Too many sign-ins were started from your network in the last hour. Try again later.")
        }
        let record = try await journeys.transaction(id)
        var response = try await journeys.start(record, tenant: tenant, flow: userFlow, request: request, context: context)
        if isNewCSRF {
            response.setCookie(BrowserCookies(secure: service.configuration.secureCookies).cookie(TransactionCookies.csrf, value: csrf))
        }
        return response
    }
}
