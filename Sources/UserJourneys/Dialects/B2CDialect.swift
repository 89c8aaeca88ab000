import Foundation
import IdentityDirectory
import TrustFramework
import WireCoding

/// Azure AD B2C's protocol (https://learn.microsoft.com/azure/active-directory-b2c/tokens-overview): a discovery document per user flow,
/// v1.0 tokens with `tfp`, the B2C token response with `profile_info`, `client_info` whose `uid`
/// names the policy, and `AADB2C` errors.
struct B2CDialect: ProtocolDialect {
    var face: ProtocolFace { .b2c }
    var endpointName: String { "a user flow endpoint" }
    var runsAppBoundFlow: Bool { false }
    var offersAccountPicker: Bool { false }
    var singleSignOnFollowsLoginHint: Bool { false }
    var handsPasswordResetToApp: Bool { true }
    func admitsPasswordGrant(in flow: UserFlow) -> Bool { flow.type == .ropc }

    /// B2C's issuer ends in `/v2.0/` (with the slash), Entra's without.
    func issuer(origin: String, tenant: Tenant) -> String { "\(origin)/\(tenant.guid)/v2.0/" }

    /// Echoes the host, tenant segment and policy placement of the request
    /// (https://github.com/coreos/go-oidc/issues/121).
    func discovery(origin: String, tenant: Tenant, flow: UserFlow, route: PolicyRoute) -> JSONText {
        var body = JSONObjectBuilder()
        body.set("issuer", issuer(origin: origin, tenant: tenant))
        body.set("authorization_endpoint", route.url(origin: origin, for: .authorize))
        body.set("token_endpoint", route.url(origin: origin, for: .token))
        body.set("end_session_endpoint", route.url(origin: origin, for: .logout))
        body.set("jwks_uri", route.url(origin: origin, for: .keys))
        body.set("response_modes_supported", ["query", "fragment", "form_post"])
        body.set(
            "response_types_supported",
            ["code", "code id_token", "code token", "code id_token token", "id_token", "id_token token", "token", "token id_token"])
        body.set("scopes_supported", ["openid"])
        body.set("subject_types_supported", ["pairwise"])
        body.set("id_token_signing_alg_values_supported", ["RS256"])
        body.set("token_endpoint_auth_methods_supported", ["client_secret_post", "client_secret_basic"])
        body.set("claims_supported", flow.claimsSupported)
        // Not in B2C's document, but RFC 8414 §2 lets clients learn that PKCE S256 is supported.
        body.set("code_challenge_methods_supported", ["S256"])
        return body.object
    }

    /// The claim order follows decoded real B2C ID tokens.
    func idTokenClaims(_ context: IssuanceContext, now: Date, lifetime: Int, code: String?, accessToken: String?) -> JSONText {
        var claims = JSONObjectBuilder()
        let iat = now.epochSeconds
        claims.set("exp", iat + Int64(lifetime))
        claims.set("nbf", iat)
        claims.set("ver", "1.0")
        claims.set("iss", context.issuer)
        claims.set("sub", context.policySubject ?? context.user.objectID)
        claims.set("aud", context.client.clientIDString)
        claims.set("nonce", context.nonce)
        claims.set("iat", iat)
        claims.set("auth_time", context.authTime.epochSeconds)
        appendUserClaims(context, into: &claims)
        claims.set("tfp", context.flow.name)
        if let code { claims.set("c_hash", TokenIssuer.halfHash(code)) }
        if let accessToken { claims.set("at_hash", TokenIssuer.halfHash(accessToken)) }
        return claims.object
    }

    /// Access tokens carry the user claims too, plus `scp` and `azp` (https://learn.microsoft.com/azure/active-directory-b2c/access-tokens#request-a-token).
    func accessTokenClaims(_ context: IssuanceContext, resource: TokenResource, now: Date, lifetime: Int) -> JSONText {
        var claims = JSONObjectBuilder()
        let iat = now.epochSeconds
        claims.set("iss", context.issuer)
        claims.set("exp", iat + Int64(lifetime))
        claims.set("nbf", iat)
        claims.set("aud", resource.audience)
        claims.set("sub", context.policySubject ?? context.user.objectID)
        claims.set("auth_time", context.authTime.epochSeconds)
        appendUserClaims(context, into: &claims)
        claims.set("tfp", context.flow.name)
        claims.set("nonce", context.nonce)
        if !resource.scopeNames.isEmpty { claims.set("scp", resource.scopeNames.joined(separator: " ")) }
        claims.set("azp", context.client.clientIDString)
        claims.set("ver", "1.0")
        claims.set("iat", iat)
        return claims.object
    }

    func appTokenClaims(client: AppRegistration, tenant: Tenant?, into claims: inout JSONObjectBuilder) {
        claims.set("ver", "1.0")
    }

    /// The B2C token response, fields in B2C's order, numbers as JSON numbers
    /// (https://learn.microsoft.com/azure/active-directory-b2c/add-ropc-policy#redeem-a-refresh-token).
    func tokenResponse(_ issuance: IssuanceContext, tokens: IssuedTokens, refreshToken: String?, clientInfo: Bool, now: Date) -> JSONText {
        let iat = now.epochSeconds
        var body = JSONObjectBuilder()
        body.set("access_token", tokens.accessToken)
        body.set("id_token", tokens.idToken)
        body.set("token_type", "Bearer")
        body.set("not_before", iat)
        if tokens.accessToken != nil {
            body.set("expires_in", tokens.accessTokenLifetime)
            body.set("expires_on", iat + Int64(tokens.accessTokenLifetime))
            body.set("resource", issuance.scopes.resource?.audience)
        }
        if tokens.idToken != nil { body.set("id_token_expires_in", tokens.idTokenLifetime) }
        body.set(
            "profile_info",
            Self.profileInfo(user: issuance.user, tenant: issuance.tenant, identityProvider: issuance.identityProvider))
        body.set("scope", issuance.scopes.granted.joined(separator: " "))
        if let refreshToken {
            body.set("refresh_token", refreshToken)
            body.set("refresh_token_expires_in", issuance.flow.lifetimes.refreshTokenSeconds)
        }
        if clientInfo {
            body.set("client_info", Self.clientInfo(user: issuance.user, policy: issuance.flow.name, tenant: issuance.tenant))
        }
        return body.object
    }

    func appTokenResponse(token: String, resource: TokenResource, scopes: GrantedScopes, lifetime: Int, now: Date) -> JSONText {
        let iat = now.epochSeconds
        var body = JSONObjectBuilder()
        body.set("access_token", token)
        body.set("token_type", "Bearer")
        body.set("not_before", iat)
        body.set("expires_in", lifetime)
        body.set("expires_on", iat + Int64(lifetime))
        body.set("resource", resource.audience)
        body.set("scope", scopes.granted.joined(separator: " "))
        return body.object
    }

    /// B2C's authorize response carries no `client_info`; MSAL reads it from the token response.
    func authorizeClientInfo(user: UserAccount, tenant: Tenant) -> String? { nil }

    func redirectParameters(_ failure: ProtocolFailure, correlationID: String, now: Date, origin: String) -> [(String, String)] {
        [("error", failure.oauthError), ("error_description", failure.errorDescription(correlationID: correlationID, at: now))]
    }

    func errorBody(_ failure: ProtocolFailure, correlationID: String, now: Date, origin: String) -> JSONText {
        JSONText.object([
            ("error", .string(failure.oauthError)),
            ("error_description", .string(failure.errorDescription(correlationID: correlationID, at: now))),
        ])
    }

    func pageText(_ failure: ProtocolFailure) -> (code: String, message: String) { (failure.code, failure.message) }

    /// The flow's application claims that this user has values for.
    private func appendUserClaims(_ context: IssuanceContext, into claims: inout JSONObjectBuilder) {
        if let program = context.flow.customPolicy {
            // A custom policy's claims are its relying party's, as the sign-in's bag had them.
            if context.policySubject == nil { claims.set("oid", context.user.objectID) }
            PolicyTokenClaims.append(context.claimOverrides, program.policy, into: &claims)
            return
        }
        let user = TokenIssuer.withConnectorValues(context)
        let selected = Set(context.flow.applicationClaims)
        // oid is always present: the Task API and MSAL's client_info depend on it
        // (https://github.com/AzureAD/microsoft-authentication-library-for-js/issues/2618).
        claims.set("oid", user.objectID)
        if selected.contains("name") { claims.set("name", user.displayName) }
        for attribute in UserAttribute.allCases where attribute != .displayName && selected.contains(attribute.claimName) {
            if let value = user.value(of: attribute), !value.isEmpty { claims.set(attribute.claimName, value) }
        }
        // The tenant's own attributes, typed as declared (`extension_loyaltyNumber`, SPEC §2.11).
        for attribute in context.tenant.userAttributes where selected.contains(attribute.claimName) {
            if let value = user.attributes[attribute.claimName] { claims.set(attribute.claimName, json: attribute.json(value)) }
        }
        // Only a proven address is asserted (the security issue's M-7): an app may trust `emails`.
        if selected.contains("emails"), user.emailVerified, let email = user.email { claims.set("emails", [email]) }
        // `idp` only for social sign-ins (https://github.com/MicrosoftDocs/azure-docs/issues/51403, azure-docs issue #51403).
        if selected.contains("idp"), context.identityProvider != .local {
            claims.set("idp", context.identityProvider.rawValue)
        }
        if selected.contains("newUser"), context.newUser { claims.set("newUser", true) }
    }

    /// base64url `{"uid":"<oid>-<policy lowercased>","utid":"<tenant guid>"}`: B2C puts the
    /// policy into uid, so MSAL keeps one account per policy (https://github.com/AzureAD/microsoft-authentication-library-for-android/issues/718).
    static func clientInfo(user: UserAccount, policy: String, tenant: Tenant) -> String {
        let json = JSONText.object([
            ("uid", .string("\(user.objectID)-\(policy.lowercased())")), ("utid", .string(tenant.guid)),
        ])
        return Base64URL.encode(json.serialized)
    }

    /// base64url profile summary B2C adds to every token response; `idp` is `LocalAccount` for
    /// local users even though their ID token has no `idp` (https://learn.microsoft.com/azure/active-directory-b2c/add-ropc-policy#redeem-a-refresh-token).
    static func profileInfo(user: UserAccount, tenant: Tenant, identityProvider: IdentityProviderKind) -> String {
        let json = JSONText.object([
            ("ver", .string("1.0")), ("tid", .string(tenant.guid)), ("sub", .null), ("name", .string(user.displayName)),
            ("preferred_username", .null),
            ("idp", .string(identityProvider == .local ? "LocalAccount" : identityProvider.rawValue)),
        ])
        return Base64URL.encode(json.serialized)
    }
}
