import Foundation
import HTTPClientTransport
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import IdentityClientCore
import IdentityDirectory
import IdentityServer
import Logging
import NIOSSL
import ServiceLifecycle
import Storage
import Synchronization
import TaskService
import TodoModels
import UserJourneys
import WebApp

/// The whole system wired once, from a ``SystemConfiguration``: the composition root that
/// `todo-server serve` runs and the system tests start (ARCHITECTURE.md).
///
/// Every part that holds a resource (the database, the outbound HTTP clients, the password
/// hasher's threads) registers its release with one ``Teardown``, which runs it when the service
/// group shuts down, or at once when building fails half-way.
public struct TodoSystem: Sendable {
    /// This release's version: `todo-server --version`, the MCP server's `serverInfo`, the image's
    /// `org.opencontainers.image.version` (SPEC §6).
    public static let version = "0.9.0"

    public let configuration: SystemConfiguration
    /// The identity service, unless this process runs the Task API only.
    public let identity: IdentityServer?
    /// The default tenant's ids, as written to `settings.json`.
    public let seed: DevTenantSeed?
    public let settingsPath: String?
    public let caCertificatePath: String?
    /// The database, shared by every part, and the key sealing its secrets.
    public let database: any Database
    public let dataKey: DataKey
    /// In start order; shut down in reverse, so the ``Teardown`` (first) runs last.
    let services: [any Service]
    let logger: Logger

    public var identityBaseURL: String { configuration.identityBaseURL }
    public var apiBaseURL: String { configuration.apiBaseURL }

    /// Opens the database (running migrations), seeds the default tenant, writes `settings.json`
    /// and builds every part. `onServing` runs once the identity service (or, alone, the API)
    /// accepts connections.
    public static func build(
        _ configuration: SystemConfiguration, logger: Logger, onServing: @escaping @Sendable (TodoSystem) -> Void = { _ in }
    ) async throws -> TodoSystem {
        try RandomSource.verify()
        let teardown = Teardown()
        do {
            return try await assemble(configuration, teardown: teardown, logger: logger, onServing: onServing)
        } catch {
            await teardown.run(logger: logger)
            throw error
        }
    }

    /// Runs every service until SIGTERM or SIGINT (or `shutdown` of the returned group's caller).
    /// - Parameter others: services started first and stopped last (the telemetry exporters, so
    ///   the last requests' spans are still sent).
    public func run(alongside others: [any Service] = []) async throws {
        try await ServiceGroup(
            configuration: .init(services: others + services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        ).run()
    }

    /// The service group, for callers that trigger the graceful shutdown themselves (tests).
    public func serviceGroup() -> ServiceGroup {
        ServiceGroup(configuration: .init(services: services, logger: logger))
    }

    /// The store's data key. An empty key file (an earlier version's crash or full disk at its
    /// first start) is replaced by a new key only when the store holds nothing sealed yet;
    /// otherwise the start is refused, naming the key the store needs (issue 51, F3).
    public static func dataKey(_ store: StoreConfiguration, database: any Database, logger: Logger) async throws -> DataKey {
        do {
            return try store.loadDataKey()
        } catch DataKeyError.emptyFile(let path) {
            if let keyID = try await sealedKeyID(in: database) { throw DataKeyError.lost(path: path, keyID: keyID) }
            logger.warning("the data key file was empty and nothing is sealed yet: a new key replaces it", metadata: ["path": "\(path)"])
            return try DataKey.replaceEmpty(directory: store.dataDirectory)
        }
    }

    /// The id of the data key the store's signing keys or service secrets were sealed with, if
    /// any are (a store not yet migrated has none).
    static func sealedKeyID(in database: any Database) async throws -> String? {
        for (table, column) in [("signing_keys", "private_key_pem"), ("service_secrets", "value")] {
            guard let rows = try? await database.rows("SELECT \(column) AS v FROM \(table) WHERE \(column) LIKE 'sealed:v1:%' LIMIT 1", []),
                let sealed = try rows.first?.text("v")
            else { continue }
            return sealed.dropFirst("sealed:v1:".count).split(separator: ":").first.map(String.init)
        }
        return nil
    }

    private static func assemble(
        _ configuration: SystemConfiguration, teardown: Teardown, logger: Logger, onServing: @escaping @Sendable (TodoSystem) -> Void
    ) async throws -> TodoSystem {
        let store = configuration.store
        // A broken tenant file is refused before anything is opened or migrated.
        let declaration = try configuration.tenantConfig.map(TenantDeclaration.load(path:))
        try store.prepareDataDirectory()
        let database = try await DatabaseFactory.open(url: store.databaseURL, logger: logger)
        teardown.add("database") { try await database.close() }
        let dataKey = try await Self.dataKey(store, database: database, logger: logger)
        // One share of the descriptor limit per listener, worked out (and logged) once.
        let cap = ConnectionBudget.perListener(
            configured: configuration.maxConnections, listeners: configuration.parts == .all ? 2 : 1, logger: logger)
        let (server, caPath) = try Listener.make(configuration, cap: cap)

        guard configuration.parts != .api else {
            let tasks = try await taskServer(
                configuration, database: database, defaults: ([], [], nil), caPath: nil, teardown: teardown, logger: logger)
            let box = SystemBox()
            let api = listener(
                tasks.buildRouter(), server: server, cap: cap, configuration, port: configuration.apiPort, logger: logger,
                onServing: { box.system.map(onServing) })
            let system = TodoSystem(
                configuration: configuration, identity: nil, seed: nil, settingsPath: nil, caCertificatePath: nil, database: database,
                dataKey: dataKey,
                services: [TeardownService(teardown: teardown, logger: logger), api], logger: logger)
            box.system = system
            return system
        }

        var identityConfiguration = configuration.identityServer
        // A REST profile presenting a client certificate may call a service behind the
        // development CA (--tls) or the CA given for authorities.
        identityConfiguration.outboundCACertificatePath = configuration.authorityCA ?? caPath
        let identity = try await IdentityServer.make(
            configuration: identityConfiguration, database: database, dataKey: dataKey, logger: logger)
        teardown.add("password hasher") { try await identity.shutdown() }

        // Older versions kept the web app's secret in the data dir: it moves into the database
        // (sealed), where every instance finds it, and the file goes.
        let legacySecretURL = URL(fileURLWithPath: store.dataDirectory).appendingPathComponent("webapp-client-secret")
        let legacySecret = (try? String(contentsOf: legacySecretURL, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        var seed = try await identity.seedDevelopmentTenant(
            apiPort: configuration.apiPort, webOrigins: configuration.publicAPIURL.map { [$0] } ?? [], legacyWebAppSecret: legacySecret)
        if legacySecret != nil { try? FileManager.default.removeItem(at: legacySecretURL) }
        if let path = configuration.tenantConfig, let declaration {
            seed.tenant = try await declaration.apply(to: identity.administration, baseDirectory: URL(fileURLWithPath: path).deletingLastPathComponent())
            logger.info("tenant declared", metadata: ["tenant": "\(seed.tenant.name)", "file": "\(path)"])
        }
        for (policy, reason) in try await identity.unsignablePolicies(tenantID: seed.tenant.id) {
            logger.warning(
                "custom policy cannot sign tokens: its sign-ins will fail until its key set has a signing key (todo-server policies keys)",
                metadata: ["policy": "\(policy)", "reason": "\(reason)"])
        }

        let (identityBase, apiBase) = (configuration.identityBaseURL, configuration.apiBaseURL)
        let settingsPath = try ClientSettings(identityBaseURL: identityBase, taskAPIBase: apiBase, seed: seed, caCertificate: caPath)
            .write(to: URL(fileURLWithPath: store.dataDirectory)).path
        // The NXOAuth2 tutorial's plist (SPEC §2.8): its taskAPI serves the .NET TaskService shape.
        try NXOAuth2Settings(
            clientID: seed.publicApp.clientIDString, tenantURL: "\(identityBase)/\(seed.tenant.name)", policy: seed.tenant.defaultPolicy,
            taskServiceBase: "\(apiBase)/taskservice", caCertificate: caPath
        ).write(to: URL(fileURLWithPath: store.dataDirectory))

        // Trust every user flow of the default tenant (the dev tenant's seven, or a declared
        // tenant's), and its other policies as their tokens name them.
        let flows = try await identity.administration.userFlows(tenantID: seed.tenant.id).map(\.name)
        let identityRouter = identity.buildRouter()
        let tasks = try await taskServer(
            configuration, database: database,
            defaults: (
                // The user flows, and the tenant's Entra face (External ID's issuer, which native
                // authentication's tokens carry; the same keys and directory, so the same tasks).
                flows.map { "\(identityBase)/\(seed.tenant.name)/\($0)/v2.0/.well-known/openid-configuration" }
                    + ["\(identityBase)/\(seed.tenant.name)/v2.0/.well-known/openid-configuration"],
                [seed.publicApp.clientIDString], "\(identityBase)/\(seed.tenant.name)"
            ),
            caPath: caPath, identity: (identityBase, identityRouter), teardown: teardown, logger: logger,
            clock: { [clock = identity.clock] in clock.now })
        let apiRouter = tasks.buildRouter()
        let webApp = try await Self.webApp(
            configuration, database: database, dataKey: dataKey, identity: identity, seed: seed,
            identityBase: identityBase, apiBase: apiBase, caPath: caPath, teardown: teardown, logger: logger)
        webApp?.addRoutes(to: apiRouter)

        let box = SystemBox()
        let identityApp = listener(
            identityRouter, server: server, cap: cap, configuration, port: configuration.identityPort, logger: logger,
            onServing: { box.system.map(onServing) })
        var services: [any Service] = [TeardownService(teardown: teardown, logger: logger), identityApp]
        if configuration.parts == .all {
            services.append(listener(apiRouter, server: server, cap: cap, configuration, port: configuration.apiPort, logger: logger))
        }
        services.append(SweepService(identity: identity, webApp: webApp, logger: logger))
        let system = TodoSystem(
            configuration: configuration, identity: identity, seed: seed, settingsPath: settingsPath, caCertificatePath: caPath,
            database: database, dataKey: dataKey, services: services, logger: logger)
        box.system = system
        return system
    }

    /// One HTTP listener of the system on `port`.
    private static func listener<Context: RequestContext>(
        _ router: Router<Context>, server: HTTPServerBuilder, cap: Int, _ configuration: SystemConfiguration, port: Int,
        logger: Logger,
        onServing: @escaping @Sendable () -> Void = {}
    ) -> some Service where Context.Source == ApplicationRequestContextSource {
        Application(
            router: router, server: server,
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: port), serverName: "TodoB2C",
                availableConnectionsDelegate: MaximumAvailableConnections(cap, logger: logger)),
            onServerRunning: { _ in onServing() }, logger: logger)
    }

    /// The Task API, trusting the configured authorities and audiences or, when none are
    /// configured, `defaults` (the built-in identity service's user flows and dev client id).
    private static func taskServer(
        _ configuration: SystemConfiguration, database: any Database,
        defaults: (discoveryURLs: [String], audiences: [String], tenant: String?), caPath: String?,
        identity: (baseURL: String, router: Router<IdentityRequestContext>)? = nil, teardown: Teardown, logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> TaskServer {
        var discovery = configuration.authorities.map(BearerPolicy.discoveryURL(forAuthority:))
        // Trusting the built-in service by default is trusting its tenant: the policies uploaded
        // after the start (custom policies, flows made later) are found as their tokens arrive.
        var tenants: [String] = []
        if discovery.isEmpty {
            discovery = defaults.discoveryURLs
            tenants = defaults.tenant.map { [$0] } ?? []
        }
        let audiences = configuration.audiences.isEmpty ? defaults.audiences : configuration.audiences
        let policy = BearerPolicy(
            discoveryURLs: discovery, audiences: audiences, requiredScopes: configuration.requiredScopes, tenantAuthorities: tenants)
        let network = try HTTPMetadataFetcher(additionalCACertificatePath: configuration.authorityCA ?? caPath)
        teardown.add("metadata fetcher") { [network] in try await network.shutdown() }
        // The identity service in this process answers for its own URLs without a socket.
        var fetcher: any MetadataFetcher = network
        if let identity, let base = URL(string: identity.baseURL), base.path.isEmpty || base.path == "/",
            let origin = InProcessMetadata.Origin(base)
        {
            fetcher = InProcessMetadata(origin: origin, responder: identity.router.buildResponder(), network: network, logger: logger)
        }
        return try await TaskServer.make(
            configuration: configuration.taskService(policy: policy),
            database: database, fetcher: fetcher, logger: logger, clock: clock)
    }

    /// The browser app on the API port: the dev tenant's confidential "web" twin, its secret
    /// from the database (sealed there when the app was registered).
    private static func webApp(
        _ configuration: SystemConfiguration, database: any Database, dataKey: DataKey, identity: IdentityServer, seed: DevTenantSeed,
        identityBase: String, apiBase: String, caPath: String?, teardown: Teardown, logger: Logger
    ) async throws -> WebApp? {
        guard let secret = seed.webAppSecret, !secret.isEmpty, let apiURL = URL(string: apiBase) else {
            logger.warning("web app disabled: the default tenant has no dev web app", metadata: ["tenant": "\(seed.tenant.name)"])
            return nil
        }
        // Pooled connections, and the development CA under --tls.
        let transport = try AsyncHTTPClientTransport(additionalCACertificatePath: caPath)
        teardown.add("web app HTTP client") { try await transport.shutdown() }
        let web = configuration.webApp(
            clientID: seed.webApp.clientIDString, clientSecret: secret, authority: "\(identityBase)/\(seed.tenant.name)/",
            apiBaseURL: apiURL, apiScopes: seed.apiScopes, replyURLs: seed.webApp.redirectURIs)
        return try await WebApp.make(configuration: web, database: database, dataKey: dataKey, transport: transport, logger: logger)
    }
}

/// Lets `onServing` see the finished system: the applications are built before it exists.
private final class SystemBox: Sendable {
    private let stored = Mutex<TodoSystem?>(nil)

    var system: TodoSystem? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

extension TodoSystem {
    /// Brings `database` to this build's whole schema (identity, tasks, web sessions), as
    /// `serve` does at start: what a restore needs before it writes a backup's rows.
    public static func migrate(_ database: any Database, logger: Logger) async throws {
        try await IdentityServer.migrate(database, logger: logger)
        try await TaskServer.migrate(database, logger: logger)
        try await WebApp.migrate(database, logger: logger)
    }
}

/// Foundation's `UUID()` reads `/dev/urandom` on Linux and, without it (a root filesystem run
/// with no `/dev` mounted), yields the same all-zero id every time: every app, account and key
/// would get one id. Nothing is built or changed then.
public enum RandomSource {
    public struct Missing: Error, CustomStringConvertible {
        public var description: String { "no random source: /dev/urandom cannot be read (mount /dev)" }
    }

    public static func verify() throws {
        guard UUID() != UUID() else { throw Missing() }
    }
}
