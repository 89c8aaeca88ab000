import Crypto
import Foundation
import IdentityDirectory
import TodoModels
import TrustFramework
import WireCoding

/// Everything a token needs to know about one issuance.
package struct IssuanceContext: Sendable {
    package var tenant: Tenant
    package var flow: UserFlow
    package var client: AppRegistration
    package var user: UserAccount
    var issuer: String
    package var scopes: GrantedScopes
    var nonce: String?
    package var authTime: Date
    var newUser: Bool
    package var identityProvider: IdentityProviderKind
    /// B2C's v1.0 claims or the Microsoft identity platform's v2.0 ones (SPEC §2.9).
    package var face: ProtocolFace = .b2c
    /// The "before sending the token" connector's values for this sign-in (account keys).
    package var claimOverrides: [String: String] = [:]
    /// Claims a tester asked for in `POST /dev/tokens` (SPEC §2.14), added to both tokens or
    /// replacing the dialect's value of the same name; never the issuer, audience or times
    /// (``ExtraClaims``).
    package var extraClaims: ExtraClaims = ExtraClaims()
    /// A custom policy's journey that signed nobody in: the subject its relying party sends
    /// (`sub`), for an account that does not exist (`user` then stands for it, and is stored
    /// nowhere); no `oid` is written.
    package var policySubject: String?

    /// The context of a Microsoft Graph access token: a custom policy's relying-party claims
    /// (its output claims, REST answers among them) stay out. Graph trusts what the service's own
    /// key signs, and B2C never lets a policy write a Graph token (Entra issues those, not the
    /// policy), so the tenant's policy cannot make itself a Graph caller it is not.
    var forMicrosoftGraph: IssuanceContext {
        guard flow.customPolicy != nil else { return self }
        var context = self
        context.claimOverrides = [:]
        return context
    }

    package init(
        tenant: Tenant,
        flow: UserFlow,
        client: AppRegistration,
        user: UserAccount,
        issuer: String,
        scopes: GrantedScopes,
        nonce: String? = nil,
        authTime: Date,
        newUser: Bool,
        identityProvider: IdentityProviderKind,
        face: ProtocolFace = .b2c,
        claimOverrides: [String: String] = [:]
    ) {
        self.tenant = tenant
        self.flow = flow
        self.client = client
        self.user = user
        self.issuer = issuer
        self.scopes = scopes
        self.nonce = nonce
        self.authTime = authTime
        self.newUser = newUser
        self.identityProvider = identityProvider
        self.face = face
        self.claimOverrides = claimOverrides
    }
}

/// Claims a tester adds to minted tokens (`POST /dev/tokens` `"claims"`, SPEC §2.14). The
/// claims that make a token the issuer's — who issued it, for whom, when — stay the issuer's:
/// time moves with `/dev/clock`, the audience with the client and scopes.
package struct ExtraClaims: Sendable, Equatable {
    /// Who issued it, for whom and when, and the claims that make a token an app's own
    /// (`idtyp`, `azp`, `appid`): a tester's user token never passes for an app-only one.
    package static let reserved: Set<String> = ["iss", "aud", "exp", "nbf", "iat", "ver", "tid", "tfp", "acr", "idtyp", "azp", "appid"]
    package static let maximumCount = 50
    package private(set) var members: [(String, JSONText)] = []
    /// The claims as given, kept with an authorization code for the tokens it buys.
    package private(set) var stored: [String: JSONValue] = [:]

    package init() {}

    /// The claims a grant kept (``stored``); none for Microsoft Graph's tokens, which carry only
    /// what Graph grants, and none if they no longer pass (nothing is added then, never half).
    package init(kept: [String: JSONValue]?, scopes: GrantedScopes) {
        guard let kept, !scopes.isForMicrosoftGraph, let claims = try? ExtraClaims(kept) else { return }
        self = claims
    }

    package enum Refusal: Error, CustomStringConvertible {
        case reserved(String)
        case tooMany
        case unsupported(String)

        package var description: String {
            switch self {
            case .reserved(let name): "The claim '\(name)' is the issuer's own and cannot be set (move time with /dev/clock)."
            case .tooMany: "At most \(ExtraClaims.maximumCount) extra claims."
            case .unsupported(let name): "The claim '\(name)' must be a string, a whole number, a boolean, null, or an array or object of those."
            }
        }
    }

    /// From the request's JSON object; names sorted so equal requests sign equal tokens.
    package init(_ claims: [String: JSONValue]) throws(Refusal) {
        guard claims.count <= Self.maximumCount else { throw .tooMany }
        for name in claims.keys.sorted() {
            guard !Self.reserved.contains(name) else { throw .reserved(name) }
            guard let value = Self.text(claims[name]!, depth: 0) else { throw .unsupported(TextRules.printable(String(name.prefix(64)))) }
            members.append((name, value))
        }
        stored = claims
    }

    private static func text(_ value: JSONValue, depth: Int) -> JSONText? {
        guard depth < 8 else { return nil }
        switch value {
        case .string(let text): return .string(text)
        case .bool(let flag): return .bool(flag)
        case .null: return .null
        case .number(let number):
            guard number.isFinite, number.rounded() == number, abs(number) < 9.0e15 else { return nil }
            return .int(Int64(number))
        case .array(let values):
            let converted = values.compactMap { text($0, depth: depth + 1) }
            return converted.count == values.count ? .array(converted) : nil
        case .object(let object):
            var members: [(String, JSONText)] = []
            for key in object.keys.sorted() {
                guard let converted = text(object[key]!, depth: depth + 1) else { return nil }
                members.append((key, converted))
            }
            return .object(members)
        }
    }

    package static func == (lhs: ExtraClaims, rhs: ExtraClaims) -> Bool {
        lhs.members.map(\.0) == rhs.members.map(\.0) && lhs.members.map(\.1) == rhs.members.map(\.1)
    }

    /// `claims` with these added, or replacing a member of the same name in place.
    func applied(to claims: JSONText) -> JSONText {
        guard !members.isEmpty, case .object(var object) = claims else { return claims }
        for (name, value) in members {
            if let index = object.firstIndex(where: { $0.0 == name }) { object[index].1 = value } else { object.append((name, value)) }
        }
        return .object(object)
    }
}

/// The signed tokens of one issuance.
package struct IssuedTokens: Sendable {
    var accessToken: String?
    var idToken: String?
    var issuedAt: Date
    var accessTokenLifetime: Int
    var idTokenLifetime: Int
}

/// The one place that builds claims and signs tokens (SPEC §2.5, https://learn.microsoft.com/azure/active-directory-b2c/tokens-overview#claims).
package struct TokenIssuer: Sendable {
    let keys: SigningKeyRing
    /// A custom policy's tokens are signed with its own key set's active key (SPEC §2.12).
    let policyKeys: PolicyKeySetLibrary
    package let signer: SigningThreads
    /// Group memberships, for the `groups` claim of apps that ask for it (SPEC §2.14).
    var groups: DirectoryGroups?

    /// Entra writes at most this many groups into a JWT; past it, an overage claim pointing at
    /// Graph instead (id-token-claims-reference, "groups overage claim").
    static let groupsInToken = 200

    /// The `groups` claim's members for this issuance: on the Entra face, for an app whose
    /// `groupMembershipClaims` asks for security groups, every group the user is in (nesting
    /// followed), or Entra's overage claims when there are too many.
    func groupClaims(_ context: IssuanceContext) async throws -> [(String, JSONText)] {
        guard context.face == .entra, context.client.wantsGroupsClaim, let groups else { return [] }
        let ids = try await groups.transitiveGroups(of: context.user.id, limit: Self.groupsInToken).map { $0.uuidString.lowercased() }.sorted()
        guard ids.count <= Self.groupsInToken else {
            return [
                ("_claim_names", .object([("groups", .string("src1"))])),
                (
                    "_claim_sources",
                    .object([
                        ("src1", .object([("endpoint", .string("https://graph.microsoft.com/v1.0/users/\(context.user.objectID)/getMemberObjects"))]))
                    ])
                ),
            ]
        }
        return [("groups", .array(ids.map(JSONText.string)))]
    }

    /// `claims` with `added` members appended (a member of the same name replaced).
    static func adding(_ added: [(String, JSONText)], to claims: JSONText) -> JSONText {
        guard !added.isEmpty, case .object(var object) = claims else { return claims }
        for (name, value) in added {
            if let index = object.firstIndex(where: { $0.0 == name }) { object[index].1 = value } else { object.append((name, value)) }
        }
        return .object(object)
    }

    /// Signs an ID token (when `openid` was granted) and an access token (when a resource was).
    /// `code` and `accessTokenHash` add `c_hash`/`at_hash` where OIDC Core §3.3.2.11 requires them.
    package func issue(_ context: IssuanceContext, now: Date, code: String? = nil, hashAccessToken: Bool = false) async throws
        -> IssuedTokens
    {
        let key = try await signingKey(for: context.flow, tenantID: context.tenant.id)
        let accessResource = Self.accessResource(context)
        let accessKey = accessResource.map(Self.isServiceSigned) == true ? try await keys.activeKey() : key
        let lifetimes = context.flow.lifetimes
        let groupClaims = try await groupClaims(context)
        // Both tokens in one hand-over: the ID token's at_hash needs the access token.
        return try await signer.run { [self] in
            var accessToken: String?
            if let resource = accessResource {
                // The client's setting decides an access token's groups where the client is the
                // audience (its own API); another API's tokens carry none.
                let groups = resource.audience.lowercased() == context.client.clientIDString ? groupClaims : []
                let accessContext = Self.isServiceSigned(resource) ? context.forMicrosoftGraph : context
                // The Graph token Entra adds to an OpenID-only sign-in carries none of the
                // sign-in's extra claims (a claims provider's never reach a Graph token).
                let extra = resource == context.scopes.resource ? context.extraClaims : ExtraClaims()
                let claims = extra.applied(
                    to: Self.adding(
                        groups, to: accessTokenClaims(accessContext, resource: resource, now: now, lifetime: lifetimes.accessTokenSeconds)))
                accessToken = try JSONWebToken.sign(claims: claims, with: accessKey)
            }
            var idToken: String?
            if context.scopes.openID {
                let claims = context.extraClaims.applied(
                    to: Self.adding(
                        groupClaims,
                        to: idTokenClaims(
                            context, now: now, lifetime: lifetimes.idTokenSeconds, code: code,
                            accessToken: hashAccessToken ? accessToken : nil)))
                idToken = try JSONWebToken.sign(claims: claims, with: key)
            }
            return IssuedTokens(
                accessToken: accessToken, idToken: idToken, issuedAt: now,
                accessTokenLifetime: lifetimes.accessTokenSeconds, idTokenLifetime: lifetimes.idTokenSeconds)
        }
    }

    /// The key `flow`'s tokens are signed with: a custom policy's JWT issuer names its key set
    /// (`issuer_secret`), whose active key signs, as B2C signs them; a user flow's are signed
    /// with the service's key ring. A policy whose key set has no usable key throws
    /// ``ProtocolFailure/policyNotRunnable(_:)`` naming the set: its sign-ins and grants end with
    /// that reason, never a 500.
    package func signingKey(for flow: UserFlow, tenantID: UUID) async throws -> SigningKey {
        guard let keySet = flow.customPolicy?.policy.tokenSigningKeySet else { return try await keys.activeKey() }
        do {
            return try await policyKeys.signingKey(tenantID: tenantID, keySet: keySet)
        } catch let missing as PolicyKeySetError {
            throw ProtocolFailure.policyNotRunnable(missing.message)
        }
    }

    /// The access token's resource: the one granted, or, on the Microsoft identity platform's
    /// face, Microsoft Graph's for a sign-in that asked OpenID Connect's scopes only (`openid
    /// offline_access`): Entra answers such a request with an access token for Graph (its
    /// UserInfo endpoint is Graph's), which MSAL-based apps expect, and its `scp` names those
    /// scopes (Microsoft's native-authentication reference shows `"scope": "openid profile"`).
    /// B2C issues none then.
    static func accessResource(_ context: IssuanceContext) -> TokenResource? {
        if let resource = context.scopes.resource { return resource }
        guard context.face == .entra, context.scopes.openID else { return nil }
        let named = Set(context.scopes.granted.map { $0.lowercased() })
        return TokenResource(audience: APIPermission.graphResource, scopeNames: ["openid", "profile", "email"].filter { $0 == "openid" || named.contains($0) })
    }

    /// Whether an access token for `resource` is signed with the service's ring whatever the
    /// flow: Microsoft Graph's, which Graph verifies with it (Entra signs them, never a B2C
    /// policy); any other API's are signed with the flow's key.
    static func isServiceSigned(_ resource: TokenResource) -> Bool { resource.audience == APIPermission.graphResource }

    /// The key an access token for `resource` is signed with (``isServiceSigned(_:)``).
    func signingKey(for resource: TokenResource, flow: UserFlow, tenantID: UUID) async throws -> SigningKey {
        Self.isServiceSigned(resource) ? try await keys.activeKey() : try await signingKey(for: flow, tenantID: tenantID)
    }

    /// The ID token's claims, as the issuance's dialect writes them.
    func idTokenClaims(_ context: IssuanceContext, now: Date, lifetime: Int, code: String?, accessToken: String?) -> JSONText {
        context.face.dialect.idTokenClaims(context, now: now, lifetime: lifetime, code: code, accessToken: accessToken)
    }

    /// The access token's claims, as the issuance's dialect writes them.
    func accessTokenClaims(_ context: IssuanceContext, resource: TokenResource, now: Date, lifetime: Int) -> JSONText {
        context.face.dialect.accessTokenClaims(context, resource: resource, now: now, lifetime: lifetime)
    }

    /// An app-only access token (client credentials): the app is the subject; no user claims.
    package func appToken(
        client: AppRegistration, resource: TokenResource, roles: [String], issuer: String, lifetime: Int, now: Date,
        face: ProtocolFace = .b2c, tenant: Tenant, flow: UserFlow
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
        face.dialect.appTokenClaims(client: client, tenant: tenant, into: &claims)
        claims.set("iat", iat)
        let key = try await signingKey(for: resource, flow: flow, tenantID: tenant.id)
        let object = claims.object
        return try await signer.run { try JSONWebToken.sign(claims: object, with: key) }
    }

    /// The user as the "before sending the token" connector answered: its values win over the
    /// directory's, in the token only (B2C's "Before sending the token" step).
    static func withConnectorValues(_ context: IssuanceContext) -> UserAccount {
        var user = context.user
        for (key, value) in context.claimOverrides {
            if key == UserAttribute.displayName.rawValue { user.displayName = value } else { user.attributes[key] = value }
        }
        return user
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

    /// OIDC Core §3.3.2.11: base64url of the left half of SHA-256 of the value.
    static func halfHash(_ value: String) -> String {
        let digest = Data(SHA256.hash(data: Data(value.utf8)))
        return Base64URL.encode(digest.prefix(digest.count / 2))
    }

    package init(keys: SigningKeyRing, policyKeys: PolicyKeySetLibrary, signer: SigningThreads, groups: DirectoryGroups? = nil) {
        self.groups = groups
        self.keys = keys
        self.policyKeys = policyKeys
        self.signer = signer
    }
}
