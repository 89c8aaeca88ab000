import Configuration
import Foundation
import Hummingbird
import HummingbirdTesting
import IdentityClient
@testable import IdentityDirectory
import IdentityServer
import Logging
import ServiceLifecycle
import Storage
import Synchronization
import TaskClient
import TaskService
import TestSupport
import TodoB2CTesting
import TodoSystem
import WebApp

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The whole system on loopback ports, built by ``TodoSystem`` exactly as `todo-server serve`
/// builds it: the identity service, the Task API and the web app on real sockets, SQLite in a
/// temporary data dir.
struct LiveSystem: Sendable {
    let identityBase: String
    let apiBase: URL
    /// The web app shares the API's port, as in `serve`.
    var webBase: URL { apiBase }
    let seed: DevTenantSeed
    let identity: IdentityServer
    let database: any Database
    /// Seals the signing keys and the web sessions.
    let dataKey: DataKey

    var tenantName: String { seed.tenant.name }
    var clientID: String { seed.publicApp.clientIDString }
    var authorityURL: String { "\(identityBase)/\(tenantName)/" }

    static let flows = [
        "B2C_1_susi", "B2C_1_sign_up", "B2C_1_sign_in", "B2C_1_ROPC", "B2C_1_reset", "B2C_1_edit_profile", "B2C_1_facebook",
    ]

    /// Runs `body` against a system started with `settings` (by setting key, as flags) on top of
    /// test defaults: free ports, bcrypt cost 4, the simulated Facebook. The environment is not
    /// read, so a developer's `TODO_*` variables cannot change a test.
    static func run(
        webPageSize: Int = 20, anonymousSessionsPerHour: Int = 600, _ body: @Sendable (LiveSystem) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todob2c-live-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        func text(_ value: String) -> ConfigValue { ConfigValue(.string(value), isSecret: false) }
        let flags: [String: ConfigValue] = [
            Setting.dataDir.key: text(directory.path), Setting.identityPort.key: text("\(try LoopbackPorts.reserve())"),
            Setting.apiPort.key: text("\(try LoopbackPorts.reserve())"), Setting.passwordHashCost.key: text("4"),
            Setting.simulatedFacebook.key: text("true"), Setting.webPageSize.key: text("\(webPageSize)"),
            Setting.webAnonymousSessions.key: text("\(anonymousSessionsPerHour)"),
        ]
        let configuration = try SystemConfiguration(reader: try await SystemConfiguration.reader(flags: flags, environment: [:]))
        try await serving(configuration) { system in
            try await waitUntilServing(system.identityBaseURL + "/healthz")
            let live = LiveSystem(
                identityBase: system.identityBaseURL, apiBase: URL(string: system.apiBaseURL)!, seed: system.seed!,
                identity: system.identity!, database: system.database, dataKey: system.dataKey)
            try await body(live)
        }
    }

    /// Builds the system as `serve` does, runs `body` once its API answers (or, when
    /// `answering` is false, once the identity service listens: a listener may answer nobody
    /// here), and shuts it down gracefully whether `body` succeeded or not.
    static func serving(
        _ configuration: SystemConfiguration, answering: Bool = true, _ body: @Sendable (TodoSystem) async throws -> Void
    ) async throws {
        let (listening, up) = AsyncStream.makeStream(of: Void.self)
        let system = try await TodoSystem.build(configuration, logger: TestDatabase.logger) { _ in up.yield() }
        let group = system.serviceGroup()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                // The stream ends with the services, so a listener that failed is not waited for.
                defer { up.finish() }
                try await group.run()
            }
            do {
                if answering {
                    // The listener itself: a public API URL may name a balancer that is not there.
                    try await waitUntilServing("\(configuration.scheme)://\(configuration.displayHost):\(configuration.apiPort)/healthz")
                } else {
                    var listens = false
                    for await _ in listening {
                        listens = true
                        break
                    }
                    if !listens {
                        try await tasks.next()
                        throw URLError(.cannotConnectToHost)
                    }
                }
                try await body(system)
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// Polls `url` until it answers, for at most ten seconds.
    static func waitUntilServing(_ url: String) async throws {
        for _ in 0..<200 {
            if let (_, response) = try? await URLSession.shared.data(from: URL(string: url)!),
                (response as? HTTPURLResponse)?.statusCode == 200
            {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw URLError(.cannotConnectToHost)
    }

    func addUser(_ email: String, password: String = "Passw0rd!", name: String = "Alice") async throws {
        _ = try await identity.administration.createLocalUser(tenantID: seed.tenant.id, email: email, displayName: name, password: password)
    }

    /// A public client over its own in-memory store (or the one given), with an adjustable clock.
    func app(
        store: any TokenStore = InMemoryTokenStore(), clock: TestClock = TestClock(), transport: any HTTPTransport = URLSessionTransport()
    )
        throws -> PublicClientApplication
    {
        PublicClientApplication(
            configuration: ClientConfiguration(
                clientID: clientID, authority: try Authority(authorityURL + "B2C_1_susi"), redirectURI: "http://127.0.0.1",
                tokenStore: store, transport: transport, logger: TestDatabase.logger, clock: clock.now))
    }

    func tasks(_ app: PublicClientApplication, account: Account) -> TaskClient {
        let scopes = [clientID]
        return TaskClient(baseURL: apiBase) { force in
            try await app.acquireTokenSilently(scopes: scopes, account: account, forceRefresh: force).accessToken
        }
    }
}

/// Now, movable forward: expires tokens in the SDK without waiting.
final class TestClock: Sendable {
    private let offset = Mutex<TimeInterval>(0)

    var now: @Sendable () -> Date { { Date().addingTimeInterval(self.offset.withLock { $0 }) } }

    func advance(_ seconds: TimeInterval) { offset.withLock { $0 += seconds } }
}

/// Counts requests by form `grant_type`, passing them on.
final class CountingTransport: HTTPTransport {
    let inner = URLSessionTransport()
    private let counts = Mutex<[String: Int]>([:])

    func count(_ grant: String) -> Int { counts.withLock { $0[grant] ?? 0 } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        if let body = request.body, let text = String(data: body, encoding: .utf8),
            let grant = text.split(separator: "&").first(where: { $0.hasPrefix("grant_type=") })
        {
            counts.withLock { $0[String(grant.dropFirst("grant_type=".count)), default: 0] += 1 }
        }
        return try await inner.send(request)
    }
}
