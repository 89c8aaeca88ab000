import AsyncHTTPClient
import Foundation
import ServerSupport

/// The rule for URLs this service calls out to (connectors, upstream providers and their
/// endpoints): https anywhere, plain http only on loopback (a local endpoint in development,
/// which the issue allows), never credentials in the URL or another scheme.
enum OutboundURL {
    static func isAllowed(_ text: String) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(),
            !host.isEmpty,
            url.user == nil, url.password == nil
        else { return false }
        switch scheme {
        case "https": return true
        case "http": return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) || host.hasPrefix("127.")
        default: return false
        }
    }

    /// The first of `urls` (endpoints the server itself calls, named by a provider's metadata)
    /// that points at this machine or its link-local network while the provider was declared
    /// elsewhere: a remote provider must not turn the server's requests on its own loopback
    /// services or a cloud metadata address (the second outside attack's low finding). A
    /// provider declared on loopback may name loopback endpoints.
    static func localTarget(among urls: [String], declared: String) -> String? {
        func host(_ url: String) -> String? { URLComponents(string: url)?.host?.lowercased() }
        func isLocal(_ host: String) -> Bool {
            Loopback.isHost(host) || Loopback.isLinkLocalHost(host) || host == "0.0.0.0" || host == "::" || host == "[::]"
        }
        guard let declaredHost = host(declared), !Loopback.isHost(declaredHost) else { return nil }
        return urls.first { url in host(url).map(isLocal) ?? true }
    }

    /// Runs `body` (a request and the reading of its answer) within `seconds` in all: a peer
    /// that sends its headers and then drips the body cannot hold a sign-in past it.
    static func withDeadline<T: Sendable>(seconds: Int, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
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
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))
}
