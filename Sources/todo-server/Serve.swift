import ArgumentParser
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import IdentityClient
import IdentityServer
import Logging
import NIOSSL
import ServiceLifecycle
import Storage
import TaskService
import TodoModels
import WebApp

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the system (identity service; Task API and web app on --api-port).")

    @OptionGroup var store: StoreOptions

    @Option(help: "Address to listen on. Env: TODO_HOST. Default: 127.0.0.1 (a non-loopback address needs --tls).")
    var host: String?

    @Option(help: "Identity service port. Env: TODO_IDENTITY_PORT. Default: 5080, or 5443 with --tls.")
    var identityPort: Int?

    @Option(help: "Task API and web app port. Env: TODO_API_PORT. Default: 3000.")
    var apiPort: Int?

    @Flag(help: "Serve the identity service over HTTPS with a CA generated into <data-dir>/tls. Env: TODO_TLS=1.")
    var tls = false

    @Option(help: "A tenant declared in YAML; it becomes the default tenant. Env: TODO_TENANT_CONFIG.")
    var tenantConfig: String?

    @Option(
        name: .customLong("authority"),
        help:
            "A B2C authority the Task API trusts (repeatable), e.g. https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi. Env: TODO_AUTHORITIES (space-separated). Default: every user flow of the built-in identity service."
    )
    var authorities: [String] = []

    @Option(
        name: .customLong("audience"),
        help: "An accepted access-token audience (repeatable). Env: TODO_AUDIENCES. Default: the dev client id.")
    var audiences: [String] = []

    @Option(
        name: .customLong("required-scope"),
        help: "A scope the Task API requires (repeatable; any one suffices). Env: TODO_REQUIRED_SCOPES.")
    var requiredScopes: [String] = []

    @Option(
        name: .customLong("cors-origin"),
        help: "An origin allowed to call the Task API from a browser (repeatable, or *). Env: TODO_CORS_ORIGINS.")
    var corsOrigins: [String] = []

    @Option(help: "Run one part only: identity or api (the API then needs --authority and --audience). Env: TODO_ONLY.")
    var only: String?

    @Option(help: "An extra CA certificate (PEM) to trust when fetching authority metadata. Env: TODO_AUTHORITY_CA.")
    var authorityCA: String?

    @Option(help: "bcrypt cost for new password hashes (OWASP: at least 10). Env: TODO_PASSWORD_HASH_COST. Default: 10.")
    var passwordHashCost: UInt8?

    @Option(
        help:
            "Seconds a connection may sit idle, or take to send a request's header or its next body part, before it is closed (slow or idle clients cannot hold the ports). Env: TODO_IDLE_TIMEOUT. Default: 30."
    )
    var idleTimeout: Int?

    @Flag(
        help:
            "Serve the simulated Facebook, which signs anyone in as any federated user by email alone: development only, and only on a loopback address. Env: TODO_SIMULATED_FACEBOOK=1."
    )
    var simulatedFacebook = false

    func run() async throws {
        let environment = store.environment
        let logger = try store.logger(label: "todo-server")
        let useTLS = tls || environment["TODO_TLS"] == "1"
        let host = self.host ?? environment["TODO_HOST"] ?? "127.0.0.1"
        let identityPort = self.identityPort ?? environment["TODO_IDENTITY_PORT"].flatMap(Int.init) ?? (useTLS ? 5443 : 5080)
        let apiPort = self.apiPort ?? environment["TODO_API_PORT"].flatMap(Int.init) ?? 3000
        let cost = passwordHashCost ?? environment["TODO_PASSWORD_HASH_COST"].flatMap(UInt8.init) ?? 10
        guard (4...31).contains(cost) else { throw ValidationError("--password-hash-cost must be between 4 and 31") }
        // Tokens and passwords must not cross a network in clear text.
        guard useTLS || Authority.isLoopback(host) else {
            throw ValidationError("refusing to listen on \(host) without TLS: use --tls, or a loopback address")
        }

        let facebook = simulatedFacebook || environment["TODO_SIMULATED_FACEBOOK"] == "1"
        guard !facebook || Authority.isLoopback(host) else {
            throw ValidationError(
                "refusing --simulated-facebook on \(host): anyone could sign in as any federated user; use a loopback address")
        }

        let displayHost = host == "0.0.0.0" || host == "::" ? "localhost" : (host.contains(":") ? "[\(host)]" : host)
        let mode = only ?? environment["TODO_ONLY"] ?? "all"
        guard ["all", "identity", "api"].contains(mode) else { throw ValidationError("--only must be identity or api") }
        if mode == "api" {
            try await runAPIOnly(host: host, displayHost: displayHost, apiPort: apiPort, tls: useTLS, logger: logger)
            return
        }
        let authority = "\(displayHost):\(identityPort)"
        let configuration = IdentityServerConfiguration(
            scheme: useTLS ? "https" : "http", defaultAuthority: authority, passwordHashCost: cost,
            // The outbox shows password-reset codes: only on a machine-local server.
            developmentMailbox: Authority.isLoopback(host),
            allowedHosts: [
                "localhost", "127.0.0.1", "::1", host.lowercased(),
                displayHost.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased(),
            ], simulatedFacebook: facebook, listenPort: identityPort)
        let (database, identity) = try await store.openIdentity(logger: logger, configuration: configuration)

        let tenantPath = tenantConfig ?? environment["TODO_TENANT_CONFIG"]
        var seed = try await identity.seedDevelopmentTenant(apiPort: apiPort)
        if let tenantPath {
            let declaration = try TenantDeclaration.load(path: tenantPath)
            let tenant = try await declaration.apply(
                to: identity, baseDirectory: URL(fileURLWithPath: tenantPath).deletingLastPathComponent())
            seed.tenant = tenant
            logger.info("tenant declared", metadata: ["tenant": "\(tenant.name)", "file": "\(tenantPath)"])
        }
        let signing = try await identity.signingBackend()
        logger.info("token signing", metadata: ["rsa": "\(signing)"])
        if let secret = seed.newWebAppSecret {
            let path = URL(fileURLWithPath: store.resolvedDataDir).appendingPathComponent("webapp-client-secret").path
            try Data(secret.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        }

        let (server, caPath) = try listener(tls: useTLS, displayHost: displayHost)
        let baseURL = "\(configuration.scheme)://\(authority)"
        let settingsPath = try ClientSettings(
            identityBaseURL: baseURL, taskAPIBase: "\(configuration.scheme)://\(displayHost):\(apiPort)", seed: seed, caCertificate: caPath
        ).write(to: URL(fileURLWithPath: store.resolvedDataDir)).path

        let banner: @Sendable () -> Void = {
            [seed, caPath, dataDir = store.resolvedDataDir, database = DatabaseFactory.redacted(store.resolvedDatabaseURL)] in
            Self.printBanner(
                baseURL: baseURL, apiAuthority: "\(displayHost):\(apiPort)", seed: seed, settingsPath: settingsPath, caPath: caPath,
                dataDir: dataDir, database: database)
        }
        // Trust every user flow of the default tenant (the dev tenant's seven, or a declared tenant's).
        let flows = try await identity.tenants.userFlows(tenantID: seed.tenant.id).map(\.name)
        let (fetcher, taskServer) = try await makeTaskServer(
            database: database,
            defaults: (
                flows.map { "\(baseURL)/\(seed.tenant.name)/\($0)/v2.0/.well-known/openid-configuration" }, [seed.publicApp.clientIDString]
            ),
            caPath: caPath, logger: logger)
        let apiRouter = taskServer.buildRouter()
        let scheme = useTLS ? "https" : "http"
        // The web app's HTTP client: pooled connections, and the development CA under --tls.
        let webTransport = try AsyncHTTPClientTransport(additionalCACertificatePath: caPath)
        let webApp = try await makeWebApp(
            database: database, identity: identity, seed: seed, identityBase: baseURL, apiBase: "\(scheme)://\(displayHost):\(apiPort)",
            secure: useTLS,
            transport: webTransport, logger: logger)
        webApp?.addRoutes(to: apiRouter)
        let apiApp = Application(
            router: apiRouter, server: server,
            configuration: ApplicationConfiguration(address: .hostname(host, port: apiPort), serverName: "TodoB2C"),
            logger: logger)
        let identityApp = Application(
            router: identity.buildRouter(), server: server,
            configuration: ApplicationConfiguration(address: .hostname(host, port: identityPort), serverName: "TodoB2C"),
            onServerRunning: { _ in banner() },
            logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: identityApp)]
        if mode == "all" { services.append(.init(service: apiApp)) }
        services.append(
            .init(service: SweepService(identity: identity, webApp: webApp, logger: logger), successTerminationBehavior: .ignore))
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            try? await webTransport.shutdown()
            try? await fetcher.shutdown()
            try? await identity.shutdown()
            try? await database.close()
            throw error
        }
        // AsyncHTTPClient insists on an explicit shutdown before it is released.
        try await webTransport.shutdown()
        try await fetcher.shutdown()
        try await identity.shutdown()
        try await database.close()
    }

    /// The browser app on the API port: the dev tenant's confidential "web" twin, its secret from
    /// `<data-dir>/webapp-client-secret` (written when the app was registered).
    func makeWebApp(
        database: any Database, identity: IdentityServer, seed: DevTenantSeed, identityBase: String, apiBase: String, secure: Bool,
        transport: any HTTPTransport,
        logger: Logger
    ) async throws -> WebApp? {
        let secretPath = URL(fileURLWithPath: store.resolvedDataDir).appendingPathComponent("webapp-client-secret").path
        guard let secret = try? String(contentsOfFile: secretPath, encoding: .utf8), !secret.isEmpty else {
            logger.warning("web app disabled: no client secret", metadata: ["path": "\(secretPath)"])
            return nil
        }
        guard let apiURL = URL(string: apiBase) else { return nil }
        var configuration = WebAppConfiguration(
            clientID: seed.webApp.clientIDString, clientSecret: secret.trimmingCharacters(in: .whitespacesAndNewlines),
            authority: "\(identityBase)/\(seed.tenant.name)/", apiBaseURL: apiURL,
            apiScopes: seed.publicApp.exposedScopes.map { "\(seed.publicApp.appIDURI ?? "")/\($0)" })
        configuration.secure = secure
        configuration.replyURLs = seed.webApp.redirectURIs
        if identity.configuration.simulatedFacebook { configuration.facebookPolicy = "B2C_1_facebook" }
        return try await WebApp.make(
            configuration: configuration, database: database, dataKey: try store.dataKey(), transport: transport, logger: logger)
    }

    /// A repeatable option's values, else the space-separated environment variable's.
    func configured(_ flags: [String], _ variable: String) -> [String] {
        flags.isEmpty ? (store.environment[variable] ?? "").split(separator: " ").map(String.init) : flags
    }

    /// The Task API, trusting the configured authorities and audiences or, when none are
    /// configured, `defaults` (the built-in identity service's user flows and dev client id).
    func makeTaskServer(
        database: any Database, defaults: (discoveryURLs: [String], audiences: [String]), caPath: String?, logger: Logger
    ) async throws -> (HTTPMetadataFetcher, TaskServer) {
        var discovery = configured(authorities, "TODO_AUTHORITIES").map(BearerPolicy.discoveryURL(forAuthority:))
        if discovery.isEmpty { discovery = defaults.discoveryURLs }
        var accepted = configured(audiences, "TODO_AUDIENCES")
        if accepted.isEmpty { accepted = defaults.audiences }
        let policy = BearerPolicy(
            discoveryURLs: discovery, audiences: accepted, requiredScopes: configured(requiredScopes, "TODO_REQUIRED_SCOPES"))
        let fetcher = try HTTPMetadataFetcher(additionalCACertificatePath: authorityCA ?? store.environment["TODO_AUTHORITY_CA"] ?? caPath)
        return try await (
            fetcher,
            TaskServer.make(
                configuration: TaskServiceConfiguration(
                    policy: policy, corsAllowedOrigins: configured(corsOrigins, "TODO_CORS_ORIGINS"),
                    https: tls || store.environment["TODO_TLS"] == "1"),
                database: database, fetcher: fetcher, logger: logger)
        )
    }

    /// Plain HTTP/1.1, or HTTPS with the data dir's development CA (made on first use); the CA
    /// certificate's path is returned for clients. Both parts use the same listener setup, so
    /// tokens never travel in clear text when `--tls` is on.
    func listener(tls: Bool, displayHost: String) throws -> (HTTPServerBuilder, String?) {
        // One timer covers idle keep-alive connections and requests whose header or next body
        // part does not arrive (slowloris): Hummingbird's idle timeout counts from the last
        // complete part read or response written.
        let seconds = idleTimeout ?? store.environment["TODO_IDLE_TIMEOUT"].flatMap(Int.init) ?? 30
        let http1 = HTTP1Channel.Configuration(idleTimeout: .seconds(Int64(max(1, seconds))))
        guard tls else { return (.http1(configuration: http1), nil) }
        let ca = LocalCertificateAuthority(directory: URL(fileURLWithPath: store.resolvedDataDir).appendingPathComponent("tls"))
        try ca.ensure(hosts: [displayHost.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))])
        var tlsConfiguration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(ca.serverCertificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: ca.serverKeyPath, format: .pem)))
        // TLS 1.2 and 1.3 only, forward-secret AEAD suites only (RFC 8996 deprecates 1.0/1.1; no
        // CBC with SHA-1: Mozilla's "intermediate" configuration).
        tlsConfiguration.minimumTLSVersion = .tlsv12
        tlsConfiguration.cipherSuites = "ECDHE+AESGCM:ECDHE+CHACHA20"
        return (try .tls(.http1(configuration: http1), tlsConfiguration: tlsConfiguration), ca.caCertificatePath)
    }

    /// `--only api`: the Task API alone, in front of any B2C-shaped authority (SPEC §3), e.g. a
    /// real tenant's `https://<tenant>.b2clogin.com/<tenant>.onmicrosoft.com/<policy>`.
    func runAPIOnly(host: String, displayHost: String, apiPort: Int, tls: Bool, logger: Logger) async throws {
        let trusted = configured(authorities, "TODO_AUTHORITIES")
        guard !trusted.isEmpty, !configured(audiences, "TODO_AUDIENCES").isEmpty else {
            throw ValidationError("--only api needs --authority and --audience (or TODO_AUTHORITIES and TODO_AUDIENCES)")
        }
        try store.prepareDataDir()
        let database = try await DatabaseFactory.open(url: store.resolvedDatabaseURL, logger: logger)
        let (fetcher, tasks) = try await makeTaskServer(database: database, defaults: ([], []), caPath: nil, logger: logger)
        let (server, _) = try listener(tls: tls, displayHost: displayHost)
        let app = Application(
            router: tasks.buildRouter(), server: server,
            configuration: ApplicationConfiguration(address: .hostname(host, port: apiPort), serverName: "TodoB2C"),
            onServerRunning: { _ in
                FileHandle.standardOutput.write(
                    Data(
                        "TodoB2C Task API on \(tls ? "https" : "http")://\(displayHost):\(apiPort)/api/tasks trusting \(trusted.joined(separator: ", "))\n"
                            .utf8)
                )
            },
            logger: logger)
        do {
            try await ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
                .run()
        } catch {
            try? await fetcher.shutdown()
            try? await database.close()
            throw error
        }
        try await fetcher.shutdown()
        try await database.close()
    }

    static func printBanner(
        baseURL: String, apiAuthority: String, seed: DevTenantSeed, settingsPath: String, caPath: String?, dataDir: String, database: String
    ) {
        let tenant = seed.tenant
        var lines = [
            "TodoB2C is running.",
            "  identity service  \(baseURL)",
            "  web app           \(baseURL.hasPrefix("https") ? "https" : "http")://\(apiAuthority.replacingOccurrences(of: "127.0.0.1", with: "localhost"))/",
            "  task API          \(baseURL.hasPrefix("https") ? "https" : "http")://\(apiAuthority)/api/tasks",
            "  tenant            \(tenant.name) (\(tenant.guid))",
            "  client id         \(seed.publicApp.clientIDString)",
            "  discovery         \(baseURL)/\(tenant.name)/\(tenant.defaultPolicy)/v2.0/.well-known/openid-configuration",
            "  sign up / sign in \(baseURL)/\(tenant.name)/\(tenant.defaultPolicy)/oauth2/v2.0/authorize?client_id=\(seed.publicApp.clientIDString)&response_type=code&redirect_uri=urn:ietf:wg:oauth:2.0:oob&scope=openid%20offline_access%20\(seed.publicApp.clientIDString)&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256",
            "  dev outbox        \(baseURL)/dev/outbox",
            "  settings          \(settingsPath)",
            "  data              \(dataDir) (\(database))",
        ]
        if let caPath { lines.append("  CA certificate    \(caPath)") }
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }
}

/// Deletes expired codes, tokens, transactions and sessions every few minutes.
struct SweepService: Service {
    let identity: IdentityServer
    var webApp: WebApp? = nil
    let logger: Logger

    func run() async throws {
        // Shutdown cancels the sleep; that is the normal end of this service, not a failure.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await identity.sweep()
                    try await webApp?.sweep()
                } catch {
                    logger.warning("sweep failed", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: .seconds(300))
            }
        }
    }

}
