import AsyncHTTPClient
import Foundation

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
