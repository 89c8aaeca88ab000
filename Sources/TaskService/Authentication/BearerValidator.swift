import Crypto
import CryptoExtras
import Foundation
import JOSE
import Logging
import Synchronization
import TodoModels
import WireCoding

/// Why a bearer token was refused; each maps to RFC 6750's `WWW-Authenticate` error.
public enum TokenRejection: Error, Equatable, Sendable {
    case missing
    case malformed(String)
    case unsupportedAlgorithm(String)
    case unknownKey
    case badSignature
    case untrustedIssuer
    case wrongAudience
    case expired
    case notYetValid
    case notAnAccessToken
    /// An app-only token (client credentials): no user, so no tasks of anyone's.
    case appOnly
    case insufficientScope(required: [String])
    /// No trusted authority's keys could be fetched: not the client's fault.
    case authorityUnavailable

    /// A short reason for `error_description` and for metrics labels.
    public var reason: String {
        switch self {
        case .missing: "missing"
        case .malformed: "malformed"
        case .unsupportedAlgorithm: "algorithm"
        case .unknownKey: "unknown_key"
        case .badSignature: "signature"
        case .untrustedIssuer: "issuer"
        case .wrongAudience: "audience"
        case .expired: "expired"
        case .notYetValid: "not_yet_valid"
        case .notAnAccessToken: "not_access_token"
        case .appOnly: "app_only"
        case .insufficientScope: "scope"
        case .authorityUnavailable: "authority_unavailable"
        }
    }

    public var description: String {
        switch self {
        case .missing: "No bearer token."
        case .malformed(let detail): "The token is malformed: \(detail)."
        case .unsupportedAlgorithm(let alg): "The token algorithm '\(alg)' is not accepted; only RS256 is."
        case .unknownKey: "The token was signed with an unknown key."
        case .badSignature: "The token signature is invalid."
        case .untrustedIssuer: "The token issuer is not trusted."
        case .wrongAudience: "The token audience is not this API."
        case .expired: "The token has expired."
        case .notYetValid: "The token is not valid yet."
        case .notAnAccessToken: "The token is not an access token."
        case .appOnly: "The token is an application's own (client credentials); this API serves signed-in users."
        case .insufficientScope(let required): "The token lacks the required scope (\(required.joined(separator: " or ")))."
        case .authorityUnavailable: "The signing keys of the trusted authorities cannot be fetched right now."
        }
    }
}

/// Fetches discovery documents and key sets.
public protocol MetadataFetcher: Sendable {
    func fetch(_ url: String) async throws -> Data
}

/// What the API accepts (SPEC §3; RFC 6750, RFC 8725).
public struct BearerPolicy: Sendable {
    /// OpenID discovery URLs of the trusted authorities, e.g.
    /// `https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi/v2.0/.well-known/openid-configuration`.
    public var discoveryURLs: [String]
    /// Accepted `aud` values: the API's client id or configured audiences.
    public var audiences: [String]
    /// When not empty, the token's `scp` must hold one of these (403 `insufficient_scope` otherwise).
    public var requiredScopes: [String]
    /// Allowed clock difference for `exp`/`nbf` (passport-azure-ad's default: 300 s).
    public var clockSkew: TimeInterval
    /// The least time between two key-set fetches for the same unknown `kid`.
    public var keyRefreshInterval: TimeInterval
    /// The least time between two fetches of one authority's key set for `kid`s seen for the
    /// first time: a key the authority has just started signing with is fetched at once, while
    /// tokens with made-up `kid`s cost it at most one fetch per this gap.
    public var newKeyFetchGap: TimeInterval
    /// How long a fetched key set is used before it is fetched again. The JWKS is authoritative:
    /// a key an authority stops publishing stops verifying here within this time (the security
    /// issue's M-5), and an authority must publish a new key this long before signing with it.
    public var keyCacheLifetime: TimeInterval
    /// While an authority cannot be reached, its last key set keeps verifying up to this age.
    public var keySetMaximumAge: TimeInterval
    /// B2C tenants whose every policy is trusted (`https://host/contoso.onmicrosoft.com`): a
    /// token whose key no listed authority publishes is looked up under the policy its `tfp`
    /// (or `acr`) names in one of these tenants, so a policy uploaded after the API started is
    /// trusted without a restart. The discovery document's issuer must still be the token's.
    public var tenantAuthorities: [String]

    public init(
        discoveryURLs: [String], audiences: [String], requiredScopes: [String] = [], clockSkew: TimeInterval = 300,
        keyRefreshInterval: TimeInterval = 60, newKeyFetchGap: TimeInterval = 1, keyCacheLifetime: TimeInterval = 300,
        keySetMaximumAge: TimeInterval = 86_400, tenantAuthorities: [String] = []
    ) {
        self.tenantAuthorities = tenantAuthorities
        self.newKeyFetchGap = newKeyFetchGap
        self.discoveryURLs = discoveryURLs
        self.audiences = audiences
        self.requiredScopes = requiredScopes
        self.clockSkew = clockSkew
        self.keyRefreshInterval = keyRefreshInterval
        self.keyCacheLifetime = keyCacheLifetime
        self.keySetMaximumAge = keySetMaximumAge
    }

    /// The discovery URL of a B2C authority (`https://host/tenant/policy`, any of B2C's shapes,
    /// or a URL already ending in `openid-configuration`).
    public static func discoveryURL(forAuthority authority: String) -> String {
        if authority.contains(".well-known/openid-configuration") { return authority }
        var base = authority
        while base.hasSuffix("/") { base.removeLast() }
        return base.hasSuffix("/v2.0") ? "\(base)/.well-known/openid-configuration" : "\(base)/v2.0/.well-known/openid-configuration"
    }
}

/// Validates bearer tokens locally with cached keys; the identity service is asked only for its
/// discovery document and keys, never per request (ARCHITECTURE.md). A token that passed is
/// remembered by its hash until it expires, so RSA verification is not paid on every request.
public final class BearerValidator: Sendable {
    struct AuthorityKeys {
        var issuer: String
        var keys: [String: _RSA.Signing.PublicKey]
        var fetchedAt: Date
    }

    /// A token that passed, remembered until it expires or its key is withdrawn.
    struct Accepted {
        var user: AuthenticatedUser
        var kid: String
    }

    let policy: BearerPolicy
    private let fetcher: any MetadataFetcher
    private let logger: Logger
    let authorities = Mutex<[String: AuthorityKeys]>([:])
    let lastAttempt = Mutex<[String: Date]>([:])
    /// When each unknown `kid` last caused a fetch (a bounded table).
    private let kidAttempts = Mutex<[String: Date]>([:])
    private let inflight = Mutex<[String: Task<AuthorityKeys?, Never>]>([:])
    private let accepted = Mutex<[String: Accepted]>([:])
    /// The policies of ``BearerPolicy/tenantAuthorities`` found so far, and when each policy
    /// name last caused a discovery (both bounded; BearerValidator+Policies.swift).
    let policyAuthorities = Mutex(FoundPolicies())
    private static let cacheLimit = 20_000
    /// The time tokens are judged at: the identity service's clock where both run in one process (`/dev/clock`).
    let clock: @Sendable () -> Date

    public init(policy: BearerPolicy, fetcher: any MetadataFetcher, logger: Logger, clock: @escaping @Sendable () -> Date = { Date() }) {
        (self.clock, self.policy) = (clock, policy)
        self.fetcher = fetcher
        self.logger = logger
    }

    public func validate(_ token: String, now: Date? = nil) async throws(TokenRejection) -> AuthenticatedUser {
        let now = now ?? clock()
        guard !token.isEmpty else { throw .missing }
        guard token.utf8.count <= 16_384 else { throw .malformed("too long") }
        let cacheKey = Hex.lowercase(SHA256.hash(data: Data(token.utf8)))
        if let hit = accepted.withLock({ $0[cacheKey] }), !hasStaleKeys(now: now) {
            guard hit.user.expiresAt.addingTimeInterval(policy.clockSkew) > now else { throw .expired }
            return hit.user
        }
        let (user, kid) = try await verify(token, now: now)
        accepted.withLock { cache in
            if cache.count >= Self.cacheLimit {
                // Down to half: expired entries first, then those expiring soonest.
                cache = cache.filter { $0.value.user.expiresAt > now }
                if cache.count > Self.cacheLimit / 2 {
                    let keep = cache.sorted { $0.value.user.expiresAt > $1.value.user.expiresAt }.prefix(Self.cacheLimit / 2)
                    cache = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
                }
            }
            cache[cacheKey] = Accepted(user: user, kid: kid)
        }
        return user
    }

    private func verify(_ token: String, now: Date) async throws(TokenRejection) -> (AuthenticatedUser, kid: String) {
        let parsed: RS256.UnverifiedToken
        do {
            parsed = try RS256.parse(token)
        } catch {
            switch error {
            case .malformed(let what): throw .malformed(what)
            case .unsupportedAlgorithm(let algorithm): throw .unsupportedAlgorithm(algorithm)
            case .missingKeyID: throw .unknownKey
            // RS256.parse checks no signature; only SharedSecretJWS reports this.
            case .signatureInvalid: throw .malformed("signature")
            }
        }
        let kid = parsed.keyID
        // Several trusted authorities may publish the same key (B2C policies of one tenant do);
        // the issuers whose key verifies are the ones the token may claim.
        // The policy the (unverified) token names only picks which trusted tenant's key set to
        // fetch; its key must still verify and its discovery document's issuer be the token's.
        let unverified = try? parsed.claims()
        let policyName = unverified?.string("tfp") ?? unverified?.string("acr")
        let verifiedIssuers = try await candidates(for: kid, policyName: policyName, now: now).filter { parsed.isSigned(by: $0.key) }
            .map(\.issuer)
        guard !verifiedIssuers.isEmpty else { throw .badSignature }
        guard let claims = try? parsed.claims() else { throw .malformed("payload") }
        // The key's own authority must be the issuer, so one trusted authority cannot mint
        // tokens in another's name.
        let claimPolicy = ClaimPolicy(
            issuers: .exactly(Set(verifiedIssuers)), audiences: Set(policy.audiences), leeway: policy.clockSkew)
        do {
            try claimPolicy.check(claims, now: now)
        } catch {
            switch error {
            case .untrustedIssuer: throw .untrustedIssuer
            case .wrongAudience: throw .wrongAudience
            case .expired: throw .expired
            case .notYetValid, .issuedInTheFuture: throw .notYetValid
            case .malformed(let what): throw .malformed(what)
            }
        }
        guard let issuer = claims.issuer, let expiresAt = claims.expiresAt else { throw .malformed("no exp") }
        // B2C gives ID and access tokens the same `aud` and `typ`; only access tokens carry
        // `scp`/`azp` (SPEC §3).
        guard claims["scp"] != nil || claims["azp"] != nil else { throw .notAnAccessToken }
        let scopes = claims.string("scp")?.split(separator: " ").map(String.init) ?? []
        if !policy.requiredScopes.isEmpty, !scopes.contains(where: { policy.requiredScopes.contains($0) }) {
            throw .insufficientScope(required: policy.requiredScopes)
        }
        guard let owner = claims.string("oid") ?? claims.subject, !owner.isEmpty else {
            throw .malformed("no oid or sub")
        }
        if Self.isAppOnly(claims, objectID: owner) { throw .appOnly }
        let user = AuthenticatedUser(
            ownerID: AuthenticatedUser.ownerKey(issuer: issuer, objectID: owner), objectID: owner,
            // The token's name is stored with each task: controls become visible escapes, never stored raw.
            name: claims.string("name").map(TextRules.printable), scopes: scopes, issuer: issuer, expiresAt: expiresAt)
        return (user, kid)
    }

    /// An app-only token: Entra's `idtyp: app` (optional claim), application `roles` without
    /// delegated `scp`, or a subject that is the calling app itself (`oid` = `azp`, as this
    /// system's client-credentials tokens have it).
    static func isAppOnly(_ claims: JWTClaims, objectID: String) -> Bool {
        if claims.string("idtyp")?.lowercased() == "app" { return true }
        if claims["scp"] == nil, claims["roles"] != nil { return true }
        if let azp = claims.string("azp") ?? claims.string("appid"), azp.lowercased() == objectID.lowercased() { return true }
        return false
    }

    /// Whether a key set has outlived ``BearerPolicy/keyCacheLifetime`` (one lock, on every
    /// request). Every set held is a trusted one's: a policy's set that was not accepted is
    /// removed the moment it loaded (``discoverPolicy(_:now:)``), so it is never stale here.
    private func hasStaleKeys(now: Date) -> Bool {
        authorities.withLock { all in all.values.contains { now.timeIntervalSince($0.fetchedAt) >= policy.keyCacheLifetime } }
    }

    /// The key `kid` and its authority's issuer. Key sets past their cache lifetime are fetched
    /// again first. An unknown `kid` seen for the first time fetches the sets again at once (at
    /// most once per `newKeyFetchGap` per authority), so a rotation is picked up by the first
    /// token signed with the new key; the same unknown `kid` again waits `keyRefreshInterval`.
    /// Concurrent requests share one fetch per authority.
    private func candidates(for kid: String, policyName: String?, now: Date) async throws(TokenRejection) -> [(
        issuer: String, key: _RSA.Signing.PublicKey
    )] {
        let trusted = trustedURLs()
        let stale = authorities.withLock { all in
            trusted.filter { url in all[url].map { now.timeIntervalSince($0.fetchedAt) >= policy.keyCacheLifetime } ?? false }
        }
        // A failed refresh is retried after `keyRefreshInterval`; meanwhile the old set verifies
        // (up to its maximum age) without every request waiting on a dead authority.
        for url in stale { _ = await refresh(url, now: now, minimumGap: policy.keyRefreshInterval) }
        let known = lookup(kid, now: now)
        if !known.isEmpty { return known }
        let firstSight = kidAttempts.withLock { tried -> Bool in
            if let last = tried[kid], now >= last, now.timeIntervalSince(last) < policy.keyRefreshInterval { return false }
            if tried.count >= 1024 {
                tried = tried.filter { now >= $0.value && now.timeIntervalSince($0.value) < policy.keyRefreshInterval }
                if tried.count >= 1024 { tried.removeAll() }
            }
            tried[kid] = now
            return true
        }
        var anyLoaded = false
        // The configured authorities, and of the tenants' policies only the one the token names:
        // a made-up kid costs each listed authority one fetch per gap, not every policy found.
        for url in policy.discoveryURLs + foundPolicyURL(named: policyName) {
            let loaded = authorities.withLock { $0[url] } != nil
            let gap = !loaded ? 5 : (firstSight ? policy.newKeyFetchGap : policy.keyRefreshInterval)
            if await refresh(url, now: now, minimumGap: gap) { anyLoaded = true }
        }
        let found = lookup(kid, now: now)
        if !found.isEmpty { return found }
        if let policyName, await discoverPolicy(policyName, now: now) {
            let found = lookup(kid, now: now)
            if !found.isEmpty { return found }
            anyLoaded = true
        }
        throw anyLoaded ? .unknownKey : .authorityUnavailable
    }

    /// Loads `url`'s keys unless a fetch was tried less than `minimumGap` ago; returns whether
    /// keys for it are known afterwards. A successful fetch replaces the set: keys that are no
    /// longer published stop verifying, and tokens accepted with them are forgotten.
    func refresh(_ url: String, now: Date, minimumGap: TimeInterval) async -> Bool {
        let known = authorities.withLock { $0[url] }.map { now.timeIntervalSince($0.fetchedAt) < policy.keySetMaximumAge } ?? false
        let task = inflight.withLock { running -> Task<AuthorityKeys?, Never>? in
            if let existing = running[url] { return existing }
            let last = lastAttempt.withLock { $0[url] }
            // A request timed before the last attempt is within the gap too (never a way past it).
            if let last, now.timeIntervalSince(last) < minimumGap { return nil }
            lastAttempt.withLock { $0[url] = max(last ?? now, now) }
            let task = Task { [self] () -> AuthorityKeys? in
                do {
                    return try await load(url, now: now)
                } catch {
                    logger.warning("cannot fetch authority keys", metadata: ["discovery": "\(url)", "error": "\(error)"])
                    return nil
                }
            }
            running[url] = task
            return task
        }
        guard let task else { return known }
        if let loaded = await task.value {
            let previous = authorities.withLock { all in
                let previous = all[url]
                all[url] = loaded
                return previous
            }
            let withdrawn = Set(previous?.keys.keys.map { $0 } ?? []).subtracting(loaded.keys.keys)
            if !withdrawn.isEmpty {
                logger.notice("authority withdrew signing keys", metadata: ["issuer": "\(loaded.issuer)", "kids": "\(withdrawn.sorted())"])
                accepted.withLock { cache in cache = cache.filter { !withdrawn.contains($0.value.kid) } }
            }
        }
        inflight.withLock { _ = $0.removeValue(forKey: url) }
        return authorities.withLock { $0[url] }.map { now.timeIntervalSince($0.fetchedAt) < policy.keySetMaximumAge } ?? false
    }

    /// The keys named `kid` of key sets younger than ``BearerPolicy/keySetMaximumAge``.
    func lookup(_ kid: String, now: Date) -> [(issuer: String, key: _RSA.Signing.PublicKey)] {
        let trusted = Set(trustedURLs())
        return authorities.withLock { all in
            all.filter { trusted.contains($0.key) }.values.compactMap { authority in
                guard now.timeIntervalSince(authority.fetchedAt) < policy.keySetMaximumAge else { return nil }
                return authority.keys[kid].map { (authority.issuer, $0) }
            }
        }
    }

    /// The one issuer (directory, ``AuthenticatedUser/directory(of:)``) of all trusted
    /// authorities, once every authority's keys are loaded and only if they share it; nil
    /// otherwise.
    public func soleIssuer() -> String? {
        authorities.withLock { all in
            guard policy.discoveryURLs.allSatisfy({ all[$0] != nil }) else { return nil }
            let issuers = Set(all.values.map { AuthenticatedUser.directory(of: $0.issuer) })
            return issuers.count == 1 ? issuers.first : nil
        }
    }

    struct MetadataError: Error, CustomStringConvertible {
        let description: String
    }

    private func load(_ discoveryURL: String, now: Date) async throws -> AuthorityKeys {
        let document = try JSONSerialization.jsonObject(with: try await fetcher.fetch(discoveryURL)) as? [String: Any]
        guard let issuer = document?["issuer"] as? String, let jwksURI = document?["jwks_uri"] as? String else {
            throw MetadataError(description: "discovery document without issuer or jwks_uri")
        }
        let keys = JWKSet.signingKeys(from: try await fetcher.fetch(jwksURI))
        logger.info("authority keys loaded", metadata: ["issuer": "\(issuer)", "keys": "\(keys.count)"])
        return AuthorityKeys(issuer: issuer, keys: keys, fetchedAt: now)
    }
}
