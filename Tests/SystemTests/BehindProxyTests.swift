import Configuration
import Foundation
import Testing
import TodoB2CTesting
import TodoSystem

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
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

    /// This machine's first IPv4 address off loopback (its network interface): a peer that is
    /// neither a proxy nor loopback when it connects to itself.
    static func externalAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            var v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            guard inet_ntop(AF_INET, &v4, &text, socklen_t(INET_ADDRSTRLEN)) != nil else { continue }
            let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !name.hasPrefix("127.") { return name }
        }
        return nil
    }

    @Test("a peer neither a proxy nor loopback is closed unanswered; loopback (a health check) is let in")
    func onlyTheProxies() async throws {
        let external = try #require(Self.externalAddress(), "this test needs a network interface besides loopback")
        try await Self.running(proxies: "10.255.0.0/16") { configuration, _ in
            // Connecting to its own external address, this machine is the peer 192.0.2.2 (say): no proxy.
            do {
                let response = try await Self.get("http://\(external):\(configuration.identityPort)/healthz", host: "id.example.com")
                Issue.record("a peer that is no proxy was answered: \(response.statusCode)")
            } catch let error as URLError {
                // Closed or reset after connecting; not refused (the listener was up).
                #expect(error.code != .cannotConnectToHost && error.code != .timedOut, "\(error)")
            }
            let local = try await Self.get("http://127.0.0.1:\(configuration.identityPort)/healthz", host: "id.example.com")
            #expect(local.statusCode == 200)
        }
    }

    @Test("through a proxy: HSTS on both ports, every cookie Secure, no test-control surface")
    func throughAProxy() async throws {
        let external = try #require(Self.externalAddress(), "this test needs a network interface besides loopback")
        try await Self.running(proxies: "\(external)/32") { configuration, system in
            try await LiveSystem.waitUntilServing("http://127.0.0.1:\(configuration.apiPort)/healthz")
            let health = try await Self.get("http://\(external):\(configuration.identityPort)/healthz", host: "id.example.com")
            #expect(health.statusCode == 200 && health.value(forHTTPHeaderField: "Strict-Transport-Security") != nil)
            let api = try await Self.get("http://\(external):\(configuration.apiPort)/healthz", host: "todo.example.com")
            #expect(api.statusCode == 200 && api.value(forHTTPHeaderField: "Strict-Transport-Security") != nil)
            // No test-control surface here, and the banner does not point at one.
            let outbox = try await Self.get("http://\(external):\(configuration.identityPort)/dev/outbox", host: "id.example.com")
            #expect(outbox.statusCode == 404)
            #expect(!system.banner.contains("/dev/outbox") && system.banner.contains("https://id.example.com"))
            // The hosted sign-in's cookies are all Secure.
            let client = try #require(system.seed).publicApp.clientIDString
            let query =
                "client_id=\(client)&response_type=code&scope=openid&redirect_uri=http%3A%2F%2F127.0.0.1%3A1234"
                + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
            let page = try await Self.get(
                "http://\(external):\(configuration.identityPort)/todob2c.onmicrosoft.com/B2C_1_susi/oauth2/v2.0/authorize?\(query)",
                host: "id.example.com")
            #expect([200, 302].contains(page.statusCode), "\(page.statusCode)")
            let headers = page.allHeaderFields.reduce(into: [String: String]()) { $0["\($1.key)"] = "\($1.value)" }
            let cookies = HTTPCookie.cookies(withResponseHeaderFields: headers, for: URL(string: "https://id.example.com/")!)
            #expect(!cookies.isEmpty && cookies.allSatisfy(\.isSecure), "\(headers["Set-Cookie"] ?? "")")
        }
    }
}
