import HTTPTypes
import ServerSupport
import Testing

/// Whose `X-Forwarded-For` is believed, and which of its entries (issue 14).
@Suite("Trusted proxies")
struct TrustedProxyTests {
    static func fields(_ values: String...) -> HTTPFields {
        var fields = HTTPFields()
        for value in values { fields.append(HTTPField(name: HTTPField.Name("X-Forwarded-For")!, value: value)) }
        return fields
    }

    @Test("only a trusted peer's header counts, and only the entries the trusted proxies appended")
    func clientAddress() {
        let proxies = TrustedProxies(["10.0.0.5", "10.0.0.6"])
        // An untrusted peer cannot name another address.
        #expect(proxies.clientAddress(peer: "203.0.113.9", fields: Self.fields("198.51.100.1")) == "203.0.113.9")
        // The balancer appended the client; whatever the client sent before it is ignored.
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("1.1.1.1, 198.51.100.7")) == "198.51.100.7")
        // Two proxies in a row: the rightmost address that is not a proxy.
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("198.51.100.7", "10.0.0.6")) == "198.51.100.7")
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("2001:db8::1")) == "2001:db8::1")
        // No header, or something that is not an address: the peer.
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: HTTPFields()) == "10.0.0.5")
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("unknown")) == "10.0.0.5")
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("<script>")) == "10.0.0.5")
        #expect(proxies.clientAddress(peer: nil, fields: Self.fields("198.51.100.7")) == nil)
        // Ports and brackets, as some gateways write them, are removed; forms are canonical.
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("203.0.113.5:51234")) == "203.0.113.5")
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("[2001:DB8:0::1]:443")) == "2001:db8::1")
        #expect(proxies.clientAddress(peer: "::ffff:10.0.0.5", fields: Self.fields("::ffff:198.51.100.7")) == "198.51.100.7")
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("203.0.113.5:", "10.0.0.6")) == "10.0.0.5")
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("999.1.1.1")) == "10.0.0.5")
        // Every entry a trusted proxy: the leftmost.
        #expect(proxies.clientAddress(peer: "10.0.0.5", fields: Self.fields("10.0.0.6, 10.0.0.5")) == "10.0.0.6")
        // Nobody trusted: the header means nothing.
        #expect(TrustedProxies([]).clientAddress(peer: "10.0.0.5", fields: Self.fields("198.51.100.7")) == "10.0.0.5")
    }

    @Test("CIDR ranges: an ingress's network is trusted whatever address it has; the prefix is exact; anything else is no entry")
    func ranges() {
        let proxies = TrustedProxies(["10.0.0.0/8", "192.168.4.0/23", "fd00::/8", "203.0.113.9"])
        for inside in ["10.1.2.3", "10.255.255.255", "192.168.5.200", "fd12:3456::1", "203.0.113.9"] {
            #expect(proxies.contains(inside), "\(inside)")
        }
        for outside in ["11.0.0.1", "192.168.6.1", "192.168.3.255", "fe80::1", "203.0.113.10", "2001:db8::1"] {
            #expect(!proxies.contains(outside), "\(outside)")
        }
        // A trusted range's header counts; a client outside it cannot name itself.
        #expect(proxies.clientAddress(peer: "10.44.0.7", fields: Self.fields("198.51.100.7")) == "198.51.100.7")
        #expect(proxies.clientAddress(peer: "11.0.0.1", fields: Self.fields("198.51.100.7")) == "11.0.0.1")
        // The edges: /0 is everything of its family, /32 one address; a v4 range holds no v6 address.
        #expect(TrustedProxies(["0.0.0.0/0"]).contains("8.8.8.8") && !TrustedProxies(["0.0.0.0/0"]).contains("::1"))
        #expect(TrustedProxies(["10.0.0.7/32"]).contains("10.0.0.7") && !TrustedProxies(["10.0.0.7/32"]).contains("10.0.0.6"))
        for entry in ["10.0.0.0/8", "fd00::/8", "10.0.0.7", "::1"] { #expect(TrustedProxies.isValidEntry(entry), "\(entry)") }
        // A network written with host bits is its network; an IPv6 prefix off the byte boundary.
        #expect(TrustedProxies(["10.1.2.3/8"]).contains("10.200.0.1") && !TrustedProxies(["10.1.2.3/8"]).contains("11.1.2.3"))
        let v6 = TrustedProxies(["2001:db8:0:80::/57"])
        #expect(v6.contains("2001:db8:0:ff::1") && !v6.contains("2001:db8:0:7f::1") && !v6.contains("2001:db8:0:100::1"))
        // Peers in any spelling: IPv4-mapped, with a port; a mapped network is its IPv4 one.
        #expect(proxies.contains("::ffff:10.9.8.7") && proxies.contains("10.9.8.7:443"))
        #expect(proxies.clientAddress(peer: "::ffff:10.1.2.3", fields: Self.fields("198.51.100.7")) == "198.51.100.7")
        #expect(TrustedProxies(["::ffff:10.0.0.0/104"]).contains("10.3.3.3") && !TrustedProxies.isValidEntry("::ffff:10.0.0.0/8"))
        // A link-local proxy with its zone, as an operator writes it.
        #expect(TrustedProxies(["fe80::1%eth0"]).contains("fe80::1") && TrustedProxies.isValidEntry("fe80::1%eth0"))
        for entry in [
            "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "/8", "10.0.0.0/8/8", "proxy.internal", "10.0.0.0/-1", "", "10.0.0.0:80/8",
            "[fd00::]:443/8",
        ] {
            #expect(!TrustedProxies.isValidEntry(entry), "\(entry)")
        }
    }
}
