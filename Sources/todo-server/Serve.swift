import ArgumentParser
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import IdentityServer
import Logging
import NIOSSL
import ServiceLifecycle
import Storage

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

    @Option(help: "bcrypt cost for new password hashes (OWASP: at least 10). Env: TODO_PASSWORD_HASH_COST. Default: 10.")
    var passwordHashCost: UInt8?

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
        guard useTLS || Self.isLoopback(host) else {
            throw ValidationError("refusing to listen on \(host) without TLS: use --tls, or a loopback address")
        }

        let displayHost = host == "0.0.0.0" || host == "::" ? "localhost" : (host.contains(":") ? "[\(host)]" : host)
        let authority = "\(displayHost):\(identityPort)"
        let configuration = IdentityServerConfiguration(
            scheme: useTLS ? "https" : "http", defaultAuthority: authority, passwordHashCost: cost)
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

        var server: HTTPServerBuilder = .http1()
        var caPath: String?
        if useTLS {
            let ca = LocalCertificateAuthority(directory: URL(fileURLWithPath: store.resolvedDataDir).appendingPathComponent("tls"))
            try ca.ensure(hosts: [displayHost.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))])
            let tlsConfiguration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(ca.serverCertificatePath).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: ca.serverKeyPath, format: .pem)))
            server = try .tls(.http1(), tlsConfiguration: tlsConfiguration)
            caPath = ca.caCertificatePath
        }
        let baseURL = "\(configuration.scheme)://\(authority)"
        let settingsPath = try ClientSettings(
            identityBaseURL: baseURL, taskAPIBase: "http://\(displayHost):\(apiPort)", seed: seed, caCertificate: caPath
        ).write(to: store.resolvedDataDir)

        let banner: @Sendable () -> Void = {
            [seed, caPath, dataDir = store.resolvedDataDir, database = DatabaseFactory.redacted(store.resolvedDatabaseURL)] in
            Self.printBanner(baseURL: baseURL, seed: seed, settingsPath: settingsPath, caPath: caPath, dataDir: dataDir, database: database)
        }
        let identityApp = Application(
            router: identity.buildRouter(), server: server,
            configuration: ApplicationConfiguration(address: .hostname(host, port: identityPort), serverName: "TodoB2C"),
            onServerRunning: { _ in banner() },
            logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: identityApp),
                    .init(service: SweepService(identity: identity, logger: logger), successTerminationBehavior: .ignore),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            try? await identity.shutdown()
            try? await database.close()
            throw error
        }
        try await identity.shutdown()
        try await database.close()
    }

    static func isLoopback(_ host: String) -> Bool {
        ["127.0.0.1", "localhost", "::1"].contains(host) || host.hasPrefix("127.")
    }

    static func printBanner(baseURL: String, seed: DevTenantSeed, settingsPath: String, caPath: String?, dataDir: String, database: String)
    {
        let tenant = seed.tenant
        var lines = [
            "TodoB2C is running.",
            "  identity service  \(baseURL)",
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
    let logger: Logger

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await identity.sweep()
                } catch {
                    logger.warning("sweep failed", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: .seconds(300))
            }
        }
    }
}
