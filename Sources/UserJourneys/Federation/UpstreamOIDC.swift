import AsyncHTTPClient
import Crypto
import CryptoExtras
import Foundation
import ServerSupport
import IdentityDirectory
import JOSE
import NIOCore
import SQLKit
import Storage
import TodoModels
import WireCoding

/// Federation with upstream OpenID Connect providers (SPEC §2.11): the authorization code flow
/// with PKCE (S256), `state` and `nonce` to the provider, the code redeemed at its token
/// endpoint, and its ID token accepted only when signed by a key of its JWKS (RS256), issued by
/// its issuer, for this client, unexpired, and carrying the nonce this sign-in sent.
package struct UpstreamOIDC: Sendable {
    let directory: UpstreamDirectory
    let requests: any UpstreamRequestStore
    let dataKey: DataKey

    /// What the provider answered wrongly, for B2C's AADB2C90273.
    struct Failure: Error, Equatable {
        var message: String
        var b2cError: ProtocolFailure { .upstreamFailed(message) }
    }

    /// The provider's authorization URL for a new upstream request of `record`'s sign-in.
    func authorizationURL(provider: UpstreamProvider, record: InteractionRecord, callback: String, now: Date) async throws -> String {
        let metadata = try await directory.metadata(provider)
        let state = Secrets.randomToken()
        let nonce = Secrets.randomToken()
        let verifier = Secrets.randomToken(byteCount: 48)
        try await requests.save(
            UpstreamRequest(interactionID: record.id, provider: provider.name, verifier: verifier, nonce: nonce, issuer: provider.issuer),
            stateHash: Secrets.sha256Hex(state), expiresAt: now.addingTimeInterval(600))
        let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
        if provider.answersWithIDToken {
            // B2C's default for an OpenID Connect profile (openid-connect-technical-profile.md:
            // `response_types` `id_token`, `response_mode` `form_post`): the ID token comes back
            // in a form the provider posts, bound to this request by its nonce; no code, no PKCE.
            let query = FormEncoding.encode([
                ("client_id", provider.clientId), ("response_type", "id_token"), ("redirect_uri", callback),
                ("scope", provider.requestedScope), ("state", state), ("nonce", nonce), ("response_mode", "form_post"),
            ])
            return metadata.authorizationEndpoint + (metadata.authorizationEndpoint.contains("?") ? "&" : "?") + query
        }
        let query = FormEncoding.encode([
            ("client_id", provider.clientId), ("response_type", "code"), ("redirect_uri", callback), ("scope", provider.requestedScope),
            ("state", state), ("nonce", nonce), ("code_challenge", challenge), ("code_challenge_method", "S256"),
            ("response_mode", "query"),
        ])
        return metadata.authorizationEndpoint + (metadata.authorizationEndpoint.contains("?") ? "&" : "?") + query
    }

    /// The provider's metadata, from the cache when fresh.
    func metadata(of provider: UpstreamProvider) async throws -> UpstreamMetadata {
        try await directory.metadata(provider)
    }

    /// Redeems `code` and checks the ID token; the identity its claims describe.
    func redeem(
        code: String, provider: UpstreamProvider, tenant: Tenant, request: UpstreamRequest, callback: String, now: Date
    ) async throws -> FederatedIdentity {
        let metadata = try await directory.metadata(provider)
        var exchange = HTTPClientRequest(url: metadata.tokenEndpoint)
        exchange.method = .POST
        exchange.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        exchange.headers.add(name: "Accept", value: "application/json")
        var form = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", callback), ("code_verifier", request.verifier),
        ]
        if let sealed = provider.clientSecret {
            let secret = try dataKey.open(sealed, context: UpstreamProvider.sealingContext(tenantID: tenant.id, name: provider.name)).value
            switch provider.authMethod(at: metadata) {
            case .clientSecretPost:
                form += [("client_id", provider.clientId), ("client_secret", secret)]
            case .clientSecretBasic:
                // Both parts form-encoded first (RFC 6749 §2.3.1).
                let pair = "\(FormEncoding.escape(provider.clientId)):\(FormEncoding.escape(secret))"
                exchange.headers.add(name: "Authorization", value: "Basic \(Data(pair.utf8).base64EncodedString())")
            }
        } else {
            form.append(("client_id", provider.clientId))
        }
        if provider.oauth2?.tokenByGet == true {
            // `HttpBinding` GET: the same parameters in the query (B2C's OAuth2 profiles allow it).
            exchange.method = .GET
            exchange.url = metadata.tokenEndpoint + (metadata.tokenEndpoint.contains("?") ? "&" : "?") + FormEncoding.encode(form)
            exchange.headers.remove(name: "Content-Type")
        } else {
            exchange.body = .bytes(ByteBuffer(string: FormEncoding.encode(form)))
        }
        let answer: [String: JSONValue]
        do {
            let (status, body) = try await Self.send(exchange)
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(buffer: body)) else {
                throw Failure(message: "the token endpoint answered HTTP \(status) without JSON")
            }
            if case .string(let error)? = object["error"] {
                throw Failure(message: "Error: \(TextRules.printable(error))")
            }
            answer = object
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(message: "the token endpoint could not be reached")
        }
        if let oauth2 = provider.oauth2 {
            return try await claimsEndpointIdentity(answer, endpoints: oauth2, provider: provider)
        }
        guard case .string(let idToken)? = answer["id_token"] else { throw Failure(message: "the token response has no id_token") }
        let claims = try await verifiedClaims(idToken, provider: provider, metadata: metadata, nonce: request.nonce, now: now)
        return try identity(from: claims, provider: provider)
    }

    /// The identity of an ID token the provider posted back (`response_types` `id_token`): checked
    /// as a redeemed one is (OIDC Core §3.2.2.11: as §3.1.3.7, and the nonce is required).
    func postedIdentity(idToken: String, provider: UpstreamProvider, request: UpstreamRequest, now: Date) async throws -> FederatedIdentity {
        let metadata = try await directory.metadata(provider)
        let claims = try await verifiedClaims(idToken, provider: provider, metadata: metadata, nonce: request.nonce, now: now)
        return try identity(from: claims, provider: provider)
    }

    /// The ID token's claims once every check holds (OIDC Core §3.1.3.7).
    func verifiedClaims(_ token: String, provider: UpstreamProvider, metadata: UpstreamMetadata, nonce: String, now: Date) async throws
        -> JWTClaims
    {
        let unverified: RS256.UnverifiedToken
        do { unverified = try RS256.parse(token, requiringKeyID: false) } catch { throw Failure(message: "the id_token is not an RS256 JWT") }
        guard try await directory.verifies(unverified, metadata: metadata) else {
            throw Failure(message: "the id_token's signature does not verify with the provider's keys")
        }
        let claims: JWTClaims
        do { claims = try unverified.claims() } catch { throw Failure(message: "the id_token's claims are not JSON") }
        var issuer = metadata.issuer
        if metadata.issuer.contains("{tenantid}") {
            // A multi-tenant provider (Entra's `common`): the token's own tenant's issuer, from
            // its `tid`, and an issuer the policy accepts (B2C's ValidTokenIssuerPrefixes).
            guard
                let tenantIssuer = provider.tenantIssuer(template: metadata.issuer, tenantID: claims.string("tid"), claimed: claims.issuer)
            else {
                throw Failure(message: "the id_token's issuer is not one of the accepted tenants' (ValidTokenIssuerPrefixes)")
            }
            issuer = tenantIssuer
        }
        let policy = ClaimPolicy(issuers: .exactly([issuer]), audiences: [provider.clientId], leeway: 300, checksIssuedAt: true)
        do {
            try policy.check(claims, now: now)
        } catch {
            switch error {
            case .untrustedIssuer: throw Failure(message: "the id_token's issuer is not the provider's")
            case .wrongAudience: throw Failure(message: "the id_token is not for this client")
            case .expired: throw Failure(message: "the id_token has expired")
            case .issuedInTheFuture: throw Failure(message: "the id_token was issued in the future")
            case .notYetValid: throw Failure(message: "the id_token is not valid yet")
            case .malformed(let what): throw Failure(message: "the id_token is malformed (\(what))")
            }
        }
        if claims.audience.count > 1, let azp = claims.string("azp"), azp != provider.clientId {
            throw Failure(message: "the id_token's azp is another client")
        }
        guard let sent = claims.string("nonce"), Secrets.constantTimeEquals(sent, nonce) else {
            throw Failure(message: "the id_token's nonce is not this sign-in's")
        }
        return claims
    }

    /// The account details the claims mapping names (defaults: `sub`, `name`, `given_name`,
    /// `family_name`, `email`), each checked as the pages check typed ones.
    func identity(from claims: JWTClaims, provider: UpstreamProvider) throws -> FederatedIdentity {
        let mapping = provider.claimsMapping ?? .init()
        func text(_ name: String?, _ fallback: String) -> String? {
            claims.string(name ?? fallback).flatMap { try? TextRules.name($0, maximumLength: 256).get() }
        }
        // The user id exactly as sent: a value the name rules would rewrite is refused rather than
        // folded into another (two subjects must never become one account).
        guard let rawSubject = claims.string(mapping.userId ?? "sub"), let subject = text(mapping.userId, "sub"), subject == rawSubject
        else { throw Failure(message: "the id_token has no usable user id") }
        let email = text(mapping.email, "email").flatMap(EmailAddress.init)
        let name = text(mapping.displayName, "name") ?? email.map { String($0.display.split(separator: "@").first ?? "") } ?? subject
        // The address counts as proven only when the provider says so (OIDC Core §5.1
        // `email_verified`); otherwise it is kept unproven and tokens do not assert it.
        let verified = claims["email_verified"]?.bool == true || claims.string("email_verified")?.lowercased() == "true"
        var values: [String: String] = [:]
        for (key, value) in claims.values {
            switch value {
            case .string(let text): values[key] = text
            case .number(let number): values[key] = Int64(exactly: number).map(String.init) ?? String(number)
            case .bool(let flag): values[key] = flag ? "true" : "false"
            case .array, .object, .null: break
            }
        }
        return FederatedIdentity(
            provider: provider.kind, subject: subject, email: email?.display, displayName: name,
            givenName: text(mapping.givenName, "given_name"), surname: text(mapping.surname, "family_name"), emailVerified: verified,
            claims: values)
    }

    /// One outbound call to a provider (its metadata, keys, token or claims endpoint): 10 s for
    /// the answer, 15 s in all, at most 1 MiB of body read, to an address ``OutboundURL`` checked.
    static func send(_ request: HTTPClientRequest) async throws -> (status: UInt, body: ByteBuffer) {
        try await OutboundTrace.call("\(request.method.rawValue) identity-provider", host: URL(string: request.url)?.host) { trace in
            var request = request
            request.headers.add(contentsOf: trace)
            return try await OutboundURL.withDeadline(seconds: 15) { [request] in
                let answer = try await OutboundURL.execute(request, timeout: .seconds(10), maximumBytes: 1 << 20)
                return (UInt(answer.status), answer.body)
            }
        }
    }

    package init(directory: UpstreamDirectory, requests: any UpstreamRequestStore, dataKey: DataKey) {
        self.directory = directory
        self.requests = requests
        self.dataKey = dataKey
    }
}

/// Providers' metadata and keys, fetched on first use and kept for five minutes; an unknown
/// `kid` refetches the key set at most once a minute per provider.
package actor UpstreamDirectory {
    package init() {}

    private var metadata: [String: (value: UpstreamMetadata, fetched: Date)] = [:]
    private var keys: [String: (value: [(kid: String?, key: _RSA.Signing.PublicKey)], fetched: Date)] = [:]
    /// The most keys a token without a `kid` is tried against.
    static let maximumKeysTried = 20
    static let lifetime: TimeInterval = 300
    static let refetchInterval: TimeInterval = 60

    /// Drops what was fetched: the next use of any provider fetches its metadata and keys again.
    func forget() {
        metadata = [:]
        keys = [:]
    }

    func metadata(_ provider: UpstreamProvider) async throws -> UpstreamMetadata {
        if let oauth2 = provider.oauth2 {
            // As for discovered endpoints: a provider elsewhere cannot point this server at itself.
            if let refused = OutboundURL.localTarget(
                among: [oauth2.tokenEndpoint, oauth2.claimsEndpoint], declared: oauth2.authorizationEndpoint)
            {
                throw UpstreamOIDC.Failure(message: "the provider's endpoints point this server at \(TextRules.printable(refused))")
            }
            return oauth2.metadata()
        }
        if let cached = metadata[provider.metadataUrl], Date().timeIntervalSince(cached.fetched) < Self.lifetime { return cached.value }
        let document = try await Self.fetch(provider.metadataUrl)
        func text(_ key: String) -> String? { if case .string(let value)? = document[key] { value } else { nil } }
        guard let issuer = text("issuer"), let authorize = text("authorization_endpoint"), let token = text("token_endpoint"),
            let jwks = text("jwks_uri")
        else { throw UpstreamOIDC.Failure(message: "the provider's metadata lacks an endpoint") }
        // OpenID Connect Discovery 1.0 §4.3: the issuer must be the one the URL was made from.
        guard issuer == provider.issuer || provider.isIssuerTemplate(issuer) else {
            let hint = issuer.contains("{tenantid}") ? " (a multi-tenant provider needs ValidTokenIssuerPrefixes)" : ""
            throw UpstreamOIDC.Failure(
                message: "the provider's metadata names issuer \(TextRules.printable(issuer)), not \(provider.issuer)\(hint)")
        }
        // Every endpoint is https, or http on loopback only (a local provider in development).
        for endpoint in [authorize, token, jwks] where !OutboundURL.isAllowed(endpoint) {
            throw UpstreamOIDC.Failure(message: "the provider's metadata names an endpoint that is not https (or http on loopback)")
        }
        if let refused = OutboundURL.localTarget(among: [token, jwks], declared: provider.metadataUrl) {
            throw UpstreamOIDC.Failure(message: "the provider's metadata points this server at \(TextRules.printable(refused))")
        }
        var methods: [String]?
        if case .array(let listed)? = document["token_endpoint_auth_methods_supported"] {
            methods = listed.compactMap { if case .string(let method) = $0 { method } else { nil } }
        }
        let value = UpstreamMetadata(
            issuer: issuer, authorizationEndpoint: authorize, tokenEndpoint: token, jwksURI: jwks, tokenEndpointAuthMethods: methods,
            issuerInResponse: document["authorization_response_iss_parameter_supported"] == .bool(true))
        metadata[provider.metadataUrl] = (value, Date())
        return value
    }

    /// The issuer and key set an app's token configuration document names (OpenID Connect
    /// Discovery's `issuer` and `jwks_uri`, no endpoints): what an `id_token_hint` profile's
    /// `METADATA` points at (id-token-hint.md, "Issue a token with asymmetric keys"). The same
    /// rules as a provider's metadata: https (or http on loopback), and a `jwks_uri` that does not
    /// point this server at a local address the document's own URL did not name.
    func tokenIssuer(_ metadataURL: String) async throws -> UpstreamMetadata {
        let key = "token-issuer:" + metadataURL
        if let cached = metadata[key], Date().timeIntervalSince(cached.fetched) < Self.lifetime { return cached.value }
        guard OutboundURL.isAllowed(metadataURL) else { throw UpstreamOIDC.Failure(message: "the METADATA URL is not https (or http on loopback)") }
        let document = try await Self.fetch(metadataURL)
        guard case .string(let issuer)? = document["issuer"], case .string(let jwks)? = document["jwks_uri"] else {
            throw UpstreamOIDC.Failure(message: "the token issuer's metadata lacks its issuer or jwks_uri")
        }
        guard OutboundURL.isAllowed(jwks) else {
            throw UpstreamOIDC.Failure(message: "the token issuer's metadata names a jwks_uri that is not https (or http on loopback)")
        }
        if let refused = OutboundURL.localTarget(among: [jwks], declared: metadataURL) {
            throw UpstreamOIDC.Failure(message: "the token issuer's metadata points this server at \(TextRules.printable(refused))")
        }
        let value = UpstreamMetadata(issuer: issuer, authorizationEndpoint: "", tokenEndpoint: "", jwksURI: jwks)
        metadata[key] = (value, Date())
        return value
    }

    /// Whether a key of the provider signed `token`: the key its `kid` names, or, for a token
    /// without one (RFC 7515 §4.1.4 makes it optional), any of its signing keys, as
    /// Microsoft.IdentityModel tries them. Keys are fetched again, at most once a minute, when
    /// none verifies (a rotation).
    func verifies(_ token: RS256.UnverifiedToken, metadata: UpstreamMetadata) async throws -> Bool {
        func candidates(_ list: [(kid: String?, key: _RSA.Signing.PublicKey)]) -> [_RSA.Signing.PublicKey] {
            token.keyID.isEmpty ? list.prefix(Self.maximumKeysTried).map(\.key) : list.filter { $0.kid == token.keyID }.map(\.key)
        }
        if let cached = keys[metadata.jwksURI], Date().timeIntervalSince(cached.fetched) < Self.lifetime {
            if candidates(cached.value).contains(where: token.isSigned(by:)) { return true }
            if Date().timeIntervalSince(cached.fetched) < Self.refetchInterval { return false }
        }
        return candidates(try await fetchKeys(metadata)).contains(where: token.isSigned(by:))
    }

    private func fetchKeys(_ metadata: UpstreamMetadata) async throws -> [(kid: String?, key: _RSA.Signing.PublicKey)] {
        var request = HTTPClientRequest(url: metadata.jwksURI)
        request.headers.add(name: "Accept", value: "application/json")
        let body: ByteBuffer
        do {
            body = try await UpstreamOIDC.send(request).body
        } catch {
            throw UpstreamOIDC.Failure(message: "the provider's keys could not be fetched")
        }
        let list = JWKSet.signingKeyList(from: Data(buffer: body))
        keys[metadata.jwksURI] = (list, Date())
        return list
    }

    private static func fetch(_ url: String) async throws -> [String: JSONValue] {
        do {
            let (status, body) = try await UpstreamOIDC.send(HTTPClientRequest(url: url))
            guard status == 200, let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(buffer: body)) else {
                throw UpstreamOIDC.Failure(message: "the provider's metadata answered HTTP \(status)")
            }
            return object
        } catch let failure as UpstreamOIDC.Failure {
            throw failure
        } catch {
            throw UpstreamOIDC.Failure(message: "the provider's metadata could not be fetched")
        }
    }
}

/// One upstream authorization in flight, found again by its `state`.
package struct UpstreamRequest: Sendable, Equatable {
    var interactionID: String
    var provider: String
    var verifier: String
    var nonce: String
    /// The provider's issuer when the request was sent (nil for requests stored before it was
    /// recorded: refused).
    var issuer: String?
}

package protocol UpstreamRequestStore: Sendable {
    func save(_ request: UpstreamRequest, stateHash: String, expiresAt: Date) async throws
    /// The request of this state, once: taken from the store.
    func take(stateHash: String, now: Date) async throws -> UpstreamRequest?
}

package struct SQLUpstreamRequestStore: UpstreamRequestStore {
    let database: any Database
    let dataKey: DataKey

    private static func context(_ stateHash: String) -> String { "upstream_requests.verifier:\(stateHash)" }

    package func save(_ request: UpstreamRequest, stateHash: String, expiresAt: Date) async throws {
        let sealed = try dataKey.seal(request.verifier, context: Self.context(stateHash))
        try await database.transaction { sql in
            try await sql.insert(into: "upstream_requests")
                .columns("state_hash", "interaction_id", "provider", "sealed_verifier", "nonce", "expires_at", "issuer")
                .values(
                    SQLBind(stateHash), SQLBind(request.interactionID), SQLBind(request.provider), SQLBind(sealed), SQLBind(request.nonce),
                    SQLBind(expiresAt.epochSeconds), SQLBind(request.issuer)
                ).run()
        }
    }

    struct Row: Codable {
        var interactionId: String
        var provider: String
        var sealedVerifier: String
        var nonce: String
        var expiresAt: Int64
        var issuer: String?
    }

    package func take(stateHash: String, now: Date) async throws -> UpstreamRequest? {
        let row = try await database.transaction { sql in
            try await sql.raw(
                """
                DELETE FROM upstream_requests WHERE state_hash = \(bind: stateHash)
                RETURNING interaction_id, provider, sealed_verifier, nonce, expires_at, issuer
                """
            ).first(decoding: Row.self, with: .snakeCase)
        }
        guard let row, row.expiresAt > now.epochSeconds else { return nil }
        let verifier = try dataKey.open(row.sealedVerifier, context: Self.context(stateHash)).value
        return UpstreamRequest(
            interactionID: row.interactionId, provider: row.provider, verifier: verifier, nonce: row.nonce, issuer: row.issuer)
    }

    package init(database: any Database, dataKey: DataKey) {
        self.database = database
        self.dataKey = dataKey
    }
}
