import Foundation
import Hummingbird
import HummingbirdTesting
import IdentityClient
import IdentityServer
import Logging
import Storage
import Synchronization
import TaskClient
import TaskService
import TestSupport
import WebApp

#if canImport(Glibc)
    import Glibc
#endif

/// The whole system on loopback ports, the way an app meets it: the identity service and the
/// Task API on real sockets, SQLite in a temporary file.
struct LiveSystem: Sendable {
    let identityBase: String
    let apiBase: URL
    let webBase: URL
    let seed: DevTenantSeed
    let identity: IdentityServer

    var tenantName: String { seed.tenant.name }
    var clientID: String { seed.publicApp.clientIDString }
    var authorityURL: String { "\(identityBase)/\(tenantName)/" }

    static let flows = [
        "B2C_1_susi", "B2C_1_sign_up", "B2C_1_sign_in", "B2C_1_ROPC", "B2C_1_reset", "B2C_1_edit_profile", "B2C_1_facebook",
    ]

    let database: any Database
    /// Seals the signing keys and the web sessions.
    let dataKey: DataKey

    /// - Parameter webPageSize: tasks per page of the web app (on the API port, as in `serve`).
    /// - Parameter anonymousSessionsPerHour: sessions one client address may start before signing in.
    static func run(
        webPageSize: Int = 20, anonymousSessionsPerHour: Int = 600, _ body: @Sendable (LiveSystem) async throws -> Void
    ) async throws {
        try await TestDatabase.with(.sqlite) { database in
            let dataKey = DataKey.generate()
            let identity = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4, simulatedFacebook: true), database: database, dataKey: dataKey,
                logger: TestDatabase.logger)
            let seed = try await identity.seedDevelopmentTenant(apiPort: 3000)
            let identityApp = Application(
                router: identity.buildRouter(), configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: TestDatabase.logger)
            try await identityApp.test(.live) { identityClient in
                let base = "http://127.0.0.1:\(identityClient.port!)"
                let policy = BearerPolicy(
                    discoveryURLs: flows.map { "\(base)/\(seed.tenant.name)/\($0)/v2.0/.well-known/openid-configuration" },
                    audiences: [seed.publicApp.clientIDString])
                let fetcher = try HTTPMetadataFetcher()
                let tasks = try await TaskServer.make(
                    configuration: .init(policy: policy), database: database, fetcher: fetcher, logger: TestDatabase.logger)
                let apiApp = Application(
                    router: tasks.buildRouter(), configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: TestDatabase.logger
                )
                do {
                    try await apiApp.test(.live) { apiClient in
                        let apiBase = URL(string: "http://127.0.0.1:\(apiClient.port!)")!
                        // The web app on its own port here (in `serve` it shares the API's), calling
                        // the API over HTTP like any other client.
                        var web = WebAppConfiguration(
                            clientID: seed.webApp.clientIDString, clientSecret: seed.newWebAppSecret ?? "",
                            authority: "\(base)/\(seed.tenant.name)/", apiBaseURL: apiBase,
                            apiScopes: seed.publicApp.exposedScopes.map { "\(seed.publicApp.appIDURI ?? "")/\($0)" })
                        web.pageSize = webPageSize
                        web.anonymousSessionsPerAddressPerHour = anonymousSessionsPerHour
                        web.facebookPolicy = "B2C_1_facebook"
                        let webRouter = Router(context: TaskRequestContext.self)
                        try await WebApp.make(configuration: web, database: database, dataKey: dataKey, logger: TestDatabase.logger)
                            .addRoutes(to: webRouter)
                        let webApp = Application(
                            router: webRouter, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: TestDatabase.logger)
                        try await webApp.test(.live) { webClient in
                            // Its reply URLs, now that its port is known (seeding again adds them).
                            _ = try await identity.seedDevelopmentTenant(apiPort: webClient.port!)
                            let system = LiveSystem(
                                identityBase: base, apiBase: apiBase, webBase: URL(string: "http://127.0.0.1:\(webClient.port!)")!,
                                seed: seed,
                                identity: identity, database: database, dataKey: dataKey)
                            try await body(system)
                        }
                    }
                } catch {
                    try await fetcher.shutdown()
                    throw error
                }
                try await fetcher.shutdown()
            }
            try await identity.shutdown()
        }
    }

    func addUser(_ email: String, password: String = "Passw0rd!", name: String = "Alice") async throws {
        _ = try await identity.createLocalUser(tenantID: seed.tenant.id, email: email, displayName: name, password: password)
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

/// A port nobody listens on now: bound, read, released.
func freePort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
        }
    }
    guard bound else { throw CocoaError(.fileWriteUnknown) }
    return Int(UInt16(bigEndian: address.sin_port))
}
