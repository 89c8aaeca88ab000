import Configuration
import Foundation
import IdentityServer
import Logging
import SQLKit
import Storage
import Testing
import TodoSystem
@testable import UserJourneys
import WebApp

@Suite("serve's settings: flags, then TODO_* variables, then the --config file, then defaults")
struct SystemConfigurationTests {
    func text(_ value: String) -> ConfigValue { ConfigValue(.string(value), isSecret: false) }

    func configuration(flags: [String: ConfigValue] = [:], environment: [String: String] = [:]) async throws -> SystemConfiguration {
        try SystemConfiguration(reader: try await SystemConfiguration.reader(flags: flags, environment: environment))
    }

    @Test("with nothing set, the declared defaults")
    func defaults() async throws {
        let configuration = try await configuration()
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.identityPort == 5080)
        #expect(configuration.apiPort == 3000)
        #expect(configuration.passwordHashCost == 10)
        #expect(configuration.parts == .all)
        #expect(configuration.store.logLevel == .info)
        #expect(configuration.store.databaseURL == "sqlite:\(configuration.store.dataDirectory)/todo.sqlite")
        #expect(try await self.configuration(flags: [Setting.tls.key: text("true")]).identityPort == 5443, "TLS moves the default port")
    }

    @Test("a number setting's help shows the default the reader applies, and the part's own default is that one")
    func oneDefault() async throws {
        let configuration = try await configuration()
        let read: [(Setting, Int)] = [
            (.passwordHashCost, configuration.passwordHashCost), (.idleTimeout, configuration.idleTimeout),
            (.webPageSize, configuration.webPageSize), (.webAnonymousSessions, configuration.webAnonymousSessionsPerHour),
            (.refreshReuseSeconds, configuration.refreshReuseSeconds), (.apiPort, configuration.apiPort),
            (.logRetentionDays, configuration.logRetentionDays),
        ]
        for (setting, value) in read {
            #expect(setting.help.hasSuffix("Default: \(value)."), "\(setting.key): \(setting.help)")
        }
        #expect(configuration.identityServer.passwordHashCost == IdentityServerConfiguration().passwordHashCost)
        #expect(configuration.identityServer.refreshTokenReuseInterval == IdentityServerConfiguration().refreshTokenReuseInterval)
        #expect(configuration.identityServer.logRetention == IdentityServerConfiguration().logRetention)
        #expect(configuration.webPageSize == WebAppConfiguration.defaultPageSize)
        #expect(configuration.webAnonymousSessionsPerHour == WebAppConfiguration.defaultAnonymousSessionsPerHour)
    }

    @Test(
        "--public-url and --public-api-url take an origin (a trailing slash dropped) and become the base URLs; anything else is refused"
    )
    func publicURL() async throws {
        let pinned = try await configuration(flags: [
            Setting.publicURL.key: text("https://id.example.com/"), Setting.publicAPIURL.key: text("https://todo.example.com"),
        ])
        #expect(pinned.publicURL == "https://id.example.com" && pinned.identityBaseURL == "https://id.example.com")
        #expect(pinned.apiBaseURL == "https://todo.example.com")
        let plain = try await configuration()
        #expect(plain.identityBaseURL == "http://127.0.0.1:5080" && plain.apiBaseURL == "http://127.0.0.1:3000")
        for bad in [
            "ftp://id.example.com", "https://id.example.com/b2c", "https://user:pw@id.example.com", "https://id.example.com?x=1",
            "id.example.com",
        ] {
            for variable in ["TODO_PUBLIC_URL", "TODO_PUBLIC_API_URL"] {
                await #expect(throws: ConfigurationProblems.self, "\(variable)=\(bad)") {
                    try await self.configuration(environment: [variable: bad])
                }
            }
        }
    }

    @Test("the refresh reuse interval: 5 s by default, 0 to 60 from a flag or its variable, nothing else")
    func refreshReuse() async throws {
        #expect(try await configuration().refreshReuseSeconds == 5)
        #expect(try await configuration(flags: [Setting.refreshReuseSeconds.key: text("0")]).refreshReuseSeconds == 0)
        #expect(try await configuration(environment: ["TODO_REFRESH_REUSE_SECONDS": "30"]).refreshReuseSeconds == 30)
        await #expect(throws: ConfigurationProblems.self) {
            try await self.configuration(environment: ["TODO_REFRESH_REUSE_SECONDS": "3600"])
        }
    }

    @Test("the logs' retention: 7 days by default, 1 to 365 from a flag or its variable, and the identity service keeps records that long")
    func logRetention() async throws {
        #expect(try await configuration().identityServer.logRetention == 7 * 86_400)
        #expect(try await configuration(flags: [Setting.logRetentionDays.key: text("30")]).identityServer.logRetention == 30 * 86_400)
        #expect(try await configuration(environment: ["TODO_LOG_RETENTION_DAYS": "1"]).logRetentionDays == 1)
        for bad in ["0", "366", "week"] {
            await #expect(throws: ConfigurationProblems.self, "\(bad)") {
                try await self.configuration(environment: ["TODO_LOG_RETENTION_DAYS": bad])
            }
        }
    }

    @Test("a flag beats its variable, a variable beats the file, the file beats the default")
    func precedence() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("todo.json")
        try Data(
            #"{"identity": {"port": 6001}, "api": {"port": 6002}, "password": {"hash": {"cost": 11}}, "log": {"level": "debug"}}"#.utf8
        )
        .write(to: file)
        let configuration = try await configuration(
            flags: [Setting.identityPort.key: text("7001")],
            environment: ["TODO_CONFIG": file.path, "TODO_IDENTITY_PORT": "8001", "TODO_API_PORT": "8002"])
        #expect(configuration.identityPort == 7001)
        #expect(configuration.apiPort == 8002)
        #expect(configuration.passwordHashCost == 11)
        #expect(configuration.store.logLevel == .debug)
        #expect(configuration.apiPort != 6002)
    }

    @Test("repeatable settings: several flags, or one space-separated variable")
    func lists() async throws {
        let fromVariable = try await configuration(environment: [
            "TODO_AUTHORITIES": "https://a.example/t/B2C_1_x https://b.example/t/B2C_1_y"
        ])
        #expect(fromVariable.authorities == ["https://a.example/t/B2C_1_x", "https://b.example/t/B2C_1_y"])
        let fromFlags = try await configuration(
            flags: [Setting.audiences.key: ConfigValue(.stringArray(["one", "two"]), isSecret: false)],
            environment: ["TODO_AUDIENCES": "three"])
        #expect(fromFlags.audiences == ["one", "two"])
    }

    @Test("every problem is reported at once, each naming its flag and variable")
    func problems() async throws {
        do {
            _ = try await configuration(
                flags: [Setting.apiPort.key: text("http")],
                environment: ["TODO_IDENTITY_PORT": "70000", "TODO_LOG_LEVEL": "loud", "TODO_HOST": "10.1.2.3", "TODO_TLS": "maybe"])
            Issue.record("bad settings were accepted")
        } catch let problems as ConfigurationProblems {
            let text = problems.description
            #expect(problems.messages.count == 5, "\(text)")
            #expect(text.contains("--api-port (TODO_API_PORT) must be a whole number from 1 to 65535, not 'http'"))
            #expect(text.contains("--identity-port (TODO_IDENTITY_PORT)"))
            #expect(text.contains("--log-level (TODO_LOG_LEVEL)"))
            #expect(text.contains("--tls (TODO_TLS) must be true or false"))
            #expect(text.contains("refusing to listen on 10.1.2.3 without TLS"))
        }
    }

    @Test("off loopback without TLS only behind a declared TLS-terminating proxy (a container behind an ingress)")
    func plainBehindAProxy() async throws {
        let behind = [
            "TODO_HOST": "0.0.0.0", "TODO_TRUSTED_PROXIES": "10.0.0.0/8", "TODO_PUBLIC_URL": "https://id.example.com",
            "TODO_PUBLIC_API_URL": "https://todo.example.com",
        ]
        let accepted = try await configuration(environment: behind)
        #expect(accepted.tls == false && accepted.host == "0.0.0.0")
        #expect(accepted.isMachineLocal == false && accepted.onlyProxiesConnect && accepted.servedOverHTTPS)
        // Browsers see https: Secure cookies and HSTS in every part, the web app's reply URL on https.
        #expect(accepted.identityServer.secureCookies && accepted.identityServer.developmentMailbox == false)
        #expect(try await configuration(environment: ["TODO_TRUSTED_PROXIES": "127.0.0.1"]).servedOverHTTPS == false)
        // A proxy that is not declared, or a public origin in clear text, is no TLS in front.
        for refused in [
            behind.filter { $0.key != "TODO_TRUSTED_PROXIES" }, behind.merging(["TODO_PUBLIC_URL": "http://id.example.com"]) { _, b in b },
            behind.filter { $0.key != "TODO_PUBLIC_URL" }, behind.filter { $0.key != "TODO_PUBLIC_API_URL" },
            behind.merging(["TODO_PUBLIC_API_URL": "http://api.example.com"]) { _, b in b },
        ] {
            do {
                _ = try await configuration(environment: refused)
                Issue.record("accepted \(refused)")
            } catch let problems as ConfigurationProblems {
                #expect(problems.messages.contains { $0.contains("refusing to listen on 0.0.0.0 without TLS") }, "\(problems)")
            }
        }
        // The test-control surface mints anyone's tokens: not over clear text off the machine.
        do {
            _ = try await configuration(environment: behind.merging(["TODO_DEV_ENDPOINTS": "1"]) { _, b in b })
            Issue.record("accepted --dev-endpoints behind a proxy without TLS")
        } catch let problems as ConfigurationProblems {
            #expect(problems.messages.contains { $0.contains("refusing --dev-endpoints") }, "\(problems)")
        }
        // A proxy entry that is neither an address nor a range would trust nobody: refused.
        do {
            _ = try await configuration(environment: behind.merging(["TODO_TRUSTED_PROXIES": "ingress.internal"]) { _, b in b })
            Issue.record("accepted a proxy that is no address")
        } catch let problems as ConfigurationProblems {
            #expect(problems.messages.contains { $0.contains("takes IP addresses and CIDR ranges") }, "\(problems)")
        }
    }

    @Test("the API alone needs what it trusts; the simulated Facebook stays on loopback")
    func rules() async throws {
        await #expect(throws: ConfigurationProblems.self) { try await configuration(environment: ["TODO_ONLY": "api"]) }
        let apiOnly = try await configuration(
            environment: ["TODO_ONLY": "api", "TODO_AUTHORITIES": "https://x.example/t/B2C_1_a", "TODO_AUDIENCES": "aud"])
        #expect(apiOnly.parts == .api)
        await #expect(throws: ConfigurationProblems.self) {
            try await configuration(environment: ["TODO_HOST": "0.0.0.0", "TODO_TLS": "1", "TODO_SIMULATED_FACEBOOK": "1"])
        }
        // Behind a balancer on a loopback listener (the second outside attack's F-2).
        for published in [["TODO_TRUSTED_PROXIES": "127.0.0.1"], ["TODO_PUBLIC_URL": "https://id.example.com"]] {
            do {
                _ = try await configuration(environment: published.merging(["TODO_SIMULATED_FACEBOOK": "1"]) { a, _ in a })
                Issue.record("accepted \(published)")
            } catch let problems as ConfigurationProblems {
                #expect(problems.messages.contains { $0.contains("refusing --simulated-facebook behind a balancer") }, "\(problems)")
            }
        }
        let local = try await configuration(
            environment: ["TODO_SIMULATED_FACEBOOK": "1", "TODO_PUBLIC_URL": "http://localhost:5080"])
        #expect(local.simulatedFacebook && local.isMachineLocal)
    }
}


@Suite("The data key at start (issue 51, F3)")
struct DataKeyStartTests {
    @Test("an empty key file beside a store with nothing sealed gets a new key; beside a sealed store the start names the lost key")
    func emptyKeyFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("data-key-start-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SystemConfiguration(
            reader: try await SystemConfiguration.reader(flags: [Setting.dataDir.key: ConfigValue(.string(directory.path), isSecret: false)], environment: [:])
        ).store
        try store.prepareDataDirectory()
        let keyFile = directory.appendingPathComponent("data-key")
        try Data().write(to: keyFile)
        let database = try await DatabaseFactory.open(url: store.databaseURL, logger: Logger(label: "test"))
        do {
            let fresh = try await TodoSystem.dataKey(store, database: database, logger: Logger(label: "test"))
            #expect(try DataKey.load(environment: [:], directory: directory.path).id == fresh.id)
            // Something sealed with it, then the file emptied again: no new key may hide the loss.
            try await database.singleStatement { sql in
                try await sql.raw("CREATE TABLE service_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL, created_at BIGINT NOT NULL)").run()
                try await sql.raw("INSERT INTO service_secrets VALUES ('s', \(bind: try fresh.seal("x", context: "service_secrets:s")), 0)").run()
            }
            try Data().write(to: keyFile)
            await #expect(throws: DataKeyError.lost(path: keyFile.path, keyID: fresh.id)) {
                _ = try await TodoSystem.dataKey(store, database: database, logger: Logger(label: "test"))
            }
            try await database.close()
        } catch {
            try? await database.close()
            throw error
        }
    }
}
