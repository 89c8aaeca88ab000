import Foundation
import IdentityDirectory
import WireCoding

/// The Microsoft identity platform's protocol (Entra ID v2, External ID; SPEC §2.9): one
/// discovery document per authority (a `{tenantid}` template for `common`), v2.0 tokens with
/// `tid`, a pairwise `sub` and `preferred_username`, the v2 token response, `client_info`
/// without a policy, and `AADSTS` errors with their `error_uri`.
struct EntraDialect: ProtocolDialect {
    var face: ProtocolFace { .entra }
    var endpointName: String { "the Microsoft identity platform endpoint" }
    var runsAppBoundFlow: Bool { true }
    var offersAccountPicker: Bool { true }
    var singleSignOnFollowsLoginHint: Bool { true }
    var handsPasswordResetToApp: Bool { false }
    func admitsPasswordGrant(in flow: UserFlow) -> Bool {
        [.signUpOrSignIn, .signIn, .ropc].contains(flow.type) && flow.offersLocalAccounts
    }

    func issuer(origin: String, tenant: Tenant) -> String { "\(origin)/\(tenant.guid)/v2.0" }

    /// The document Entra publishes at `{authority}/v2.0/.well-known/openid-configuration`: for
    /// `common`, `organizations` and `consumers` the issuer is the literal template
    /// `{base}/{tenantid}/v2.0` that validators fill with a token's `tid`; for a tenant it is
    /// that tenant's v2 issuer. Graph and `userinfo` are served on this host.
    func discovery(origin: String, tenant: Tenant, flow: UserFlow, route: PolicyRoute) -> JSONText {
        var body = JSONObjectBuilder()
        body.set("token_endpoint", route.url(origin: origin, for: .token))
        body.set("token_endpoint_auth_methods_supported", ["client_secret_post", "client_secret_basic"])
        body.set("jwks_uri", route.url(origin: origin, for: .keys))
        body.set("response_modes_supported", ["query", "fragment", "form_post"])
        body.set("subject_types_supported", ["pairwise"])
        body.set("id_token_signing_alg_values_supported", ["RS256"])
        body.set("response_types_supported", ["code", "id_token", "code id_token", "id_token token"])
        body.set("scopes_supported", ["openid", "profile", "email", "offline_access"])
        body.set(
            "issuer",
            route.isMultiTenantAlias ? "\(origin)/{tenantid}/v2.0" : issuer(origin: origin, tenant: tenant))
        body.set("request_uri_parameter_supported", false)
        body.set("userinfo_endpoint", "\(origin)/oidc/userinfo")
        body.set("authorization_endpoint", route.url(origin: origin, for: .authorize))
        body.set("http_logout_supported", true)
        body.set("frontchannel_logout_supported", true)
        body.set("end_session_endpoint", route.url(origin: origin, for: .logout))
        body.set(
            "claims_supported",
            [
                "sub", "iss", "cloud_instance_name", "cloud_instance_host_name", "cloud_graph_host_name", "msgraph_host", "aud", "exp",
                "iat", "auth_time", "acr", "nonce", "preferred_username", "name", "tid", "ver", "at_hash", "c_hash", "email",
            ])
        body.set("code_challenge_methods_supported", ["S256"])
        if route.isMultiTenantAlias {
            body.set("tenant_region_scope", json: .null)
        } else {
            body.set("tenant_region_scope", "NA")
        }
        let host = URLComponents(string: origin)?.host ?? origin
        body.set("cloud_instance_name", host)
        body.set("cloud_graph_host_name", host)
        body.set("msgraph_host", String(origin.drop { $0 != ":" }.dropFirst(3)))
        return body.object
    }

    /// Entra's v2.0 ID token: `ver` 2.0, `tid`, a pairwise `sub`, `preferred_username`, `uti`
    /// (learn.microsoft.com/entra/identity-platform/id-token-claims-reference), claims in the
    /// order Entra writes them.
    func idTokenClaims(
        _ context: IssuanceContext, now: Date, lifetime: Int, code: String?, accessToken: String?
    ) -> JSONText {
        var claims = JSONObjectBuilder()
        let iat = now.epochSeconds
        claims.set("aud", context.client.clientIDString)
        claims.set("iss", context.issuer)
        claims.set("iat", iat)
        claims.set("nbf", iat)
        claims.set("exp", iat + Int64(lifetime))
        if context.identityProvider != .local { claims.set("idp", context.identityProvider.rawValue) }
        let user = TokenIssuer.withConnectorValues(context)
        claims.set("name", user.displayName)
        claims.set("nonce", context.nonce)
        claims.set("oid", context.user.objectID)
        claims.set("preferred_username", TokenIssuer.preferredUsername(context.user, tenant: context.tenant))
        claims.set("sub", TokenIssuer.pairwiseSubject(context.user, clientID: context.client.clientIDString, tenant: context.tenant))
        claims.set("tid", context.tenant.guid)
        claims.set("uti", TokenIssuer.uniqueTokenID())
        claims.set("ver", "2.0")
        if let code { claims.set("c_hash", TokenIssuer.halfHash(code)) }
        if let accessToken { claims.set("at_hash", TokenIssuer.halfHash(accessToken)) }
        // The token connector's values (External ID's custom claims provider at token issuance),
        // as the flow's claims select them.
        let selected = Set(context.flow.applicationClaims)
        for attribute in UserAttribute.allCases where attribute != .displayName && selected.contains(attribute.claimName) {
            if context.claimOverrides[attribute.rawValue] != nil, let value = user.value(of: attribute), !value.isEmpty {
                claims.set(attribute.claimName, value)
            }
        }
        for attribute in context.tenant.userAttributes where selected.contains(attribute.claimName) {
            if let value = context.claimOverrides[attribute.claimName] { claims.set(attribute.claimName, json: attribute.json(value)) }
        }
        return claims.object
    }

    /// Entra's v2.0 access token (access-token-claims-reference): `aud` is the resource (Graph's
    /// `00000003-…` for `User.Read`), `scp` the granted scopes, `azp` and `appid` the client.
    func accessTokenClaims(_ context: IssuanceContext, resource: TokenResource, now: Date, lifetime: Int) -> JSONText {
        var claims = JSONObjectBuilder()
        let iat = now.epochSeconds
        claims.set("aud", resource.audience)
        claims.set("iss", context.issuer)
        claims.set("iat", iat)
        claims.set("nbf", iat)
        claims.set("exp", iat + Int64(lifetime))
        claims.set("appid", context.client.clientIDString)
        claims.set("azp", context.client.clientIDString)
        claims.set("name", context.user.displayName)
        claims.set("oid", context.user.objectID)
        claims.set("preferred_username", TokenIssuer.preferredUsername(context.user, tenant: context.tenant))
        if !resource.scopeNames.isEmpty { claims.set("scp", resource.scopeNames.joined(separator: " ")) }
        claims.set("sub", TokenIssuer.pairwiseSubject(context.user, clientID: context.client.clientIDString, tenant: context.tenant))
        claims.set("tid", context.tenant.guid)
        claims.set("uti", TokenIssuer.uniqueTokenID())
        claims.set("ver", "2.0")
        return claims.object
    }

    func appTokenClaims(client: AppRegistration, tenant: Tenant?, into claims: inout JSONObjectBuilder) {
        claims.set("appid", client.clientIDString)
        if let tenant { claims.set("tid", tenant.guid) }
        claims.set("uti", TokenIssuer.uniqueTokenID())
        claims.set("ver", "2.0")
    }

    /// The v2 token response, fields in Entra's order: no v1 `not_before`/`expires_on`/`resource`
    /// and no B2C `profile_info`; `ext_expires_in` beside `expires_in`; `client_info` without a
    /// policy.
    func tokenResponse(_ issuance: IssuanceContext, tokens: IssuedTokens, refreshToken: String?, clientInfo: Bool, now: Date) -> JSONText {
        var body = JSONObjectBuilder()
        body.set("token_type", "Bearer")
        body.set("scope", issuance.scopes.granted.joined(separator: " "))
        if tokens.accessToken != nil {
            body.set("expires_in", tokens.accessTokenLifetime)
            body.set("ext_expires_in", tokens.accessTokenLifetime)
        }
        body.set("access_token", tokens.accessToken)
        body.set("refresh_token", refreshToken)
        body.set("id_token", tokens.idToken)
        if clientInfo { body.set("client_info", Self.clientInfo(user: issuance.user, tenant: issuance.tenant)) }
        return body.object
    }

    /// No v1 `not_before`/`expires_on`/`resource`.
    func appTokenResponse(token: String, resource: TokenResource, scopes: GrantedScopes, lifetime: Int, now: Date) -> JSONText {
        var body = JSONObjectBuilder()
        body.set("token_type", "Bearer")
        body.set("expires_in", lifetime)
        body.set("ext_expires_in", lifetime)
        body.set("access_token", token)
        return body.object
    }

    /// MSAL reads the account's home tenant from the authorize response's `client_info` on
    /// this face (https://github.com/AzureAD/microsoft-authentication-library-for-python/blob/dev/msal/application.py).
    func authorizeClientInfo(user: UserAccount, tenant: Tenant) -> String? { Self.clientInfo(user: user, tenant: tenant) }

    /// Entra's redirect carries its `AADSTS` description and `error_uri`.
    func redirectParameters(_ failure: ProtocolFailure, correlationID: String, now: Date, origin: String) -> [(String, String)] {
        failure.entra.fields(origin: origin, correlationID: correlationID, at: now).compactMap { name, value in
            guard ["error", "error_description", "error_uri"].contains(name), case .string(let text) = value else { return nil }
            return (name, text)
        }
    }

    /// Entra's JSON error: `error_codes`, `timestamp`, `trace_id`, `correlation_id` and
    /// `error_uri` besides the two OAuth fields.
    func errorBody(_ failure: ProtocolFailure, correlationID: String, now: Date, origin: String) -> JSONText {
        JSONText.object(failure.entra.fields(origin: origin, correlationID: correlationID, at: now))
    }

    func pageText(_ failure: ProtocolFailure) -> (code: String, message: String) {
        ("AADSTS\(failure.entra.code)", failure.entra.message)
    }

    /// Entra's `client_info`: `{"uid": oid, "utid": tenant GUID}`, no policy suffix, so MSAL's
    /// `home_account_id` is `{oid}.{tid}` (SPEC §2.9).
    static func clientInfo(user: UserAccount, tenant: Tenant) -> String {
        Base64URL.encode(JSONText.object([("uid", .string(user.objectID)), ("utid", .string(tenant.guid))]).serialized)
    }
}
