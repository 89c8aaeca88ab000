import Foundation
import Logging
import WireCoding

/// The state both client applications share: discovery, the token store, refreshes in flight.
/// One actor owns it, so concurrent silent calls for the same account and scopes share one
/// refresh request (the rotated refresh token can be redeemed only once).
actor TokenBroker {
    let clientID: String
    let clientSecret: String?
    let authority: Authority
    let store: any TokenStore
    let transport: any HTTPTransport
    let logger: Logger
    let clock: @Sendable () -> Date
    let discovery: DiscoveryCache
    private var refreshes: [String: Task<AuthenticationResult, any Error>] = [:]

    /// Tokens are renewed this long before they expire, so a request never leaves with a token
    /// about to lapse (MSAL's and Okta's default).
    static let expiryBuffer: TimeInterval = 300

    /// - Parameter discovery: shared with another broker of the same client (one per web session).
    init(configuration: ClientConfiguration, clientSecret: String?, discovery: DiscoveryCache? = nil) {
        clientID = configuration.clientID
        self.clientSecret = clientSecret
        authority = configuration.authority
        store = configuration.tokenStore
        transport = configuration.transport
        logger = configuration.logger
        clock = configuration.clock
        self.discovery = discovery ?? DiscoveryCache(transport: configuration.transport)
    }

    func authority(policy: String?) -> Authority { authority.with(policy: policy) }

    func configuration(_ authority: Authority) async throws -> OpenIDConfiguration {
        try await discovery.configuration(for: authority, now: clock())
    }

    // MARK: Authorization code

    func authorizationRequest(
        _ parameters: InteractiveParameters, redirectURI: String, responseMode: ResponseMode
    ) async throws -> AuthorizationRequest {
        let authority = authority(policy: parameters.policy)
        let configuration = try await configuration(authority)
        let pkce = PKCE()
        let state = Secrets.randomToken(byteCount: 24)
        let nonce = Secrets.randomToken(byteCount: 24)
        let correlationID = parameters.correlationID ?? UUID()
        var fields: [(String, String)] = [
            ("client_id", clientID), ("response_type", "code"), ("redirect_uri", redirectURI),
            ("scope", Scopes.request(parameters.scopes)), ("response_mode", responseMode.rawValue), ("state", state), ("nonce", nonce),
            ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method),
            ("client-request-id", correlationID.uuidString.lowercased()),
        ]
        if let prompt = parameters.prompt { fields.append(("prompt", prompt.rawValue)) }
        if let hint = parameters.loginHint { fields.append(("login_hint", hint)) }
        if let hint = parameters.domainHint { fields.append(("domain_hint", hint)) }
        let reserved = Set(fields.map(\.0))
        for (name, value) in parameters.extraQueryParameters.sorted(by: { $0.key < $1.key }) where !reserved.contains(name) {
            fields.append((name, value))
        }
        // The endpoint may already carry a query (B2C's `?p=` form); append to it.
        let endpoint = configuration.authorizationEndpoint.absoluteString
        let separator = endpoint.contains("?") ? "&" : "?"
        guard let url = URL(string: endpoint + separator + FormEncoding.encode(fields)) else {
            throw IdentityError.invalidConfiguration("bad authorization endpoint \(endpoint)")
        }
        return AuthorizationRequest(
            url: url, state: state, nonce: nonce, codeVerifier: pkce.verifier, redirectURI: redirectURI, authority: authority.url,
            scopes: parameters.scopes, correlationID: correlationID.uuidString.lowercased())
    }

    /// Checks the redirect's parameters against the request and redeems the code.
    func redeem(_ request: AuthorizationRequest, response parameters: [String: String]) async throws -> AuthenticationResult {
        // state first: an error response with a foreign state is not ours to report either.
        guard let state = parameters["state"], Secrets.constantTimeEquals(state, request.state) else { throw IdentityError.stateMismatch }
        if let error = parameters["error"] {
            throw IdentityError.fromOAuth(error: error, description: parameters["error_description"], correlationID: request.correlationID)
        }
        guard let code = parameters["code"], !code.isEmpty else {
            throw IdentityError.server(
                error: "invalid_response", description: "the redirect carried no code", code: nil, correlationID: nil)
        }
        let authority = try Authority(request.authority)
        return try await redeemToken(
            authority: authority,
            fields: [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                ("code_verifier", request.codeVerifier), ("scope", Scopes.request(request.scopes)),
            ], scopes: request.scopes, nonce: request.nonce, correlationID: request.correlationID, makeCurrent: true)
    }

    // MARK: ROPC

    func acquireToken(username: String, password: String, scopes: [String], policy: String?) async throws -> AuthenticationResult {
        try await redeemToken(
            authority: authority(policy: policy),
            fields: [("grant_type", "password"), ("username", username), ("password", password), ("scope", Scopes.request(scopes))],
            scopes: scopes, nonce: nil, correlationID: UUID().uuidString.lowercased(), makeCurrent: true)
    }

    // MARK: Silent

    func acquireTokenSilent(scopes: [String], account: Account, forceRefresh: Bool) async throws -> AuthenticationResult {
        let clientID = self.clientID
        let cache = try await store.read()
        guard let entry = cache.entries.first(where: { $0.matches(account, clientID: clientID) }) else {
            throw IdentityError.interactionRequired(reason: "no tokens are cached for this account", code: nil, correlationID: nil)
        }
        let key = Scopes.key(scopes)
        let now = clock()
        if !forceRefresh, let cached = entry.cachedResult(covering: key, scopes: scopes, now: now) { return cached }
        let refreshKey = "\(account.environment)|\(account.homeAccountID)|\(key.joined(separator: " "))"
        if let running = refreshes[refreshKey] { return try await running.value }
        let task = Task { try await self.refresh(entry: entry, scopes: scopes) }
        refreshes[refreshKey] = task
        defer { refreshes[refreshKey] = nil }
        return try await task.value
    }

    private func refresh(entry: TokenCacheEntry, scopes: [String]) async throws -> AuthenticationResult {
        try await store.whileRefreshing { try await self.refreshHoldingStore(entry: entry, scopes: scopes) }
    }

    private func refreshHoldingStore(entry: TokenCacheEntry, scopes: [String]) async throws -> AuthenticationResult {
        // Another process or request may have refreshed (and rotated the refresh token) since the
        // cache was read: start from what is stored now, and use its fresh token if it has one.
        let clientID = self.clientID
        let latest = try await store.readLatest().entries.first { $0.matches(entry.account, clientID: clientID) } ?? entry
        let key = Scopes.key(scopes)
        if latest.refreshToken != entry.refreshToken, let fresh = latest.cachedResult(covering: key, scopes: scopes, now: clock()) {
            return fresh
        }
        guard let refreshToken = latest.refreshToken else {
            throw IdentityError.interactionRequired(reason: "no refresh token is cached", code: nil, correlationID: nil)
        }
        let authority = try Authority(latest.authority)
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        // B2C (like MSAL) names the scopes on refresh; a plain OpenID provider gets none, which
        // means "as originally granted" (RFC 6749 §6) and never asks for more than was granted.
        if case .b2c = authority.kind { fields.append(("scope", Scopes.request(scopes))) }
        do {
            return try await redeemToken(
                authority: authority,
                fields: fields,
                scopes: scopes, nonce: nil, correlationID: UUID().uuidString.lowercased(), makeCurrent: false, previous: latest)
        } catch let error as IdentityError {
            if case .interactionRequired = error {
                // A refused refresh token never works again: forget it (only it, not one that
                // another process stored meanwhile) so later calls fail fast.
                _ = try? await store.modify { cache in
                    for index in cache.entries.indices
                    where cache.entries[index].matches(latest.account, clientID: clientID)
                        && cache.entries[index].refreshToken == refreshToken
                    {
                        cache.entries[index].refreshToken = nil
                        cache.entries[index].accessTokens = []
                    }
                }
            }
            throw error
        }
    }

    // MARK: Token endpoint

    private func redeemToken(
        authority: Authority, fields: [(String, String)], scopes: [String], nonce: String?, correlationID: String, makeCurrent: Bool,
        previous: TokenCacheEntry? = nil
    ) async throws -> AuthenticationResult {
        let configuration = try await configuration(authority)
        var form = fields + [("client_info", "1")]
        var headers = ["Accept": "application/json", "client-request-id": correlationID, "return-client-request-id": "true"]
        if let clientSecret {
            // client_secret_basic: the method every server must support (RFC 6749 §2.3.1), with
            // both parts form-encoded before base64.
            let credentials = "\(FormEncoding.escape(clientID)):\(FormEncoding.escape(clientSecret))"
            headers["Authorization"] = "Basic \(Data(credentials.utf8).base64EncodedString())"
        } else {
            form.append(("client_id", clientID))
        }
        let request = TransportRequest.form(configuration.tokenEndpoint, form, headers: headers)
        logger.debug(
            "token request",
            metadata: ["grant": "\(fields.first?.1 ?? "")", "authority": "\(authority.url)", "correlation_id": "\(correlationID)"])
        let response = try await transport.send(request)
        return try await accept(
            response, authority: authority, configuration: configuration, scopes: scopes, nonce: nonce, correlationID: correlationID,
            makeCurrent: makeCurrent, previous: previous)
    }

    /// A token endpoint's answer: its error thrown, or its tokens checked (the ID token's
    /// issuer, audience, expiry and `nonce`) and stored before this returns.
    func accept(
        _ response: TransportResponse, authority: Authority, configuration: OpenIDConfiguration, scopes: [String], nonce: String?,
        correlationID: String, makeCurrent: Bool, previous: TokenCacheEntry? = nil
    ) async throws -> AuthenticationResult {
        let tokens: TokenResponse
        do {
            tokens = try TokenResponse.parse(response, requestCorrelationID: correlationID)
        } catch {
            logger.info("token request refused", metadata: ["error": "\(error)", "correlation_id": "\(correlationID)"])
            throw error
        }
        let now = clock()
        let idToken: IDToken?
        if let raw = tokens.idToken {
            let token = try IDToken(raw)
            try token.validate(issuer: configuration.issuer, clientID: clientID, nonce: nonce, now: now)
            idToken = token
        } else if nonce != nil {
            throw IdentityError.invalidIDToken("the response carried no ID token")
        } else {
            idToken = nil
        }
        guard let account = Self.account(idToken: idToken, clientInfo: tokens.clientInfo, authority: authority) ?? previous?.account else {
            throw IdentityError.invalidIDToken("the response identifies no account (no ID token, no client_info)")
        }
        let expiresOn = now.addingTimeInterval(TimeInterval(tokens.expiresIn ?? 3600))
        let key = Scopes.key(scopes)
        let clientID = self.clientID
        let authorityURL = authority.url
        // Stored before returning: the old refresh token is spent once the server rotated it.
        try await store.modify { cache in
            var entry =
                cache.entries.first { $0.matches(account, clientID: clientID) }
                ?? TokenCacheEntry(account: account, clientID: clientID, authority: authorityURL, accessTokens: [])
            entry.account = account
            entry.authority = authorityURL
            if let refreshToken = tokens.refreshToken { entry.refreshToken = refreshToken }
            if let raw = idToken?.raw { entry.idToken = raw }
            entry.accessTokens.removeAll { Set($0.scopes) == Set(key) || $0.expiresOn <= now }
            if let accessToken = tokens.accessToken {
                entry.accessTokens.append(CachedAccessToken(scopes: key, token: accessToken, expiresOn: expiresOn))
            }
            cache.entries.removeAll { $0.matches(account, clientID: clientID) }
            cache.entries.append(entry)
            if makeCurrent || cache.currentAccountID == nil { cache.currentAccountID = account.homeAccountID }
        }
        logger.debug("tokens stored", metadata: ["account": "\(account.homeAccountID)", "correlation_id": "\(correlationID)"])
        return AuthenticationResult(
            accessToken: tokens.accessToken ?? "", expiresOn: expiresOn, idToken: idToken, account: account, scopes: scopes,
            correlationID: correlationID, fromCache: false)
    }

    /// The account named by a token response: `client_info` gives MSAL's home account id
    /// (`uid.utid`); without it, the ID token's `sub` (and `tid` when present).
    static func account(idToken: IDToken?, clientInfo: String?, authority: Authority) -> Account? {
        let info = ClientInfo(encoded: clientInfo)
        let homeAccountID: String
        if let info {
            homeAccountID = "\(info.uid).\(info.utid)"
        } else if let subject = idToken?.subject {
            homeAccountID = idToken?["tid"]?.stringValue.map { "\(subject).\($0)" } ?? subject
        } else {
            return nil
        }
        let policy = authority.policy ?? idToken?["tfp"]?.stringValue ?? idToken?["acr"]?.stringValue
        return Account(
            homeAccountID: homeAccountID, environment: authority.environment, username: idToken?.username, name: idToken?.name,
            objectID: idToken?.objectID, tenantID: info?.utid ?? idToken?["tid"]?.stringValue, policy: policy,
            claims: idToken?.claims ?? [:])
    }

    // MARK: Accounts

    func accounts() async throws -> [Account] {
        let clientID = self.clientID
        return try await store.read().entries.filter { $0.clientID == clientID }.map(\.account)
    }

    func currentAccount() async throws -> Account? {
        let cache = try await store.read()
        let clientID = self.clientID
        let mine = cache.entries.filter { $0.clientID == clientID }
        return mine.first { $0.account.homeAccountID == cache.currentAccountID }?.account ?? mine.first?.account
    }

    func setCurrent(_ account: Account) async throws {
        let clientID = self.clientID
        try await store.modify { cache in
            guard cache.entries.contains(where: { $0.matches(account, clientID: clientID) }) else {
                throw IdentityError.accountNotFound(account.homeAccountID)
            }
            cache.currentAccountID = account.homeAccountID
        }
    }

    /// Forgets the account's tokens. Returns the ID token (for a browser sign-out's hint).
    @discardableResult
    func remove(_ account: Account) async throws -> String? {
        let clientID = self.clientID
        return try await store.modify { cache in
            let idToken = cache.entries.first { $0.matches(account, clientID: clientID) }?.idToken
            cache.entries.removeAll { $0.matches(account, clientID: clientID) }
            if cache.currentAccountID == account.homeAccountID { cache.currentAccountID = cache.entries.first?.account.homeAccountID }
            return idToken
        }
    }

    /// `end_session_endpoint` with `id_token_hint`, `post_logout_redirect_uri` and `state`
    /// (OpenID Connect RP-Initiated Logout 1.0 §2).
    func endSessionURL(account: Account, idToken: String?, postLogoutRedirectURI: String?, state: String?) async throws -> URL {
        // The account's own user flow: the session to end is the one its tokens came from.
        let configuration = try await configuration(authority.with(policy: account.policy))
        guard let endpoint = configuration.endSessionEndpoint else {
            throw IdentityError.invalidConfiguration("the identity service publishes no end_session_endpoint")
        }
        var fields: [(String, String)] = []
        if let idToken { fields.append(("id_token_hint", idToken)) } else { fields.append(("client_id", clientID)) }
        if let postLogoutRedirectURI { fields.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
        if let state { fields.append(("state", state)) }
        let text = endpoint.absoluteString
        guard let url = URL(string: text + (text.contains("?") ? "&" : "?") + FormEncoding.encode(fields)) else {
            throw IdentityError.invalidConfiguration("bad end_session_endpoint \(text)")
        }
        return url
    }
}

extension TokenCacheEntry {
    /// A cached access token for these scopes with more than the expiry buffer left, as a result.
    func cachedResult(covering key: [String], scopes: [String], now: Date) -> AuthenticationResult? {
        guard let cached = accessTokens.first(where: { Set($0.scopes).isSuperset(of: key) }),
            cached.expiresOn.timeIntervalSince(now) > TokenBroker.expiryBuffer
        else { return nil }
        return AuthenticationResult(
            accessToken: cached.token, expiresOn: cached.expiresOn, idToken: idToken.map { IDToken(raw: $0, claims: account.claims) },
            account: account, scopes: scopes, correlationID: "", fromCache: true)
    }
}
