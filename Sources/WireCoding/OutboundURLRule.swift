import Foundation

/// The rule for URLs the services call out to (API connectors, upstream providers and their
/// endpoints, a custom policy's REST profiles): https anywhere, plain http only on loopback (a
/// local endpoint in development), never credentials in the URL or another scheme. Pure, so a
/// policy can be checked against it at upload without the HTTP client.
public enum OutboundURLRule {
    public static func isAllowed(_ text: String) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(),
            !host.isEmpty,
            url.user == nil, url.password == nil
        else { return false }
        switch scheme {
        case "https": return true
        case "http": return LoopbackHost.isHost(host)
        default: return false
        }
    }
}

/// Names and addresses of this machine as a URL host or a `Host` header gives them: `localhost`
/// (and names under it, RFC 6761 §6.3, which resolvers keep on this machine), `127.0.0.0/8` in
/// dotted decimal form, or `::1`, with or without IPv6 brackets. Nothing else: a name that begins
/// `127.` (`127.attacker.example`) is a DNS name like any other.
public enum LoopbackHost {
    public static func isHost(_ host: String) -> Bool {
        let bare = host.lowercased().trimmingCharacters(in: ["[", "]"])
        if bare == "localhost" || bare.hasSuffix(".localhost") || bare == "::1" { return true }
        let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127"
            && octets.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) && UInt8($0) != nil }
    }
}
