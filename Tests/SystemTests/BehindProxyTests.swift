import Configuration
import Foundation
import Testing
import TodoB2CTesting
import TodoSystem

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A plain-HTTP listener on every address, behind a declared TLS-terminating proxy (a container
/// behind an ingress, SPEC §6): only the proxies may connect, and what browsers get is https's.
@Suite("Behind a TLS-terminating proxy")
struct BehindProxyTests {
    static func configuration(proxies: String, directory: URL) async throws -> SystemConfiguration {
        func text(_ value: String) -> ConfigValue { ConfigValue(.string(value), isSecret: false) }
        let flags: [String: ConfigValue] = [
            Setting.dataDir.key: text(directory.path), Setting.host.key: text("0.0.0.0"),
            Setting.identityPort.key: text("\(try LoopbackPorts.reserve())"), Setting.apiPort.key: text("\(try LoopbackPorts.reserve())"),
            Setting.passwordHashCost.key: text("4"), Setting.trustedProxies.key: text(proxies),
            Setting.publicURL.key: text("https://id.example.com"), Setting.publicAPIURL.key: text("https://todo.example.com"),
        ]
        return try SystemConfiguration(reader: try await SystemConfiguration.reader(flags: flags, environment: [:]))
    }

    /// Runs the system until `body` ends; `body` starts once the identity listener is up.
    static func running(proxies: String, _ body: @Sendable (SystemConfiguration, TodoSystem) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todob2c-proxy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = try await configuration(proxies: proxies, directory: directory)
        try await LiveSystem.serving(configuration, answering: false) { system in try await body(configuration, system) }
    }

    /// Stops at the first answer: a redirect is looked at, not followed.
    final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
            completionHandler: @escaping (URLRequest?) -> Void
        ) { completionHandler(nil) }
    }

    /// A GET with the `Host` a proxy forwards (the public name), not followed if redirected.
    static func get(_ url: String, host: String) async throws -> HTTPURLResponse {
        var request = URLRequest(url: URL(string: url)!, timeoutInterval: 10)
        request.setValue(host, forHTTPHeaderField: "Host")
        let session = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let (_, response) = try await session.data(for: request)
        return response as! HTTPURLResponse
    }

    @Test("a peer outside the proxies' range is closed unanswered; through a proxy, HSTS on both ports and Secure cookies")
    func onlyTheProxies() async throws {
        // 127.0.0.1 is not in 10.0.0.0/8: the connection is accepted, then closed before any answer.
        try await Self.running(proxies: "10.0.0.0/8") { configuration, _ in
            do {
                let response = try await Self.get("http://127.0.0.1:\(configuration.identityPort)/healthz", host: "id.example.com")
                Issue.record("a peer that is no proxy was answered: \(response.statusCode)")
            } catch let error as URLError {
                // Closed or reset after connecting; not refused (the listener was up).
                #expect(error.code != .cannotConnectToHost && error.code != .timedOut, "\(error)")
            }
        }
        // 127.0.0.1 as the proxy: answered, as a browser behind it over https would be.
        try await Self.running(proxies: "127.0.0.0/8") { configuration, system in
            let health = try await Self.get("http://127.0.0.1:\(configuration.identityPort)/healthz", host: "id.example.com")
            #expect(health.statusCode == 200 && health.value(forHTTPHeaderField: "Strict-Transport-Security") != nil)
            let api = try await Self.get("http://127.0.0.1:\(configuration.apiPort)/healthz", host: "todo.example.com")
            #expect(api.statusCode == 200 && api.value(forHTTPHeaderField: "Strict-Transport-Security") != nil)
            // No test-control surface here, and the banner does not point at one.
            #expect(!system.banner.contains("/dev/outbox") && system.banner.contains("https://id.example.com"))
            // The hosted sign-in page's cookies are Secure.
            let client = try #require(system.seed).publicApp.clientIDString
            let query =
                "client_id=\(client)&response_type=code&scope=openid&redirect_uri=http%3A%2F%2F127.0.0.1%3A1234"
                + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
            let page = try await Self.get(
                "http://127.0.0.1:\(configuration.identityPort)/todob2c.onmicrosoft.com/B2C_1_susi/oauth2/v2.0/authorize?\(query)",
                host: "id.example.com")
            let cookie = try #require(page.value(forHTTPHeaderField: "Set-Cookie"), "\(page.statusCode)")
            #expect([200, 302].contains(page.statusCode), "\(page.statusCode)")
            #expect(cookie.contains("Secure") && cookie.contains("HttpOnly"), "\(cookie)")
        }
    }
}
