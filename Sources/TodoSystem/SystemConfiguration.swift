import Configuration
import Foundation
import IdentityServer
import IdentityClientCore
import Logging
import ServerSupport
import Storage
import TodoModels

/// Where the data lives: what every `todo-server` command needs, `serve` and the admin commands.
public struct StoreConfiguration: Sendable {
    public var dataDirectory: String
    public var databaseURL: String
    public var logLevel: Logger.Level
    /// Seals keys and secrets at rest; nil: `<data-dir>/data-key`.
    public var dataKey: String?
    /// The bcrypt cost of new password hashes: the admin commands make them at serve's cost.
    public var passwordHashCost: Int

    init(_ settings: inout SettingsReader) {
        dataDirectory = URL(fileURLWithPath: settings.text(.dataDir) ?? "./.todo-data").standardizedFileURL.path
        databaseURL = settings.text(.databaseURL) ?? "sqlite:\(dataDirectory)/todo.sqlite"
        logLevel = settings.choice(.logLevel, default: .info, "must be one of trace, debug, info, notice, warning, error, critical")
        dataKey = settings.text(.dataKey)
        passwordHashCost = settings.number(.passwordHashCost)
    }

    /// Reads the store settings alone (the admin commands).
    public init(reader: ConfigReader) throws {
        var settings = SettingsReader(reader: reader)
        self.init(&settings)
        guard settings.problems.isEmpty else { throw ConfigurationProblems(messages: settings.problems) }
    }

    public func logger(label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = logLevel
        return logger
    }

    /// Makes the data dir if needed; it holds keys and secrets, so it is owner-only.
    public func prepareDataDirectory() throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        // Only when it is not owner-only already: a read-only volume with the right mode starts.
        let mode = (try? FileManager.default.attributesOfItem(atPath: dataDirectory)[.posixPermissions] as? Int) ?? nil
        if mode.map({ $0 & 0o777 }) != 0o700 {
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dataDirectory)
        }
    }

    /// The key sealing signing keys, secrets and web sessions in the database. Instances sharing
    /// one database need the same key.
    public func loadDataKey() throws -> DataKey {
        try prepareDataDirectory()
        return try DataKey.load(environment: dataKey.map { ["TODO_DATA_KEY": $0] } ?? [:], directory: dataDirectory)
    }
}

/// Every problem found in the settings, one per line.
public struct ConfigurationProblems: Error, CustomStringConvertible {
    public var messages: [String]
    public var description: String { messages.joined(separator: "\n") }
}

/// Everything `todo-server serve` can be told, read once through swift-configuration: command-line
/// flags, then `TODO_*` environment variables, then an optional JSON file (`--config`), then the
/// defaults declared in ``Setting``. Every problem is reported at once.
public struct SystemConfiguration: Sendable {
    /// Which parts run in this process.
    public enum Parts: String, Sendable, CaseIterable {
        case all, identity, api
    }

    public var store: StoreConfiguration
    public var host: String
    public var identityPort: Int
    public var apiPort: Int
    public var tls: Bool
    public var tenantConfig: String?
    /// B2C authorities the Task API trusts; empty: every user flow of the built-in service.
    public var authorities: [String]
    /// Accepted access-token audiences; empty: the dev client id.
    public var audiences: [String]
    public var requiredScopes: [String]
    public var corsOrigins: [String]
    /// Peers whose `X-Forwarded-For` names the client.
    public var trustedProxies: [String]
    public var parts: Parts
    public var authorityCA: String?
    public var passwordHashCost: Int
    public var idleTimeout: Int
    /// The most connections one listener accepts (before the descriptor limit's own cap).
    public var maxConnections: Int
    public var simulatedFacebook: Bool
    /// The test-control surface on a non-loopback address (it is always on for loopback).
    public var devEndpoints: Bool
    public var webPageSize: Int
    public var webAnonymousSessionsPerHour: Int
    /// The refresh-token reuse interval (issue 14).
    public var refreshReuseSeconds: Int
    /// How long the sign-in and audit logs keep records.
    public var logRetentionDays: Int
    /// `--otlp-endpoint`: the OpenTelemetry collector's OTLP/HTTP base URL.
    public var otlpEndpoint: String?
    /// `--public-url`: the identity service's origin as clients reach it, without a trailing slash.
    public var publicURL: String?
    /// The Task API's (and web app's) origin behind a balancer.
    public var publicAPIURL: String?

    /// Reads and checks every setting; throws ``ConfigurationProblems`` naming each wrong one.
    public init(reader: ConfigReader) throws {
        var settings = SettingsReader(reader: reader)
        store = StoreConfiguration(&settings)
        host = settings.text(.host) ?? "127.0.0.1"
        tls = settings.flag(.tls)
        identityPort = settings.number(.identityPort, default: tls ? 5443 : 5080, in: 1...65535)
        apiPort = settings.number(.apiPort)
        tenantConfig = settings.text(.tenantConfig)
        authorities = settings.list(.authorities)
        audiences = settings.list(.audiences)
        requiredScopes = settings.list(.requiredScopes)
        corsOrigins = settings.list(.corsOrigins)
        trustedProxies = settings.list(.trustedProxies)
        parts = settings.choice(.only, default: .all, "must be identity or api")
        authorityCA = settings.text(.authorityCA)
        passwordHashCost = store.passwordHashCost
        idleTimeout = settings.number(.idleTimeout)
        maxConnections = settings.number(.maxConnections)
        simulatedFacebook = settings.flag(.simulatedFacebook)
        devEndpoints = settings.flag(.devEndpoints)
        webPageSize = settings.number(.webPageSize)
        webAnonymousSessionsPerHour = settings.number(.webAnonymousSessions)
        refreshReuseSeconds = settings.number(.refreshReuseSeconds)
        logRetentionDays = settings.number(.logRetentionDays)
        otlpEndpoint = settings.text(.otlpEndpoint)
        publicURL = settings.text(.publicURL).flatMap { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        publicAPIURL = settings.text(.publicAPIURL).flatMap { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }

        var problems = settings.problems
        // An origin only: the services' routes start at the root.
        for (setting, url) in [(Setting.publicURL, publicURL), (.publicAPIURL, publicAPIURL)] {
            guard let url else { continue }
            let parts = URLComponents(string: url)
            let valid =
                ["http", "https"].contains(parts?.scheme?.lowercased() ?? "") && parts?.host?.isEmpty == false
                && (parts?.path ?? "x").isEmpty && parts?.query == nil && parts?.fragment == nil && parts?.user == nil
                && parts?.password == nil
            if !valid { problems.append("\(setting.sources) must be an origin such as https://id.example.com, not '\(url)'") }
        }
        if let endpoint = otlpEndpoint {
            let parts = URLComponents(string: endpoint)
            if !["http", "https"].contains(parts?.scheme?.lowercased() ?? "") || parts?.host?.isEmpty != false || parts?.query != nil {
                problems.append("\(Setting.otlpEndpoint.sources) must be a collector's http or https URL such as http://127.0.0.1:4318, not '\(endpoint)'")
            }
        }
        // Tokens and passwords must not cross a network in clear text: off loopback, the listener
        // speaks TLS, or only a declared proxy that terminates TLS for the https public origin
        // reaches it (a container behind an ingress, SPEC §6).
        if !tls, !Authority.isLoopback(host), !isBehindTLSProxy {
            problems.append(
                "refusing to listen on \(host) without TLS: use --tls, a loopback address, or a TLS-terminating proxy (--trusted-proxy and https --public-url and --public-api-url)"
            )
        }
        for proxy in trustedProxies where !TrustedProxies.isValidEntry(proxy) {
            problems.append("\(Setting.trustedProxies.sources) takes IP addresses and CIDR ranges (10.0.0.0/8), not '\(TextRules.printable(proxy))'")
        }
        // The test-control surface mints anyone's tokens: never over clear text off this machine.
        if devEndpoints, onlyProxiesConnect {
            problems.append("refusing --dev-endpoints on \(host) without TLS: anyone on the proxy's network could mint tokens")
        }
        if simulatedFacebook, !Authority.isLoopback(host) {
            problems.append(
                "refusing --simulated-facebook on \(host): anyone could sign in as any federated user; use a loopback address")
        } else if simulatedFacebook, !isMachineLocal {
            problems.append(
                "refusing --simulated-facebook behind a balancer (--trusted-proxy, or --public-url on another host): anyone reaching it could sign in as any federated user"
            )
        }
        if parts == .api, authorities.isEmpty || audiences.isEmpty {
            problems.append("--only api needs --authority and --audience (or TODO_AUTHORITIES and TODO_AUDIENCES)")
        }
        if parts == .all, identityPort == apiPort {
            problems.append("the identity port and the API port must differ (both are \(apiPort))")
        }
        guard problems.isEmpty else { throw ConfigurationProblems(messages: problems) }
    }

    /// Whether only this machine reaches the server: a loopback listener that no balancer
    /// publishes (no trusted proxy, no public URL on another host). The test-control surface
    /// and the simulated Facebook need it.
    public var isMachineLocal: Bool {
        Authority.isLoopback(host) && trustedProxies.isEmpty
            && [publicURL, publicAPIURL].allSatisfy { url in url.map { URL(string: $0)?.host.map(Authority.isLoopback) ?? false } ?? true }
    }

    /// Whether a TLS-terminating proxy is declared in front: a trusted proxy, and the public
    /// origins of the parts this process serves on https.
    var isBehindTLSProxy: Bool {
        func https(_ url: String?) -> Bool { url?.lowercased().hasPrefix("https://") == true }
        let origins: [String?] =
            switch parts {
            case .all: [publicURL, publicAPIURL]
            case .identity: [publicURL]
            case .api: [publicAPIURL]
            }
        return !trustedProxies.isEmpty && origins.allSatisfy(https)
    }

    /// Plain HTTP off loopback behind a TLS-terminating proxy: only the proxies (and this
    /// machine's own loopback, a health check in the container) may connect.
    public var onlyProxiesConnect: Bool { !tls && !Authority.isLoopback(host) && isBehindTLSProxy }

    /// Whether browsers reach this server over https (its own TLS, or a TLS-terminating proxy's):
    /// cookies are `Secure`, responses carry HSTS, the web app's reply URL is https.
    public var servedOverHTTPS: Bool { tls || isBehindTLSProxy }

    /// The URL host clients use for a listener on `host`: a wildcard address is reached as
    /// localhost, an IPv6 address goes in brackets.
    public var displayHost: String {
        host == "0.0.0.0" || host == "::" ? "localhost" : (host.contains(":") ? "[\(host)]" : host)
    }

    /// ``displayHost`` without the brackets of an IPv6 address: the name certificates and the
    /// identity service's allowed hosts hold.
    public var displayHostName: String { displayHost.trimmingCharacters(in: CharacterSet(charactersIn: "[]")) }

    public var scheme: String { tls ? "https" : "http" }

    /// Where clients reach the identity service, and the Task API with the web app.
    public var identityBaseURL: String { publicURL ?? "\(scheme)://\(displayHost):\(identityPort)" }
    public var apiBaseURL: String { publicAPIURL ?? "\(scheme)://\(displayHost):\(apiPort)" }

    /// The sources in precedence order: `flags` (what the command line gave, by setting key), the
    /// `TODO_*` environment variables (lists space-separated), then the JSON file named by
    /// `--config`/`TODO_CONFIG`, if any. Defaults come last, from ``Setting``.
    public static func reader(flags: [String: ConfigValue], environment: [String: String]? = nil) async throws -> ConfigReader {
        let commandLine = InMemoryProvider(
            name: "command line",
            values: Dictionary(uniqueKeysWithValues: flags.map { (AbsoluteConfigKey(ConfigKey($0.key)), $0.value) }))
        let variables =
            (environment.map { EnvironmentVariablesProvider(environmentVariables: $0, arraySeparator: " ") }
            ?? EnvironmentVariablesProvider(arraySeparator: " ")).prefixKeys(with: "todo")
        let early = ConfigReader(providers: [commandLine, variables])
        guard let path = early.string(forKey: Setting.configFile.configKey), !path.isEmpty else { return early }
        let file = try await FileProvider<JSONSnapshot>(filePath: .init(path))
        return ConfigReader(providers: [commandLine, variables, file])
    }
}
