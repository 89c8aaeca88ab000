import ArgumentParser
import Foundation
import IdentityServer
import Logging
import Storage

/// Options every command shares: where the data lives. Each falls back to an environment
/// variable (`TODO_DATA_DIR`, `TODO_DATABASE_URL`, `TODO_LOG_LEVEL`) and then to a default.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "Data directory (SQLite database, TLS material, settings.json). Env: TODO_DATA_DIR. Default: ./.todo-data")
    var dataDir: String?

    @Option(
        name: .long,
        help: "sqlite:PATH or postgres://user:pass@host:port/db. Env: TODO_DATABASE_URL. Default: sqlite:<data-dir>/todo.sqlite")
    var databaseURL: String?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error, critical. Env: TODO_LOG_LEVEL. Default: info")
    var logLevel: String?

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    var resolvedDataDir: String {
        let path = dataDir ?? environment["TODO_DATA_DIR"] ?? "./.todo-data"
        return URL(fileURLWithPath: path).standardizedFileURL.path
    }

    var resolvedDatabaseURL: String {
        databaseURL ?? environment["TODO_DATABASE_URL"] ?? "sqlite:\(resolvedDataDir)/todo.sqlite"
    }

    func logger(label: String) throws -> Logger {
        let text = logLevel ?? environment["TODO_LOG_LEVEL"] ?? "info"
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ValidationError("--log-level '\(text)' is not one of trace, debug, info, notice, warning, error, critical")
        }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    func prepareDataDir() throws {
        try FileManager.default.createDirectory(atPath: resolvedDataDir, withIntermediateDirectories: true)
        // The data dir holds keys and secrets: owner-only.
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: resolvedDataDir)
    }

    /// The key sealing signing keys, secrets and web sessions in the database: `TODO_DATA_KEY`,
    /// else `<data-dir>/data-key` (made on first start). Instances sharing one database need the
    /// same key.
    func dataKey() throws -> DataKey {
        try prepareDataDir()
        return try DataKey.load(environment: environment, directory: resolvedDataDir)
    }

    /// Opens the database and the identity service over it (running migrations).
    func openIdentity(logger: Logger, configuration: IdentityServerConfiguration = .init()) async throws -> (any Database, IdentityServer) {
        let dataKey = try dataKey()
        let database = try await DatabaseFactory.open(url: resolvedDatabaseURL, logger: logger)
        do {
            let server = try await IdentityServer.make(configuration: configuration, database: database, dataKey: dataKey, logger: logger)
            return (database, server)
        } catch {
            try? await database.close()
            throw error
        }
    }
}

/// Prints one line to stderr and exits non-zero: the CLI's failure form (SPEC §1).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}
