import ArgumentParser
import Foundation
import Logging
import MCP
import Synchronization
import ServerSupport
import TodoB2CTesting
import TodoSystem

/// `todo-mcp` (and `todo-server mcp`, which runs it): a Model Context Protocol server over stdio
/// for coding agents (SPEC §6), on the MCP Swift SDK. It starts the whole system in this process
/// on free loopback ports (as `TodoB2CTesting` does) and offers the test-control surface as
/// tools. Standard output carries the protocol only; the system's log goes to standard error.
/// The system stops when the client closes the stream.
///
/// A binary of its own: the SDK imports FoundationNetworking (URLSession, for its OAuth client),
/// which `todo-server` keeps out — it would load libcurl and its TLS and Kerberos libraries into
/// every server (issue 13) and cannot link into the static release binary.
@main
struct TodoMCP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todo-mcp",
        abstract: "Serve the Model Context Protocol over stdio: a throw-away system and its test-control tools, for coding agents.")

    @Option(help: "A tenant declared in YAML, as for serve --tenant-config.") var tenantConfig: String?
    @Option(help: "trace, debug, info, notice, warning, error, critical (to standard error).") var logLevel: String = "warning"

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .warning
        LoggingSystem.bootstrap { label in LineLogHandler(label: label, logLevel: level) }
        var options = TodoB2CTestServer.Options(tenantConfig: tenantConfig.map { URL(fileURLWithPath: $0) })
        options.logLevel = level
        // An agent stopping the server (SIGTERM, SIGINT) gets the system stopped and its data
        // directory (signing keys, accounts) removed, as when it closes the stream; even while
        // it is still starting. A second signal ends the process at once.
        let shutdown = Shutdown()
        let signals = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { shutdown.requested(signal: number) }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        let system = try await TodoB2CTestServer.start(options)
        shutdown.started(system)
        let server = Server(
            name: "todo-b2c", version: TodoSystem.version, title: "TodoB2C test control",
            instructions: """
                A local Azure AD B2C / Entra External ID at \(system.identityURL.absoluteString) (tenant \(system.tenant), \
                public client \(system.clientID)) and its Task API at \(system.apiURL.absoluteString). \
                Call system_info for the authorities; the tools make users, mint tokens, read mailed codes, inject faults and move the clock.
                """,
            capabilities: .init(tools: .init(listChanged: false)))
        let tools = ControlTools(system: system)
        await server.withMethodHandler(ListTools.self) { _ in .init(tools: ControlTools.catalog) }
        await server.withMethodHandler(CallTool.self) { call in await tools.call(call.name, call.arguments ?? [:]) }
        try await server.start(transport: StdioTransport())
        await server.waitUntilCompleted()
        try await system.stop()
    }
}

/// What a signal does: before the system is up, it is stopped as soon as it is; once up, at
/// once; a second signal exits without waiting (a stop held up by a request still running).
final class Shutdown: Sendable {
    private enum State {
        case starting(signalled: Bool)
        case running(TodoB2CTestServer)
        case stopping
    }

    private let state = Mutex(State.starting(signalled: false))

    func requested(signal number: Int32) {
        let system: TodoB2CTestServer? = state.withLock { state in
            switch state {
            case .starting(let signalled):
                if signalled { _exit(128 + number) }
                state = .starting(signalled: true)
                return nil
            case .running(let system):
                state = .stopping
                return system
            case .stopping:
                _exit(128 + number)
            }
        }
        if let system { Self.stop(system) }
    }

    func started(_ system: TodoB2CTestServer) {
        let signalled: Bool = state.withLock { state in
            if case .starting(true) = state {
                state = .stopping
                return true
            }
            state = .running(system)
            return false
        }
        if signalled { Self.stop(system) }
    }

    private static func stop(_ system: TodoB2CTestServer) {
        Task {
            try? await system.stop()
            Foundation.exit(0)
        }
    }
}
