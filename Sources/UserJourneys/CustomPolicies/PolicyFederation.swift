import Foundation
import IdentityDirectory
import Storage
import TrustFramework

/// A custom policy's identity provider profile (SPEC §2.12; B2C's `Protocol Name="OpenIdConnect"`
/// and `"OAuth2"` technical profiles) as an upstream provider the federation machinery of the
/// built-in flows runs: the same authorization request (code + PKCE, a one-time state), the same
/// callback with its mix-up defence. An OpenID Connect profile's metadata keys are B2C's
/// (`openid-connect-technical-profile.md`): `METADATA`, `client_id`, `scope`, `response_types`,
/// `token_endpoint_auth_method`, and its ID token is checked as a declared provider's. A plain
/// OAuth 2.0 profile (`oauth2-technical-profile.md`) names `authorization_endpoint`,
/// `AccessTokenEndpoint` and `ClaimsEndpoint` instead (``UpstreamOAuth2``). The secret is the key
/// set its `client_secret` cryptographic key names. Facebook's OAuth2 profile is the simulated
/// Facebook's.
struct PolicyFederation: Sendable {
    let upstream: UpstreamOIDC
    let keySets: PolicyKeySetLibrary
    let dataKey: DataKey

    /// Whether `profile` sends the browser to a provider (rather than `login-NonInteractive`'s
    /// in-process password check, which is an OpenID Connect profile too).
    static func isFederation(_ profile: PolicyTechnicalProfile) -> Bool {
        guard case .identityProvider = profile.kind else { return false }
        return !PolicyProfileRunner.isPasswordCheck(profile)
    }

    /// The provider's answer is for `profile`: it answers the request made for this very profile
    /// (not another with the same provider) and comes from the provider the profile describes.
    static func answers(_ identity: FederatedIdentity, _ profile: PolicyTechnicalProfile) -> Bool {
        if profile.isFacebook { return identity.provider == .facebook && identity.via == nil }
        guard let metadata = providerURL(profile), identity.via?.lowercased() == profile.id.lowercased() else { return false }
        return identity.provider == UpstreamProvider(name: profile.id, metadataUrl: metadata, clientId: "").kind
    }

    /// The URL a provider profile stands under: an OpenID Connect profile's `METADATA`, a plain
    /// OAuth 2.0 profile's `authorization_endpoint` (``UpstreamOAuth2``) and never its `METADATA`,
    /// which nothing checks for it (so it could not name `facebook.com` or `local`).
    static func providerURL(_ profile: PolicyTechnicalProfile) -> String? {
        guard case .identityProvider(let protocolName) = profile.kind else { return nil }
        return protocolName == "OAuth2" ? profile.metadata["authorization_endpoint"] : profile.metadata["METADATA"]
    }

    /// The `alternativeSecurityId`s of `claims` that `identity`'s answer proves: those naming the
    /// user id the verified token (or Facebook's answer) carried, from a provider other than this
    /// service's local accounts, and Facebook only when the answer came from Facebook. A value
    /// that was in the bag before the answer, from a page, a REST call or a default, proves
    /// nothing unless it names that same identity.
    ///
    /// The provider part must be the answer's own: the provider's kind (its issuer), or a value
    /// the profile itself writes (an output claim's `DefaultValue`, as B2C's social profiles name
    /// `github.com`), so a provider can never vouch for another provider's users. A plain OAuth
    /// 2.0 provider's claims are not signed, so only its user id counts, not any value it sent.
    static func proven(_ claims: PolicyClaims, by identity: FederatedIdentity, policy: CompiledPolicy, profile: PolicyTechnicalProfile)
        -> [String]
    {
        let signed = !(profile.kind == .identityProvider(protocol: "OAuth2"))
        // A signed token's own issuer is the answer's too (a multi-tenant provider's tenant).
        let verifiedIssuer = signed ? identity.claims["iss"]?.lowercased() : nil
        let own = Set(
            [identity.provider.rawValue.lowercased()] + [verifiedIssuer].compactMap { $0 }
                + profile.outputClaims.compactMap { $0.defaultValue?.lowercased() })
        return claims.values.compactMap { key, value -> String? in
            guard policy.claimType(key)?.dataType == .alternativeSecurityId || key == "alternativesecurityid",
                case .string(let text) = value,
                let decoded = decodeAlternativeSecurityId(text),
                decoded.subject == identity.subject || (signed && identity.claims.values.contains(decoded.subject)),
                decoded.provider != .facebook || identity.provider == .facebook,
                own.contains(decoded.provider.rawValue.lowercased())
            else { return nil }
            return text
        }
    }

    /// The provider `profile` describes, its secret sealed as a declared provider's is.
    func provider(_ profile: PolicyTechnicalProfile, tenant: Tenant) async throws(PolicyProfileFailure) -> UpstreamProvider {
        guard case .identityProvider(let protocolName) = profile.kind, !profile.isFacebook else {
            throw .protocolFailure(
                .policyNotRunnable(
                    "The identity provider profile '\(profile.id)' cannot run here: Facebook's OAuth2 profile runs where the simulated Facebook is served (serve --simulated-facebook)."
                ))
        }
        let problem =
            protocolName == "OAuth2"
            ? PolicyCheck.oAuth2Problem(id: profile.id, metadata: profile.metadata, complete: true)
            : PolicyCheck.openIDConnectProblem(id: profile.id, metadata: profile.metadata, complete: true)
        if let problem { throw .protocolFailure(.policyNotRunnable(problem)) }
        let metadata = profile.metadata
        var provider = UpstreamProvider(
            name: profile.id, displayName: profile.displayName, metadataUrl: Self.providerURL(profile) ?? "",
            clientId: metadata["client_id"] ?? "", scope: metadata["scope"] ?? (protocolName == "OAuth2" ? nil : "openid"),
            tokenEndpointAuthMethod: metadata["token_endpoint_auth_method"].flatMap(UpstreamProvider.TokenEndpointAuthMethod.init)
                ?? .clientSecretPost)
        // B2C's default `response_types` is `id_token` (openid-connect-technical-profile.md).
        if protocolName == "OpenIdConnect" { provider.responseType = metadata["response_types"] ?? "id_token" }
        if let prefixes = metadata["ValidTokenIssuerPrefixes"] {
            provider.validIssuerPrefixes = prefixes.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
        }
        if protocolName == "OAuth2" {
            provider.oauth2 = UpstreamOAuth2(
                authorizationEndpoint: metadata["authorization_endpoint"] ?? "", tokenEndpoint: metadata["AccessTokenEndpoint"] ?? "",
                claimsEndpoint: metadata["ClaimsEndpoint"] ?? "",
                tokenInHeader: metadata["BearerTokenTransmissionMethod"]?.lowercased() == "authorizationheader",
                tokenParameterName: metadata["ClaimsEndpointAccessTokenName"] ?? "access_token",
                claimsFormat: metadata["ClaimsEndpointFormatName"].flatMap { name in
                    metadata["ClaimsEndpointFormat"].map { UpstreamOAuth2.ClaimsFormat(name: name, value: $0) }
                },
                tokenByGet: metadata["HttpBinding"]?.lowercased() == "get")
            // The user's id there: what the profile maps onto `issuerUserId` (B2C's social
            // profiles write `id`), else OpenID Connect's `sub`.
            let userID = profile.outputClaims.first { $0.claimType.lowercased() == "issueruserid" }?.partnerClaimType
            provider.claimsMapping = .init(userId: userID ?? "sub")
        }
        if let keySet = profile.keys["client_secret"] {
            let secret: String?
            do {
                secret = try await keySets.activeSecret(tenantID: tenant.id, keySet: keySet)
            } catch {
                throw .protocolFailure(.policyNotRunnable("The key set '\(keySet)' of '\(profile.id)' could not be read."))
            }
            guard let secret else {
                throw .protocolFailure(.policyNotRunnable("The key set '\(keySet)' that '\(profile.id)' names has no active secret."))
            }
            do {
                provider.clientSecret = try dataKey.seal(
                    secret, context: UpstreamProvider.sealingContext(tenantID: tenant.id, name: provider.name))
            } catch {
                throw .protocolFailure(.policyNotRunnable("The secret of '\(profile.id)' could not be sealed."))
            }
        }
        return provider
    }

    /// The ID token's claims onto the profile's output claims: each by its `PartnerClaimType`
    /// (else its own name), else its `DefaultValue` (applied by the caller with the resolvers).
    static func map(
        _ identity: FederatedIdentity, _ profile: PolicyTechnicalProfile, into claims: inout PolicyClaims, policy: CompiledPolicy
    ) {
        for reference in profile.outputClaims {
            let partner = reference.partnerClaimType ?? reference.claimType
            guard let text = identity.claims[partner] else { continue }
            let type = policy.claimType(reference.claimType)?.dataType ?? .string
            if let value = PolicyClaimValue.parse(text, as: type) { claims[reference.claimType] = value }
        }
    }

    /// The `alternativeSecurityId` B2C's `CreateAlternativeSecurityId` wrote, read back: the
    /// provider (lower-cased) and the user's id there.
    static func decodeAlternativeSecurityId(_ text: String) -> (provider: IdentityProviderKind, subject: String)? {
        guard text.utf8.count <= 4096, let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let issuer = object["issuer"] as? String, let encoded = object["issuerUserId"] as? String,
            let data = Data(base64Encoded: encoded), let subject = String(data: data, encoding: .utf8), !subject.isEmpty,
            subject.count <= 256, !subject.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }),
            let provider = IdentityProviderKind(rawValue: issuer),
            // Never this service's own local accounts: those are found by their sign-in names.
            provider != .local
        else { return nil }
        return (provider, subject)
    }
}
