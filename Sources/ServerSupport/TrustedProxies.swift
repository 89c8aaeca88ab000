import Foundation
import HTTPTypes

/// The load balancers and reverse proxies whose `X-Forwarded-For` is believed (issue 14). Behind
/// a balancer every request's peer is the balancer, so per-source limits (smart lockout,
/// sign-in transactions, the web app's anonymous sessions) would count every user as one, and
/// one attacker could lock everyone out. Only a trusted peer's header is read, and only its
/// rightmost entries (the ones the trusted proxies appended), so a client cannot choose its
/// own address by sending the header itself.
public struct TrustedProxies: Sendable {
    public let addresses: Set<String>

    public init(_ addresses: [String]) { self.addresses = Set(addresses.map { $0.lowercased() }) }

    /// The client's address: `peer`, or, when `peer` is a trusted proxy, the rightmost
    /// `X-Forwarded-For` entry that is not a trusted proxy itself (the leftmost if all are).
    public func clientAddress(peer: String?, fields: HTTPFields) -> String? {
        guard let peer, addresses.contains(peer.lowercased()) else { return peer }
        let entries = fields[values: Self.forwardedFor].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !entries.isEmpty else { return peer }
        for entry in entries.reversed() where !addresses.contains(entry.lowercased()) {
            // A plain IP address only: anything else is not an address this service counts by.
            guard entry.count <= 45, entry.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else { return peer }
            return entry
        }
        return entries.first
    }

    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
}
