import Foundation

/// Trust by tenant (``BearerPolicy/tenantAuthorities``): the policies of a trusted B2C tenant are
/// found as tokens name them, instead of being listed when the API starts.
struct FoundPolicies {
    /// Discovery URLs of the policies found (lower-cased policy names), in the order found.
    var urls: [String] = []
    /// URLs being fetched now: they hold a place under the cap until they load or fail.
    var pending: Set<String> = []
    /// When each policy name (lower-cased) last caused a discovery.
    var attempts: [String: Date] = [:]
}

extension BearerValidator {
    /// At most this many policies are trusted this way; a token naming another finds no key.
    static let policyAuthorityLimit = 64
    /// At most this many discoveries per ``BearerPolicy/keyRefreshInterval``, whatever the names:
    /// tokens naming made-up policies cannot turn into a stream of requests to the tenant.
    static let discoveriesPerInterval = 16

    /// The configured authorities and the tenants' policies found so far.
    func trustedURLs() -> [String] { policy.discoveryURLs + policyAuthorities.withLock { $0.urls } }

    /// Whether a B2C policy id (`B2C_1_…` or `B2C_1A_…`): letters, digits, `_` and `-`, so the
    /// name can only ever extend a trusted tenant's URL by one path segment.
    static func isPolicyName(_ name: String) -> Bool {
        let lower = name.lowercased()
        guard name.count <= 128, lower.hasPrefix("b2c_1_") || lower.hasPrefix("b2c_1a_") else { return false }
        return name.unicodeScalars.allSatisfy { ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || $0 == "_" || $0 == "-" }
    }

    /// The discovery URLs of policy `name` under each trusted tenant; policy ids are not case
    /// sensitive in B2C, so the name is lower-cased (one URL per policy, whatever a token wrote).
    func policyURLs(named name: String) -> [String] {
        policy.tenantAuthorities.map { tenant in
            var base = tenant
            while base.hasSuffix("/") { base.removeLast() }
            return "\(base)/\(name.lowercased())/v2.0/.well-known/openid-configuration"
        }
    }

    /// The found policy URLs of the policy a token names, to refresh when its kid is new.
    func foundPolicyURL(named name: String?) -> [String] {
        guard let name, Self.isPolicyName(name) else { return [] }
        let wanted = Set(policyURLs(named: name))
        return policyAuthorities.withLock { $0.urls.filter(wanted.contains) }
    }

    /// Loads the key set of the policy `name` in each trusted tenant where it is not trusted yet;
    /// true when one of them loaded and was trusted. Its issuer must be one a configured
    /// authority of the tenants has (B2C's policies of one tenant share it), so a policy cannot
    /// bring in an issuer of its own. A name is tried at most once per
    /// ``BearerPolicy/keyRefreshInterval``, all names together ``discoveriesPerInterval`` times,
    /// and nothing is kept of a policy that did not load.
    func discoverPolicy(_ name: String, now: Date) async -> Bool {
        guard !policy.tenantAuthorities.isEmpty, Self.isPolicyName(name) else { return false }
        let known = Set(trustedURLs().map { $0.lowercased() })
        let candidates = policyURLs(named: name).filter { !known.contains($0.lowercased()) }
        let interval = policy.keyRefreshInterval
        let reserved = policyAuthorities.withLock { found -> [String] in
            let key = name.lowercased()
            if let last = found.attempts[key], now >= last, now.timeIntervalSince(last) < interval { return [] }
            found.attempts = found.attempts.filter { now >= $0.value && now.timeIntervalSince($0.value) < interval }
            guard found.attempts.count < Self.discoveriesPerInterval else { return [] }
            let room = Self.policyAuthorityLimit - found.urls.count - found.pending.count
            let taken = Array(candidates.filter { !found.pending.contains($0) }.prefix(max(room, 0)))
            guard !taken.isEmpty else { return [] }
            found.attempts[key] = now
            found.pending.formUnion(taken)
            return taken
        }
        let issuers = authorities.withLock { all in Set(policy.discoveryURLs.compactMap { all[$0]?.issuer }) }
        var trusted = false
        for url in reserved {
            let loaded = await refresh(url, now: now, minimumGap: 0)
            let issuer = authorities.withLock { $0[url]?.issuer }
            let accepted = loaded && issuer.map(issuers.contains) == true
            if !accepted {
                // Nothing is kept of it: its keys, its attempt (the name's attempt throttles it).
                authorities.withLock { _ = $0.removeValue(forKey: url) }
                lastAttempt.withLock { _ = $0.removeValue(forKey: url) }
            }
            policyAuthorities.withLock { found in
                found.pending.remove(url)
                if accepted, !found.urls.contains(url) { found.urls.append(url) }
            }
            trusted = trusted || accepted
        }
        return trusted
    }
}
