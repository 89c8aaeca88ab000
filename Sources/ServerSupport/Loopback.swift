import WireCoding

/// Names and addresses of this machine as a `Host` header or a URL host gives them: the one
/// test for "is this loopback" the servers share.
public enum Loopback {
    /// `localhost` (and names under it, RFC 6761 §6.3), `127.0.0.0/8` in dotted form, or `::1`,
    /// with or without IPv6 brackets.
    public static func isHost(_ host: String) -> Bool { LoopbackHost.isHost(host) }

    /// ``isHost(_:)`` of an authority (`host[:port]`, `[v6][:port]`).
    public static func isAuthority(_ authority: String) -> Bool { isHost(host(ofAuthority: authority)) }

    /// Link-local addresses (`169.254.0.0/16`, `fe80::/10`): cloud metadata services live there.
    public static func isLinkLocalHost(_ host: String) -> Bool {
        let bare = host.lowercased().trimmingCharacters(in: ["[", "]"])
        if bare.hasPrefix("fe8") || bare.hasPrefix("fe9") || bare.hasPrefix("fea") || bare.hasPrefix("feb") { return bare.contains(":") }
        let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "169" && octets[1] == "254"
    }

    static func host(ofAuthority authority: String) -> String {
        var host = authority.lowercased()
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            host = String(host[host.index(after: host.startIndex)..<end])
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        return host
    }
}
