import ArgumentParser
import Configuration
import Foundation
import Logging
import ServerSupport
import Storage
import TodoSystem

/// `todo-server serve`: reads the settings (flags, then `TODO_*` variables, then `--config`'s
/// file, then defaults; see ``Setting``) and runs the ``TodoSystem`` built from them.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the system (identity service; Task API and web app on --api-port).")

    @OptionGroup var store: StoreOptions

    @Option(name: .customLong("config"), help: ArgumentHelp(Setting.configFile.help)) var configFile: String?
    @Option(help: ArgumentHelp(Setting.host.help)) var host: String?
    @Option(help: ArgumentHelp(Setting.identityPort.help)) var identityPort: String?
    @Option(help: ArgumentHelp(Setting.apiPort.help)) var apiPort: String?
    @Flag(help: ArgumentHelp(Setting.tls.help)) var tls = false
    @Option(help: ArgumentHelp(Setting.tenantConfig.help)) var tenantConfig: String?
    @Option(name: .customLong("authority"), help: ArgumentHelp(Setting.authorities.help)) var authorities: [String] = []
    @Option(name: .customLong("audience"), help: ArgumentHelp(Setting.audiences.help)) var audiences: [String] = []
    @Option(name: .customLong("required-scope"), help: ArgumentHelp(Setting.requiredScopes.help)) var requiredScopes: [String] = []
    @Option(name: .customLong("cors-origin"), help: ArgumentHelp(Setting.corsOrigins.help)) var corsOrigins: [String] = []
    @Option(name: .customLong("trusted-proxy"), help: ArgumentHelp(Setting.trustedProxies.help)) var trustedProxies: [String] = []
    @Option(help: ArgumentHelp(Setting.only.help)) var only: String?
    @Option(help: ArgumentHelp(Setting.authorityCA.help)) var authorityCA: String?
    @Option(help: ArgumentHelp(Setting.passwordHashCost.help)) var passwordHashCost: String?
    @Option(help: ArgumentHelp(Setting.idleTimeout.help)) var idleTimeout: String?
    @Option(help: ArgumentHelp(Setting.maxConnections.help)) var maxConnections: String?
    @Flag(help: ArgumentHelp(Setting.simulatedFacebook.help)) var simulatedFacebook = false
    @Flag(help: ArgumentHelp(Setting.devEndpoints.help)) var devEndpoints = false
    @Option(help: ArgumentHelp(Setting.webPageSize.help)) var webPageSize: String?
    @Option(help: ArgumentHelp(Setting.webAnonymousSessions.help)) var webAnonymousSessions: String?
    @Option(help: ArgumentHelp(Setting.refreshReuseSeconds.help)) var refreshReuseSeconds: String?
    @Option(help: ArgumentHelp(Setting.logRetentionDays.help)) var logRetentionDays: String?
    @Option(help: ArgumentHelp(Setting.otlpEndpoint.help)) var otlpEndpoint: String?
    @Option(help: ArgumentHelp(Setting.publicURL.help)) var publicURL: String?
    @Option(name: .customLong("public-api-url"), help: ArgumentHelp(Setting.publicAPIURL.help)) var publicAPIURL: String?

    /// What the command line gave, by setting key: the highest-precedence source.
    var flags: [String: ConfigValue] {
        var flags = store.flags
        let texts: [(Setting, String?)] = [
            (.configFile, configFile), (.host, host), (.identityPort, identityPort), (.apiPort, apiPort), (.tenantConfig, tenantConfig),
            (.only, only), (.authorityCA, authorityCA), (.passwordHashCost, passwordHashCost), (.idleTimeout, idleTimeout),
            (.maxConnections, maxConnections),
            (.webPageSize, webPageSize), (.webAnonymousSessions, webAnonymousSessions), (.refreshReuseSeconds, refreshReuseSeconds),
            (.logRetentionDays, logRetentionDays), (.otlpEndpoint, otlpEndpoint),
            (.publicURL, publicURL),
            (.publicAPIURL, publicAPIURL),
        ]
        for case (let setting, let value?) in texts { flags[setting.key] = ConfigValue(.string(value), isSecret: false) }
        let lists: [(Setting, [String])] = [
            (.authorities, authorities), (.audiences, audiences), (.requiredScopes, requiredScopes), (.corsOrigins, corsOrigins),
            (.trustedProxies, trustedProxies),
        ]
        for (setting, values) in lists where !values.isEmpty { flags[setting.key] = ConfigValue(.stringArray(values), isSecret: false) }
        // A flag left off leaves the variable and the file in charge.
        if tls { flags[Setting.tls.key] = ConfigValue(.string("true"), isSecret: false) }
        if simulatedFacebook { flags[Setting.simulatedFacebook.key] = ConfigValue(.string("true"), isSecret: false) }
        if devEndpoints { flags[Setting.devEndpoints.key] = ConfigValue(.string("true"), isSecret: false) }
        return flags
    }

    func run() async throws {
        let configuration: SystemConfiguration
        do {
            configuration = try SystemConfiguration(reader: try await SystemConfiguration.reader(flags: flags))
        } catch let problems as ConfigurationProblems {
            throw CommandFailure(problems.description)
        }
        // OpenTelemetry's exporters, when a collector is named; the process's tracer, metrics and
        // log handler are bootstrapped once, before the first logger is made.
        let telemetry: Telemetry?
        do {
            telemetry = try Telemetry.bootstrap(endpoint: configuration.otlpEndpoint)
        } catch {
            throw CommandFailure("cannot export telemetry: \(error)")
        }
        defer { LogOutput.standardError.flush() }
        let logger = configuration.store.logger(label: "todo-server")
        let system: TodoSystem
        do {
            system = try await TodoSystem.build(configuration, logger: logger) { system in
                FileHandle.standardOutput.write(Data((system.banner + "\n").utf8))
            }
        } catch {
            // One line that names the cause (PostgreSQL's own message, not its generic one).
            throw CommandFailure("cannot start: \(StorageError.operatorDescription(of: error))")
        }
        try await system.run(alongside: telemetry.map { [$0.service] } ?? [])
    }
}
