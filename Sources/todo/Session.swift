import ArgumentParser
import Foundation
import HTTPClientTransport
import IdentityClient
import Logging
import Synchronization
import TaskClient
import TodoModels

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(help: "Client settings (JSON or the tutorials' plist). Default: $TODO_SETTINGS or ./.todo-data/settings.json.")
    var settings: String?

    @Option(
        help:
            "Token cache file. Default: $TODO_TOKEN_CACHE, else $XDG_CONFIG_HOME/todob2c/token-cache.json, else $HOME/.config/todob2c/token-cache.json."
    )
    var tokenCache: String?

    @Flag(help: "Machine-readable output.")
    var json = false

    @Flag(help: "Log the SDK's requests (never tokens) to standard error.")
    var verbose = false
}

/// What a command works with: the settings, the SDK client over the file token cache, and the
/// signed-in account.
struct Session {
    let settings: ResolvedSettings
    let app: PublicClientApplication
    let transport: any HTTPTransport
    let options: GlobalOptions

    init(_ options: GlobalOptions) throws {
        self.options = options
        let environment = ProcessInfo.processInfo.environment
        let settingsPath = options.settings ?? environment["TODO_SETTINGS"] ?? ".todo-data/settings.json"
        settings = try ResolvedSettings(contentsOf: URL(fileURLWithPath: settingsPath))
        let cachePath = options.tokenCache ?? environment["TODO_TOKEN_CACHE"] ?? Self.defaultCachePath(environment)
        let store = FileTokenStore(url: URL(fileURLWithPath: cachePath)) { movedTo in
            Terminal.error("the token cache was corrupted; it was moved to \(movedTo.path). Please sign in again.")
        }
        var logger = Logger(label: "todo")
        logger.logLevel = options.verbose ? .debug : .critical
        let authority: Authority
        do {
            authority = try Authority(settings.authority)
        } catch {
            throw CommandError("the settings' authority is unusable: \(error)")
        }
        transport = try CLITransport.shared(trusting: settings.caCertificate)
        app = PublicClientApplication(
            configuration: ClientConfiguration(
                clientID: settings.clientID, authority: authority, redirectURI: settings.redirectURI, tokenStore: store,
                transport: transport, logger: logger))
    }

    /// The XDG base directory rule: `$XDG_CONFIG_HOME` when set to an absolute path, else
    /// `$HOME/.config`. Foundation's home directory on Linux is the passwd entry's, which ignores
    /// `$HOME`, so sandboxes and tests would share one cache.
    static func defaultCachePath(_ environment: [String: String]) -> String {
        let base: URL
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            base = URL(fileURLWithPath: config)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = URL(fileURLWithPath: home).appendingPathComponent(".config")
        } else {
            base = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config")
        }
        return base.appendingPathComponent("todob2c/token-cache.json").path
    }

    /// The current account, or a clear error.
    func account() async throws -> Account {
        guard let account = try await app.currentAccount() else { throw CommandError("not signed in: run `todo login`") }
        return account
    }

    /// A Task API client whose token comes silently from the cache (refreshed when due).
    func tasks() async throws -> TaskClient {
        let account = try await account()
        let app = self.app
        let scopes = settings.scopes
        return TaskClient(baseURL: settings.taskAPI, transport: transport) { force in
            try await app.acquireTokenSilently(scopes: scopes, account: account, forceRefresh: force).accessToken
        }
    }
}

/// Turns SDK and API errors into the one line the user reads.
enum Failure {
    static func message(_ error: any Error) -> String {
        switch error {
        case let error as CommandError: return error.description
        case let error as IdentityError:
            switch error {
            case .interactionRequired: return "your sign-in has expired or was revoked; please sign in again with `todo login`"
            case .userCanceled: return "sign-in cancelled"
            default: return error.description
            }
        case let error as NativeAuthFailure: return error.description
        case let error as TaskClientError:
            if case .unauthorized = error { return "\(error); sign in again with `todo login`" }
            return error.description
        default: return "\(error)"
        }
    }
}

/// Runs a command body and exits 1 with one line on failure; releases the HTTP client either way.
func reportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
        await CLITransport.finish()
    } catch let error as CleanExit {
        await CLITransport.finish()
        throw error
    } catch let error as ExitCode {
        await CLITransport.finish()
        throw error
    } catch {
        await CLITransport.finish()
        Terminal.error(Failure.message(error))
        throw ExitCode.failure
    }
}

/// The CLI's HTTP transport: the SDK's `URLSession` one, or AsyncHTTPClient when the settings
/// name a CA to trust (`caCertificate`, written by `serve --tls`): FoundationNetworking on Linux
/// takes no extra CA. Made once per process and shut down when the command ends.
enum CLITransport {
    private static let made = Mutex<AsyncHTTPClientTransport?>(nil)

    static func shared(trusting caPath: String?) throws -> any HTTPTransport {
        guard let caPath else { return URLSessionTransport() }
        guard FileManager.default.isReadableFile(atPath: caPath) else {
            throw CommandError("the settings' caCertificate \(caPath) cannot be read")
        }
        return try made.withLock { existing in
            if let existing { return existing }
            let transport = try AsyncHTTPClientTransport(additionalCACertificatePath: caPath)
            existing = transport
            return transport
        }
    }

    static func finish() async {
        let transport = made.withLock { existing in
            defer { existing = nil }
            return existing
        }
        try? await transport?.shutdown()
    }
}
