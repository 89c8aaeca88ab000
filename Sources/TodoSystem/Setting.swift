import Configuration
import Foundation
import IdentityServer
import UserJourneys
import WebApp

/// One setting of the system, declared once: its configuration key, the command-line flag and
/// `TODO_*` environment variable that set it, and the help `serve --help` prints.
///
/// The variable is swift-configuration's mapping of the key with the `todo` prefix
/// (`identity.port` → `TODO_IDENTITY_PORT`); the flag is the key with dashes, except for the
/// repeatable options, which keep their singular flag (`--authority` for `authorities`).
public struct Setting: Sendable {
    public let key: String
    public let flag: String?
    let summary: String
    let defaultText: String?
    let isSecret: Bool
    /// A whole-number setting's default and bounds, declared here once: the reader applies them
    /// and the help prints them, so the two cannot disagree.
    let number: (default: Int, range: ClosedRange<Int>)?

    init(_ key: String, flag: String? = "", _ summary: String, default defaultText: String? = nil, secret: Bool = false) {
        self.init(key, flag: flag, summary, defaultText: defaultText, secret: secret, number: nil)
    }

    private init(
        _ key: String, flag: String?, _ summary: String, defaultText: String?, secret: Bool, number: (default: Int, range: ClosedRange<Int>)?
    ) {
        self.key = key
        self.flag = flag.map { $0.isEmpty ? key.replacingOccurrences(of: ".", with: "-") : $0 }
        self.summary = summary
        self.defaultText = defaultText
        self.isSecret = secret
        self.number = number
    }

    /// A whole number from `range`, `value` when unset; `defaultText` when the help should say
    /// more than the number (a default that depends on the machine).
    static func number(_ key: String, _ summary: String, default value: Int, in range: ClosedRange<Int>, defaultText: String? = nil) -> Setting {
        Setting(key, flag: "", summary, defaultText: defaultText ?? "\(value)", secret: false, number: (value, range))
    }

    public var variable: String { "TODO_" + key.replacingOccurrences(of: ".", with: "_").uppercased() }
    var configKey: ConfigKey { ConfigKey(key) }

    /// The option's help: what it does, its variable and its default.
    public var help: String {
        "\(summary) Env: \(variable)." + (defaultText.map { " Default: \($0)." } ?? "")
    }

    /// How a problem names it: the flag and the variable.
    var sources: String { flag.map { "--\($0) (\(variable))" } ?? variable }
}

extension Setting {
    public static let configFile = Setting(
        "config", "A JSON file of these settings, keys nested by their dots (e.g. {\"identity\": {\"port\": 5080}}).")
    public static let dataDir = Setting(
        "data.dir", "Data directory (SQLite database, TLS material, settings.json).", default: "./.todo-data")
    public static let databaseURL = Setting(
        "database.url",
        "sqlite:PATH (with ?synchronous=full, commits survive a power cut, at an fsync each) or postgres://user:pass@host:port/db.",
        default: "sqlite:<data-dir>/todo.sqlite")
    public static let logLevel = Setting(
        "log.level", "trace, debug, info, notice, warning, error, critical.", default: "info")
    /// A secret: never a flag (command lines are visible to every user of the machine).
    public static let dataKey = Setting(
        "data.key", flag: nil, "The key sealing signing keys and secrets at rest (base64url, 32 bytes).",
        default: "<data-dir>/data-key, made on first start", secret: true)
    public static let host = Setting(
        "host", "Address to listen on (a non-loopback address needs --tls, or a TLS-terminating proxy: --trusted-proxy and https public URLs).",
        default: "127.0.0.1")
    public static let identityPort = Setting("identity.port", "Identity service port.", default: "5080, or 5443 with --tls")
    public static let apiPort = Setting.number("api.port", "Task API and web app port.", default: 3000, in: 1...65535)
    public static let tls = Setting(
        "tls", "Serve over HTTPS with a CA generated into <data-dir>/tls (the variable takes 1).")
    public static let tenantConfig = Setting("tenant.config", "A tenant declared in YAML; it becomes the default tenant.")
    public static let authorities = Setting(
        "authorities", flag: "authority",
        "A B2C authority the Task API trusts (repeatable; space-separated in the variable), e.g. https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi.",
        default: "every user flow of the built-in identity service")
    public static let audiences = Setting(
        "audiences", flag: "audience", "An accepted access-token audience (repeatable).", default: "the dev client id")
    public static let requiredScopes = Setting(
        "required.scopes", flag: "required-scope", "A scope the Task API requires (repeatable; any one suffices).")
    public static let corsOrigins = Setting(
        "cors.origins", flag: "cors-origin", "An origin allowed to call the Task API from a browser (repeatable, or *).")
    public static let trustedProxies = Setting(
        "trusted.proxies", flag: "trusted-proxy",
        "The address or network (10.0.0.0/8) of a load balancer or reverse proxy whose X-Forwarded-For names the client (repeatable); per-source limits then count clients, not the proxy."
    )
    public static let only = Setting(
        "only", "Run one part only: identity or api (the API then needs --authority and --audience).", default: "all")
    public static let authorityCA = Setting(
        "authority.ca", "An extra CA certificate (PEM) to trust when fetching authority metadata.")
    /// OWASP: bcrypt cost 10 at least; 4 is bcrypt's floor, for tests.
    public static let passwordHashCost = Setting.number(
        "password.hash.cost", "bcrypt cost for new password hashes (OWASP: at least 10).",
        default: Int(IdentityServerConfiguration.defaultPasswordHashCost), in: 4...31)
    public static let maxConnections = Setting.number(
        "max.connections",
        "Open connections each listener accepts at most; more wait in the kernel's queue. Kept under the process's descriptor limit, so idle or slow clients cannot exhaust it.",
        default: 4096, in: 1...1_000_000, defaultText: "4096, or less if the descriptor limit is lower")
    public static let idleTimeout = Setting.number(
        "idle.timeout",
        "Seconds a connection may sit idle, or take to send a request's header or its next body part, before it is closed (slow or idle clients cannot hold the ports).",
        default: 30, in: 1...86_400)
    public static let webPageSize = Setting.number(
        "web.page.size", "Tasks per page of the web app.", default: WebAppConfiguration.defaultPageSize, in: 1...200)
    public static let publicURL = Setting(
        "public.url",
        "The identity service's origin as clients reach it (https://id.example.com behind a load balancer): every issuer and URL it writes uses it, so all instances agree.",
        default: "the request's Host (an allowed one)")
    public static let publicAPIURL = Setting(
        "public.api.url",
        "The Task API's and web app's origin as clients reach it behind a load balancer: settings.json and the web app's reply URL use it.",
        default: "the listener's address")
    /// Short: within it a stolen token is as good as the holder's (RFC 9700 §4.14.2).
    public static let refreshReuseSeconds = Setting.number(
        "refresh.reuse.seconds",
        "Seconds in which a just-rotated refresh token presented again gets the same successor (a client racing itself); 0: every reuse revokes the family.",
        default: Int(IdentityServerConfiguration.defaultRefreshTokenReuseInterval), in: 0...60)
    public static let otlpEndpoint = Setting(
        "otlp.endpoint",
        "Export traces, metrics and logs over OTLP/HTTP to this collector (http://127.0.0.1:4318): sets OTEL_EXPORTER_OTLP_ENDPOINT for the process; the other OTEL_* variables apply as OpenTelemetry defines them. Nothing is exported when neither is set.",
        default: "off")
    public static let logRetentionDays = Setting.number(
        "log.retention.days",
        "Days the sign-in and audit logs keep a record (B2C keeps 7); each tenant keeps at most its newest 100,000 of each besides.",
        default: 7, in: 1...365)
    public static let webAnonymousSessions = Setting.number(
        "web.anonymous.sessions", "Web app sessions one client address may start per hour before signing in.",
        default: WebAppConfiguration.defaultAnonymousSessionsPerHour, in: 1...1_000_000)
    public static let devEndpoints = Setting(
        "dev.endpoints",
        "Serve the test-control surface (/dev/outbox as JSON, /dev/tokens, /dev/reset, /dev/faults) on a non-loopback address too: it mints tokens for any user, so only for test deployments. Always on for a loopback address (the variable takes 1)."
    )
    public static let simulatedFacebook = Setting(
        "simulated.facebook",
        "Serve the simulated Facebook, which signs anyone in as any federated user by email alone: development only, and only on a loopback address (the variable takes 1)."
    )
}

/// Reads settings as text from a ``ConfigReader`` and collects every problem on the way.
struct SettingsReader {
    let reader: ConfigReader
    var problems: [String] = []

    func text(_ setting: Setting) -> String? {
        // A JSON file holds numbers and booleans as such; flags and variables are text.
        (reader.string(forKey: setting.configKey, isSecret: setting.isSecret)
            ?? reader.int(forKey: setting.configKey).map(String.init)
            ?? reader.bool(forKey: setting.configKey).map { $0 ? "true" : "false" })
            .flatMap { $0.isEmpty ? nil : $0 }
    }

    func list(_ setting: Setting) -> [String] {
        reader.stringArray(forKey: setting.configKey).map { $0.filter { !$0.isEmpty } } ?? text(setting).map { [$0] } ?? []
    }

    /// A number setting's value: its declared default when unset.
    mutating func number(_ setting: Setting) -> Int {
        guard let (value, range) = setting.number else { preconditionFailure("\(setting.key) is not a number setting") }
        return number(setting, default: value, in: range)
    }

    mutating func number(_ setting: Setting, default value: Int, in range: ClosedRange<Int>) -> Int {
        guard let given = text(setting) else { return value }
        guard let parsed = Int(given), range.contains(parsed) else {
            problems.append("\(setting.sources) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(given)'")
            return value
        }
        return parsed
    }

    mutating func flag(_ setting: Setting) -> Bool {
        guard let given = text(setting)?.lowercased() else { return false }
        switch given {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            problems.append("\(setting.sources) must be true or false (or 1 or 0), not '\(given)'")
            return false
        }
    }

    mutating func choice<Value: RawRepresentable<String>>(_ setting: Setting, default value: Value, _ message: String) -> Value {
        guard let given = text(setting) else { return value }
        guard let parsed = Value(rawValue: given.lowercased()) else {
            problems.append("\(setting.sources) \(message), not '\(given)'")
            return value
        }
        return parsed
    }
}
