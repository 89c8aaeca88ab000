import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import ServerSupport
import WireCoding

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The checks on URLs this service calls out to (connectors, upstream providers and their
/// endpoints): the scheme and host rule (`OutboundURLRule`, shared with the policy checks) and,
/// below, the address checks that need the resolver.
package enum OutboundURL {
    package static func isAllowed(_ text: String) -> Bool { OutboundURLRule.isAllowed(text) }

    /// The first of `urls` (endpoints the server itself calls, named by a provider's metadata)
    /// that points at this machine or its link-local network while the provider was declared
    /// elsewhere: a remote provider must not turn the server's requests on its own loopback
    /// services or a cloud metadata address (the second outside attack's low finding). A
    /// provider declared on loopback may name loopback endpoints.
    package static func localTarget(among urls: [String], declared: String) -> String? {
        func host(_ url: String) -> String? { URLComponents(string: url)?.host?.lowercased() }
        guard let declaredHost = host(declared), !Loopback.isHost(declaredHost), !isLocalAddress(declaredHost) else { return nil }
        return urls.first { url in host(url).map { Loopback.isHost($0) || isLocalAddress($0) } ?? true }
    }

    /// Whether `host`, read as an address the way the resolver reads it (`127.1`, `2130706433`,
    /// `0x7f.1`, `[::ffff:127.0.0.1]` are all loopback), is anything but a public address.
    /// A name that resolves to one is not caught here (``connectionAddress(for:)`` catches it).
    static func isLocalAddress(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        var v4 = in_addr()
        if !bare.contains(":"), inet_aton(bare, &v4) != 0 { return AddressScope.of(v4: UInt32(bigEndian: v4.s_addr)) != .publicInternet }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &v6) == 1 else { return false }
        return AddressScope.of(v6: withUnsafeBytes(of: v6) { Array($0) }) != .publicInternet
    }

    /// Where an address is: this machine, the internet, or a network of its own (private,
    /// link-local, unique-local, shared, unspecified, multicast, reserved), which a server's
    /// outbound calls must not reach: cloud metadata services and internal admin endpoints live
    /// there (issue 44 M-2).
    enum AddressScope: Equatable {
        case loopback, publicInternet, local

        static func of(v4 value: UInt32) -> AddressScope {
            let a = value >> 24, b = (value >> 16) & 0xFF
            if a == 127 { return .loopback }
            // RFC 6890's special-purpose blocks: 0/8, 10/8, 100.64/10, 169.254/16, 172.16/12,
            // 192.0.0/24, 192.168/16, 198.18/15, multicast 224/4 and reserved 240/4.
            if a == 0 || a == 10 || (a == 100 && b & 0xC0 == 64) || (a == 169 && b == 254) || (a == 172 && b & 0xF0 == 16)
                || (a == 192 && b == 0 && (value >> 8) & 0xFF == 0) || (a == 192 && b == 168) || (a == 198 && b & 0xFE == 18) || a >= 224
            {
                return .local
            }
            return .publicInternet
        }

        static func of(v6 bytes: [UInt8]) -> AddressScope {
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
                return of(v4: bytes[12...].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) { return bytes[15] == 1 ? .loopback : .local }
            // fe80::/10 link-local, fc00::/7 unique-local, ff00::/8 multicast, 64:ff9b:1::/48
            // local-use translation, 2001:db8::/32 documentation; NAT64's 64:ff9b::/96 by its v4.
            if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 { return .local }
            if bytes[0] & 0xfe == 0xfc || bytes[0] == 0xff { return .local }
            if bytes[0] == 0x20, bytes[1] == 0x01, bytes[2] == 0x0d, bytes[3] == 0xb8 { return .local }
            if bytes[0] == 0x00, bytes[1] == 0x64, bytes[2] == 0xff, bytes[3] == 0x9b {
                if bytes[4..<12].allSatisfy({ $0 == 0 }) { return of(v4: bytes[12...].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }) }
                return .local
            }
            return .publicInternet
        }

        static func of(_ address: SocketAddress) -> AddressScope? {
            switch address {
            case .v4(let v4): of(v4: UInt32(bigEndian: v4.address.sin_addr.s_addr))
            case .v6(let v6): of(v6: withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) })
            default: nil
            }
        }
    }

    /// A URL this service may not call, or whose host resolves where it may not go.
    package struct Refused: Error, CustomStringConvertible {
        package var description: String
    }

    /// The address a call to `url` connects to, checked: a loopback URL (`http://127.0.0.1:…`,
    /// `localhost`) only to loopback, any other only to a public address. The name is resolved
    /// here, once, and the call connects to this very address (``execute(_:timeout:maximumBytes:tls:)``),
    /// so a name cannot answer the check with one address and the connection with another
    /// (DNS rebinding).
    static func connectionAddress(for url: String) async throws -> (host: String, address: String) {
        guard isAllowed(url), let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw Refused(description: "the URL is not one this service calls (https, or http on loopback)")
        }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let port = components.port ?? (components.scheme?.lowercased() == "http" ? 80 : 443)
        let resolved: SocketAddress
        if let literal = try? SocketAddress(ipAddress: bare, port: port) {
            resolved = literal
        } else {
            do {
                resolved = try await NIOThreadPool.singleton.runIfActive { try SocketAddress.makeAddressResolvingHost(bare, port: port) }
            } catch {
                throw Refused(description: "its host does not resolve")
            }
        }
        guard let scope = AddressScope.of(resolved), let address = resolved.ipAddress else {
            throw Refused(description: "its host does not resolve to an internet address")
        }
        let loopbackURL = LoopbackHost.isHost(bare)
        guard loopbackURL ? scope == .loopback : scope == .publicInternet else {
            throw Refused(description: "its host resolves to \(loopbackURL ? "an address off this machine" : "an address that is not public")")
        }
        return (host, address)
    }

    /// One outbound call (a connector, a REST profile, an extension, an identity provider): the
    /// URL checked and its host resolved once (``connectionAddress(for:)``), the connection made
    /// to that address with the TLS name and `Host` of the URL, redirects never followed, at most
    /// `maximumBytes` of body read.
    package static func execute(
        _ request: HTTPClientRequest, timeout: TimeAmount, maximumBytes: Int, tls: TLSConfiguration? = nil
    ) async throws -> (status: Int, body: ByteBuffer) {
        let (host, address) = try await connectionAddress(for: request.url)
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let client: HTTPClient
        let owned: Bool
        if tls == nil, (try? SocketAddress(ipAddress: bare, port: 0)) != nil {
            // A literal address: nothing to resolve, so the shared pool serves it.
            client = Self.client
            owned = false
        } else {
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow)
            configuration.tracing.tracer = nil
            configuration.dnsOverride = Dictionary([(host, address), (host.lowercased(), address)], uniquingKeysWith: { first, _ in first })
            client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            owned = true
        }
        do {
            let response = try await client.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: maximumBytes)
            if owned { try? await client.shutdown() }
            return (Int(response.status.code), body)
        } catch {
            if owned { try? await client.shutdown() }
            throw error
        }
    }

    /// Runs `body` (a request and the reading of its answer) within `seconds` in all: a peer
    /// that sends its headers and then drips the body cannot hold a sign-in past it.
    package static func withDeadline<T: Sendable>(seconds: Int, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw DeadlineExceeded() }
            return value
        }
    }

    struct DeadlineExceeded: Error {}
}

extension OutboundURL {
    /// The HTTP client for outbound calls (connectors, upstream providers): one per process, made
    /// on first use and never released, the pattern AsyncHTTPClient's own `HTTPClient.shared`
    /// follows (a client must be shut down before release, and a process-lifetime one never is),
    /// but with redirects never followed: a connector or provider cannot send this service
    /// elsewhere.
    package static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        // AsyncHTTPClient's own spans record the full URL (an OAuth2 claims endpoint's query holds
        // a token); ours (`OutboundTrace`) record the host only.
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()
}
