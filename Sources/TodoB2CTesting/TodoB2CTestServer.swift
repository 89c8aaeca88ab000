import AsyncHTTPClient
import Configuration
import Foundation
import IdentityDirectory
import IdentityServer
import Logging
import ServiceLifecycle
import Synchronization
import TodoSystem
import WireCoding

/// The whole TodoB2C system — the identity service (B2C and Entra faces, Graph), the Task API and
/// the web app — started in this process on free loopback ports, for an app's own XCTest or
/// Swift Testing suite (SPEC §6). Built by the same composition root as `todo-server serve`, on
/// a SQLite database in a temporary directory that ``stop()`` removes.
///
/// The test-control surface is Swift calls here: ``createUser(email:password:displayName:)``,
/// ``tokens(for:client:policy:scopes:claims:)``, ``outbox()`` and ``latestCode(for:)``,
/// ``failNext(policy:error:)``, ``advanceClock(bySeconds:)``, ``journeyTrace(correlationID:)``.
public final class TodoB2CTestServer: Sendable {
    /// What to start. The defaults suit tests: bcrypt at its lowest cost, logs at warning.
    public struct Options: Sendable {
        /// A tenant declared in YAML (`todo-server`'s `--tenant-config`): its flows, apps and
        /// attributes become the default tenant's.
        public var tenantConfig: URL?
        /// bcrypt's cost for passwords made in the test (4 to 31; production's is 12).
        public var passwordHashCost: Int = 4
        /// The simulated Facebook the default tenant's `B2C_1_facebook` flow federates with.
        public var simulatedFacebook: Bool = false
        public var logLevel: Logger.Level = .warning

        public init(tenantConfig: URL? = nil) { self.tenantConfig = tenantConfig }
    }

    /// The identity service's origin (`http://127.0.0.1:{port}`), the authorities' base.
    public let identityURL: URL
    /// The Task API's origin; the web app shares it.
    public let apiURL: URL
    /// The default tenant's name (`todob2c.onmicrosoft.com`, or the declared one).
    public let tenant: String
    /// The default tenant's public client (the `todo` CLI's and the tutorials' app).
    public let clientID: String
    /// `settings.json`, as the CLI and the Python fixture read it.
    public let settingsFile: URL

    private let system: TodoSystem
    let control: DevelopmentControl
    private let running: Task<Void, any Error>
    private let group: ServiceGroup
    private let directory: URL

    private init(
        system: TodoSystem, control: DevelopmentControl, group: ServiceGroup, running: Task<Void, any Error>, directory: URL
    ) throws {
        guard let identity = URL(string: system.identityBaseURL), let api = URL(string: system.apiBaseURL), let seed = system.seed else {
            throw TodoB2CTestError(code: "not_started", message: "The system started without its identity service.")
        }
        self.system = system
        self.control = control
        self.group = group
        self.running = running
        self.directory = directory
        identityURL = identity
        apiURL = api
        tenant = control.tenant.name
        clientID = seed.publicApp.clientIDString
        settingsFile = URL(fileURLWithPath: system.settingsPath ?? directory.appendingPathComponent("settings.json").path)
    }

    /// Starts the system and returns once both listeners answer `/healthz`.
    public static func start(_ options: Options = Options()) async throws -> TodoB2CTestServer {
        // A port found free can be taken before the listener binds it: only then, try again on new ports.
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await startOnce(options)
            } catch let error as TodoB2CTestError where error.code == "listener_failed" && attempt < 3 {
                continue
            }
        }
    }

    /// Starts the system, runs `body` with it, and stops it whether `body` succeeded or not.
    public static func run<Result: Sendable>(
        _ options: Options = Options(), _ body: (TodoB2CTestServer) async throws -> Result
    ) async throws -> Result {
        let server = try await start(options)
        do {
            let result = try await body(server)
            try await server.stop()
            return result
        } catch {
            try? await server.stop()
            throw error
        }
    }

    /// Shuts the system down gracefully and removes its data directory.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await running.value
    }

    /// A B2C authority of the default tenant: `{identityURL}/{tenant}/{policy}/`.
    public func authority(policy: String = "B2C_1_susi") -> URL {
        identityURL.appendingPathComponent(tenant).appendingPathComponent(policy).appendingPathComponent("")
    }

    private static func startOnce(_ options: Options) async throws -> TodoB2CTestServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todob2c-test-\(UUID().uuidString)")
        func text(_ value: String) -> ConfigValue { ConfigValue(.string(value), isSecret: false) }
        var flags: [String: ConfigValue] = [
            Setting.dataDir.key: text(directory.path), Setting.identityPort.key: text("\(try LoopbackPorts.reserve())"),
            Setting.apiPort.key: text("\(try LoopbackPorts.reserve())"), Setting.passwordHashCost.key: text("\(options.passwordHashCost)"),
            Setting.simulatedFacebook.key: text(options.simulatedFacebook ? "true" : "false"),
            Setting.logLevel.key: text(options.logLevel.rawValue),
        ]
        if let tenantConfig = options.tenantConfig { flags[Setting.tenantConfig.key] = text(tenantConfig.path) }
        // The environment is not read: a developer's TODO_* variables cannot change a test.
        let configuration = try SystemConfiguration(reader: try await SystemConfiguration.reader(flags: flags, environment: [:]))
        var logger = Logger(label: "TodoB2CTesting")
        logger.logLevel = options.logLevel
        let system: TodoSystem
        do {
            system = try await TodoSystem.build(configuration, logger: logger)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        let group = system.serviceGroup()
        // Whether the services ended (a listener that could not bind ends them at once).
        let ended = Ended()
        let running = Task {
            do {
                try await group.run()
                ended.state.withLock { $0 = .some(nil) }
            } catch {
                ended.state.withLock { $0 = .some(error) }
                throw error
            }
        }
        do {
            guard let identity = system.identity, let control = try await DevelopmentControl.forDefaultTenant(of: identity) else {
                throw TodoB2CTestError(code: "not_started", message: "The system started without its identity service.")
            }
            let failure = {
                ended.state.withLock { $0 }.map { error in
                    TodoB2CTestError(code: "listener_failed", message: "The system stopped while starting: \(error.map { "\($0)" } ?? "no error")")
                }
            }
            try await waitUntilAnswering(["\(system.identityBaseURL)/healthz", "\(system.apiBaseURL)/healthz"], failure: failure)
            // What answered was this system only if it is still running.
            if let failure = failure() { throw failure }
            return try TodoB2CTestServer(system: system, control: control, group: group, running: running, directory: directory)
        } catch {
            await group.triggerGracefulShutdown()
            _ = try? await running.value
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Polls each URL until it answers 200, for at most ten seconds; stops at once with what
    /// `failure` tells (the services ended) or when the task is cancelled.
    private static func waitUntilAnswering(_ urls: [String], failure: () -> TodoB2CTestError?) async throws {
        for url in urls {
            var answered = false
            for _ in 0..<200 where !answered {
                if let failure = failure() { throw failure }
                try Task.checkCancellation()
                var request = HTTPClientRequest(url: url)
                request.method = .GET
                if let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(2)), response.status == .ok {
                    answered = true
                } else {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            guard answered else { throw TodoB2CTestError(code: "not_answering", message: "\(url) did not answer within ten seconds.") }
        }
    }
}

/// Whether the services ended, and with what error: nil while they run.
private final class Ended: Sendable {
    let state = Mutex<(any Error)??>(nil)
}

/// A refusal of the test-control surface: the code the HTTP surface answers with (`AADB2C…`,
/// `invalid_request`) and its message.
public struct TodoB2CTestError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: String
    public let message: String

    public var description: String { "\(code): \(message)" }

    package init(code: String, message: String) {
        self.code = code
        self.message = message
    }
}
