import Crypto
import Foundation
import WireCoding

/// Everything a token needs to know about one issuance.
struct IssuanceContext: Sendable {
    var tenant: Tenant
    var flow: UserFlow
    var client: AppRegistration
    var user: UserAccount
    var issuer: String
    var scopes: GrantedScopes
    var nonce: String?
    var authTime: Date
    var newUser: Bool
    var identityProvider: IdentityProviderKind
    /// B2C's v1.0 claims or the Microsoft identity platform's v2.0 ones (SPEC §2.9).
    var face: ProtocolFace = .b2c
    /// The "before sending the token" connector's values for this sign-in (account keys).
    var claimOverrides: [String: String] = [:]
}

/// The signed tokens of one issuance.
struct IssuedTokens: Sendable {
    var accessToken: String?
    var idToken: String?
    var issuedAt: Date
    var accessTokenLifetime: Int
    var idTokenLifetime: Int
}

/// The one place that builds claims and signs tokens (SPEC §2.5, research/b2c-protocol.md §2.2).
struct TokenIssuer: Sendable {
    let keys: SigningKeyRing
    let signer: SigningThreads

    /// Signs an ID token (when `openid` was granted) and an access token (when a resource was).
    /// `code` and `accessTokenHash` add `c_hash`/`at_hash` where OIDC Core §3.3.2.11 requires them.
    func issue(_ context: IssuanceContext, now: Date, code: String? = nil, hashAccessToken: Bool = false) async throws -> IssuedTokens {
        let key = try await keys.activeKey()
        let lifetimes = context.flow.lifetimes
        // Both tokens in one hand-over: the ID token's at_hash needs the access token.
        return try await signer.run { [self] in
            var accessToken: String?
            if let resource = context.scopes.resource {
                let claims = accessTokenClaims(context, resource: resource, now: now, lifetime: lifetimes.accessTokenSeconds)
                accessToken = try JSONWebToken.sign(claims: claims, with: key)
            }
            var idToken: String?
            if context.scopes.openID {
                let claims = idTokenClaims(
                    context, now: now, lifetime: lifetimes.idTokenSeconds, code: code,
                    accessToken: hashAccessToken ? accessToken : nil)
                idToken = try JSONWebToken.sign(claims: claims, with: key)
            }
            return IssuedTokens(
                accessToken: accessToken, idToken: idToken, issuedAt: now,
                accessTokenLifetime: lifetimes.accessTokenSeconds, idTokenLifetime: lifetimes.idTokenSeconds)
        }
    }

    /// The claim order follows decoded real B2C ID tokens.
    func idTokenClaims(_ context: IssuanceContext, now: Date, lifetime: Int, code: String?, accessToken: String?) -> JSONText {
        if context.face == .entra { return entraIDTokenClaims(context, now: now, lifetime: lifetime, code: code, accessToken: accessToken) }
        var claims = JSONObjectBuilder()
        let iat = now.epochSeconds
        claims.set("exp", iat + Int64(lifetime))
        claims.set("nbf", iat)
        claims.set("ver", "1.0")
        claims.set("iss", context.issuer)
        claims.set("sub", context.user.objectID)
        claims.set("aud", context.client.clientIDString)
        claims.set("nonce", context.nonce)
        claims.set("iat", iat)
        claims.set("auth_time", context.authTime.epochSeconds)
        appendUserClaims(context, into: &claims)
        claims.set("tfp", context.flow.name)
        if let code { claims.set("c_hash", Self.halfHash(code)) }
        if let accessToken { claims.set("at_hash", Self.halfHash(accessToken)) }
        return claims.object
    }

    /// Access tokens carry the user claims too, plus `scp` and `azp` (research/b2c-protocol.md §2.2).
    func accessTokenClaims(_ context: IssuanceContext, resource: TokenResource, now: Date, lifetime: Int) -> JSONText {
        if context.face == .entra { return entraAccessTokenClaims(context, resource: resource, now: now, lifetime: lifetime) }
        var claims = JSONObjectBuilder()
        let iat = now.epochSeconds
        claims.set("iss", context.issuer)
        claims.set("exp", iat + Int64(lifetime))
        claims.set("nbf", iat)
        claims.set("aud", resource.audience)
        claims.set("sub", context.user.objectID)
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

    /// An app-only access token (client credentials): the app is the subject; no user claims.
    func appToken(
        client: AppRegistration, resource: TokenResource, roles: [String], issuer: String, lifetime: Int, now: Date,
        face: ProtocolFace = .b2c, tenant: Tenant? = nil
    ) async throws -> String {
        var claims = JSONObjectBuilder()
        let iat = now.epochSeconds
        claims.set("iss", issuer)
        claims.set("exp", iat + Int64(lifetime))
        claims.set("nbf", iat)
        claims.set("aud", resource.audience)
        claims.set("sub", client.clientIDString)
        claims.set("oid", client.clientIDString)
        let scopeNames = resource.scopeNames.filter { !$0.isEmpty }
        if !scopeNames.isEmpty { claims.set("scp", scopeNames.joined(separator: " ")) }
        claims.set("azp", client.clientIDString)
        if !roles.isEmpty { claims.set("roles", roles) }
        // Entra's marker of an app-only token (the `idtyp` optional claim), so resource servers
        // can refuse tokens that carry no user.
        claims.set("idtyp", "app")
        if face == .entra {
            claims.set("appid", client.clientIDString)
            if let tenant { claims.set("tid", tenant.guid) }
            claims.set("uti", Self.uniqueTokenID())
        }
        claims.set("ver", face == .entra ? "2.0" : "1.0")
        claims.set("iat", iat)
        let key = try await keys.activeKey()
        let object = claims.object
        return try await signer.run { try JSONWebToken.sign(claims: object, with: key) }
    }

    // MARK: The Microsoft identity platform's v2.0 tokens (SPEC §2.9)

    /// Entra's v2.0 ID token: `ver` 2.0, `tid`, a pairwise `sub`, `preferred_username`, `uti`
    /// (learn.microsoft.com/entra/identity-platform/id-token-claims-reference), claims in the
    /// order Entra writes them.
    private func entraIDTokenClaims(
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
        let user = Self.withConnectorValues(context)
        claims.set("name", user.displayName)
        claims.set("nonce", context.nonce)
        claims.set("oid", context.user.objectID)
        claims.set("preferred_username", Self.preferredUsername(context.user, tenant: context.tenant))
        claims.set("sub", Self.pairwiseSubject(context.user, clientID: context.client.clientIDString, tenant: context.tenant))
        claims.set("tid", context.tenant.guid)
        claims.set("uti", Self.uniqueTokenID())
        claims.set("ver", "2.0")
        if let code { claims.set("c_hash", Self.halfHash(code)) }
        if let accessToken { claims.set("at_hash", Self.halfHash(accessToken)) }
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

    /// The user as the "before sending the token" connector answered: its values win over the
    /// directory's, in the token only (B2C's "Before sending the token" step).
    private static func withConnectorValues(_ context: IssuanceContext) -> UserAccount {
        var user = context.user
        for (key, value) in context.claimOverrides {
            if key == UserAttribute.displayName.rawValue { user.displayName = value } else { user.attributes[key] = value }
        }
        return user
    }

    /// Entra's v2.0 access token (access-token-claims-reference): `aud` is the resource (Graph's
    /// `00000003-…` for `User.Read`), `scp` the granted scopes, `azp` and `appid` the client.
    private func entraAccessTokenClaims(_ context: IssuanceContext, resource: TokenResource, now: Date, lifetime: Int) -> JSONText {
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
        claims.set("preferred_username", Self.preferredUsername(context.user, tenant: context.tenant))
        if !resource.scopeNames.isEmpty { claims.set("scp", resource.scopeNames.joined(separator: " ")) }
        claims.set("sub", Self.pairwiseSubject(context.user, clientID: context.client.clientIDString, tenant: context.tenant))
        claims.set("tid", context.tenant.guid)
        claims.set("uti", Self.uniqueTokenID())
        claims.set("ver", "2.0")
        return claims.object
    }

    /// Entra's `sub` is pairwise: the same user has a different one in each app, so two apps
    /// cannot join their users on it. base64url of SHA-256 over tenant, app and object id.
    static func pairwiseSubject(_ user: UserAccount, clientID: String, tenant: Tenant) -> String {
        let digest = SHA256.hash(data: Data("\(tenant.guid)|\(clientID.lowercased())|\(user.objectID)".utf8))
        return Base64URL.encode(Data(digest))
    }

    /// The name the user signs in with: the account's email (a federated account without one
    /// gets `{oid}@{tenant}`, as Entra writes a UPN).
    static func preferredUsername(_ user: UserAccount, tenant: Tenant) -> String {
        user.presentableEmail ?? "\(user.objectID)@\(tenant.name)"
    }

    /// `uti`: a per-token id (Entra's is 22 base64url characters).
    static func uniqueTokenID() -> String { Secrets.randomToken(byteCount: 16) }

    /// Entra's `client_info`: `{"uid": oid, "utid": tenant GUID}`, no policy suffix, so MSAL's
    /// `home_account_id` is `{oid}.{tid}` (SPEC §2.9).
    static func entraClientInfo(user: UserAccount, tenant: Tenant) -> String {
        Base64URL.encode(JSONText.object([("uid", .string(user.objectID)), ("utid", .string(tenant.guid))]).serialized)
    }

    /// The flow's application claims that this user has values for.
    private func appendUserClaims(_ context: IssuanceContext, into claims: inout JSONObjectBuilder) {
        let user = Self.withConnectorValues(context)
        let selected = Set(context.flow.applicationClaims)
        // oid is always present: the Task API and MSAL's client_info depend on it
        // (research/b2c-protocol.md §2.5).
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
        // `idp` only for social sign-ins (research/b2c-protocol.md §2.2, azure-docs issue #51403).
        if selected.contains("idp"), context.identityProvider != .local {
            claims.set("idp", context.identityProvider.rawValue)
        }
        if selected.contains("newUser"), context.newUser { claims.set("newUser", true) }
    }

    /// OIDC Core §3.3.2.11: base64url of the left half of SHA-256 of the value.
    static func halfHash(_ value: String) -> String {
        let digest = Data(SHA256.hash(data: Data(value.utf8)))
        return Base64URL.encode(digest.prefix(digest.count / 2))
    }

    /// base64url `{"uid":"<oid>-<policy lowercased>","utid":"<tenant guid>"}`: B2C puts the
    /// policy into uid, so MSAL keeps one account per policy (research/b2c-protocol.md §2.5).
    static func clientInfo(user: UserAccount, policy: String, tenant: Tenant) -> String {
        let json = JSONText.object([
            ("uid", .string("\(user.objectID)-\(policy.lowercased())")), ("utid", .string(tenant.guid)),
        ])
        return Base64URL.encode(json.serialized)
    }

    /// base64url profile summary B2C adds to every token response; `idp` is `LocalAccount` for
    /// local users even though their ID token has no `idp` (research/b2c-protocol.md §2.5).
    static func profileInfo(user: UserAccount, tenant: Tenant, identityProvider: IdentityProviderKind) -> String {
        let json = JSONText.object([
            ("ver", .string("1.0")), ("tid", .string(tenant.guid)), ("sub", .null), ("name", .string(user.displayName)),
            ("preferred_username", .null),
            ("idp", .string(identityProvider == .local ? "LocalAccount" : identityProvider.rawValue)),
        ])
        return Base64URL.encode(json.serialized)
    }
}
