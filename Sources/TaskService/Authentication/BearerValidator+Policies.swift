import Foundation

/// Trust by tenant (``BearerPolicy/tenantAuthorities``): the policies of a trusted B2C tenant are
/// found as tokens name them, instead of being listed when the API starts.
extension BearerValidator {
    /// At most this many policies are trusted this way; a token naming another finds no key.
    static let policyAuthorityLimit = 64

    /// The configured authorities and the tenants' policies found so far.
    func trustedURLs() -> [String] { policy.discoveryURLs + policyAuthorities.withLock { $0 } }

    /// Whether a B2C policy id (`B2C_1_…` or `B2C_1A_…`): letters, digits, `_` and `-`, so the
    /// name can only ever extend a trusted tenant's URL by one path segment.
    static func isPolicyName(_ name: String) -> Bool {
        let lower = name.lowercased()
        guard name.count <= 128, lower.hasPrefix("b2c_1_") || lower.hasPrefix("b2c_1a_") else { return false }
        return name.unicodeScalars.allSatisfy { ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || $0 == "_" || $0 == "-" }
    }

    /// Loads the key set of the policy `name` in each trusted tenant that does not have it yet;
    /// true when one of them loaded (it is trusted from then on). A name is tried at most once
    /// per ``BearerPolicy/keyRefreshInterval``, so tokens naming made-up policies cost the
    /// identity service one discovery request each per interval at most, and nothing is kept
    /// for a name that did not load.
    func discoverPolicy(_ name: String, now: Date) async -> Bool {
        guard !policy.tenantAuthorities.isEmpty, Self.isPolicyName(name) else { return false }
        let urls = policy.tenantAuthorities.map { tenant in
            var base = tenant
            while base.hasSuffix("/") { base.removeLast() }
            return "\(base)/\(name)/v2.0/.well-known/openid-configuration"
        }
        let known = Set(trustedURLs())
        let untried = urls.filter { !known.contains($0) }
        guard !untried.isEmpty, policyAuthorities.withLock({ $0.count }) < Self.policyAuthorityLimit else { return false }
        let due = policyAttempts.withLock { tried -> Bool in
            let key = name.lowercased()
            if let last = tried[key], now >= last, now.timeIntervalSince(last) < policy.keyRefreshInterval { return false }
            if tried.count >= 1024 {
                tried = tried.filter { now >= $0.value && now.timeIntervalSince($0.value) < policy.keyRefreshInterval }
                if tried.count >= 1024 { tried.removeAll() }
            }
            tried[key] = now
            return true
        }
        guard due else { return false }
        var loaded = false
        for url in untried {
            if await refresh(url, now: now, minimumGap: 0) {
                policyAuthorities.withLock { found in
                    if !found.contains(url), found.count < Self.policyAuthorityLimit { found.append(url) }
                }
                loaded = true
            } else {
                // Nothing is kept for a policy that is not there (``policyAttempts`` throttles it).
                lastAttempt.withLock { _ = $0.removeValue(forKey: url) }
            }
        }
        return loaded
    }
}
