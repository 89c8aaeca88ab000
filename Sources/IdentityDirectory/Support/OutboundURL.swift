import AsyncHTTPClient
import Foundation
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
    /// `0x7f.1`, `[::ffff:127.0.0.1]` are all loopback), is unspecified, loopback or link-local.
    /// A name that resolves to one is not caught here.
    static func isLocalAddress(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        var v4 = in_addr()
        if !bare.contains(":"), inet_aton(bare, &v4) != 0 {
            let value = UInt32(bigEndian: v4.s_addr)
            return value >> 24 == 127 || value >> 16 == 0xA9FE || value == 0
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return bytes[12] == 127 || (bytes[12] == 169 && bytes[13] == 254) || bytes[12...].allSatisfy { $0 == 0 }
        }
        let unspecifiedOrLoopback = bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] <= 1
        return unspecifiedOrLoopback || (bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80)
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
