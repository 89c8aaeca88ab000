import Foundation
import HTTPTypes

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The load balancers and reverse proxies whose `X-Forwarded-For` is believed (issue 14). Behind
/// a balancer every request's peer is the balancer, so per-source limits (smart lockout,
/// sign-in transactions, the web app's anonymous sessions) would count every user as one, and
/// one attacker could lock everyone out. Only a trusted peer's header is read, and only its
/// rightmost entries (the ones the trusted proxies appended), so a client cannot choose its
/// own address by sending the header itself.
///
/// An entry is an address (`10.0.0.7`) or a range in CIDR notation (`10.0.0.0/8`, `fd00::/8`):
/// an ingress's addresses change as it is rescheduled, its network does not.
public struct TrustedProxies: Sendable {
    /// The exact addresses, canonical.
    public let addresses: Set<String>
    /// The ranges: the network's address bytes (4 or 16) and its prefix length.
    let ranges: [(network: [UInt8], prefix: Int)]

    public init(_ entries: [String]) {
        var addresses = Set<String>()
        var ranges: [(network: [UInt8], prefix: Int)] = []
        for entry in entries {
            if let range = Self.range(entry) { ranges.append(range) } else if let address = Self.canonical(entry) { addresses.insert(address) }
        }
        self.addresses = addresses
        self.ranges = ranges
    }

    /// Whether `entry` is an address or a CIDR range (what ``init(_:)`` takes; anything else
    /// would be dropped, trusting less than its writer meant).
    public static func isValidEntry(_ entry: String) -> Bool { range(entry) != nil || canonical(entry) != nil }

    /// Whether an address (any spelling ``canonical(_:)`` takes) is one of the proxies.
    public func contains(_ text: String) -> Bool {
        guard let address = Self.canonical(text) else { return false }
        if addresses.contains(address) { return true }
        guard !ranges.isEmpty, let bytes = Self.bytes(address) else { return false }
        return ranges.contains { range in
            guard range.network.count == bytes.count else { return false }
            var remaining = range.prefix
            for index in bytes.indices where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xff << (8 - bits))
                if bytes[index] & mask != range.network[index] & mask { return false }
                remaining -= bits
            }
            return true
        }
    }

    /// `10.0.0.0/8` as its network bytes and prefix; nil when `text` is no CIDR range. The
    /// network is a bare address (no port, no brackets); an IPv4-mapped IPv6 network
    /// (`::ffff:10.0.0.0/104`) is the IPv4 one it maps (`10.0.0.0/8`), as peers are.
    static func range(_ text: String) -> (network: [UInt8], prefix: Int)? {
        let parts = text.trimmingCharacters(in: .whitespaces).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count <= 3, parts[1].allSatisfy(\.isNumber), var prefix = Int(parts[1]),
            let written = bytes(String(parts[0])), let address = canonical(String(parts[0])), let network = bytes(address)
        else { return nil }
        if written.count == 16, network.count == 4 {
            guard prefix >= 96 else { return nil }
            prefix -= 96
        }
        guard prefix <= network.count * 8 else { return nil }
        return (network, prefix)
    }

    /// A canonical address's bytes: 4 for IPv4, 16 for IPv6.
    static func bytes(_ address: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 { return withUnsafeBytes(of: v4) { Array($0) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return nil }
        return withUnsafeBytes(of: v6) { Array($0) }
    }

    /// The client's address: `peer`, or, when `peer` is a trusted proxy, the rightmost
    /// `X-Forwarded-For` entry that is not a trusted proxy itself (the leftmost if all are).
    /// Entries are IP addresses, with or without a port (`203.0.113.5:51234`, `[2001:db8::1]:443`,
    /// as some gateways write them), returned in one canonical form; anything else stops the
    /// walk and the peer is the client.
    public func clientAddress(peer: String?, fields: HTTPFields) -> String? {
        // With no proxy trusted (the default), the peer is the client: nothing to parse.
        guard let peer, !addresses.isEmpty || !ranges.isEmpty, let trustedPeer = Self.canonical(peer), contains(trustedPeer) else { return peer }
        let entries = fields[values: Self.forwardedFor].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        var leftmost: String?
        for entry in entries.reversed() {
            guard let address = Self.canonical(entry) else { return peer }
            if !contains(address) { return address }
            leftmost = address
        }
        return leftmost ?? peer
    }

    /// `text` as an IP address in canonical form (inet_ntop of inet_pton; an IPv4-mapped IPv6
    /// address as IPv4), a port or brackets removed; nil when it is not an address.
    public static func canonical(_ text: String) -> String? {
        var host = text.trimmingCharacters(in: .whitespaces)
        guard !host.isEmpty, host.count <= 64 else { return nil }
        // A link-local address's zone (`fe80::1%eth0`): peers are reported without it.
        if let zone = host.firstIndex(of: "%"), host.contains(":") {
            let end = host.firstIndex(of: "]") ?? host.endIndex
            guard zone < end else { return nil }
            host.removeSubrange(zone..<end)
        }
        if host.hasPrefix("[") {
            guard let end = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: end)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber) && rest.count > 1) else { return nil }
            host = String(host[host.index(after: host.startIndex)..<end])
        } else if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") {
            let port = host[host.index(after: colon)...]
            guard !port.isEmpty, port.allSatisfy(\.isNumber) else { return nil }
            host = String(host[..<colon])
        }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return format(AF_INET, &v4, length: INET_ADDRSTRLEN) }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        return format(AF_INET6, &v6, length: INET6_ADDRSTRLEN)
    }

    /// The client a connection from `text` counts against: its canonical address, and for IPv6
    /// its /64 (one host is usually given a whole /64, so counting each address would let one
    /// client open as many connections as it has addresses). nil when `text` is no address.
    public static func client(_ text: String) -> String? {
        guard let address = canonical(text) else { return nil }
        guard address.contains(":") else { return address }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return address }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        return bytes[0..<8].map { String(format: "%02x", $0) }.joined() + "::/64"
    }

    private static func format<Address>(_ family: Int32, _ address: inout Address, length: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(length))
        guard inet_ntop(family, &address, &buffer, socklen_t(length)) != nil else { return nil }
        return String(cString: buffer)
    }

    public static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
}
