import ArgumentParser
import Foundation
import IdentityClient
import Logging
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
        app = PublicClientApplication(
            configuration: ClientConfiguration(
                clientID: settings.clientID, authority: authority, redirectURI: settings.redirectURI, tokenStore: store, logger: logger))
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
        return TaskClient(baseURL: settings.taskAPI) { force in
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
        case let error as TaskClientError:
            if case .unauthorized = error { return "\(error); sign in again with `todo login`" }
            return error.description
        default: return "\(error)"
        }
    }
}

/// Runs a command body and exits 1 with one line on failure.
func reportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as CleanExit {
        throw error
    } catch let error as ExitCode {
        throw error
    } catch {
        Terminal.error(Failure.message(error))
        throw ExitCode.failure
    }
}
