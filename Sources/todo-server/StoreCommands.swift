import ArgumentParser
import Foundation
import IdentityServer
import Logging
import Storage
import TodoModels
import TodoSystem

/// `todo-server backup FILE`: the whole store (accounts, apps, keys, sessions, tasks) as one
/// JSON file, 0600. Sealed values stay sealed: keep the data directory's `data-key` with it.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the whole store (accounts, apps, keys, tasks) to FILE; restore needs the same data-key.")
    @OptionGroup var store: StoreOptions
    @Argument(help: "The backup file to write.") var file: String

    func run() async throws {
        let dataKey = try await store.configuration().loadDataKey()
        let data = try await StoreSession.with(store) { database, logger in
            try await TodoSystem.migrate(database, logger: logger)
            return try await DatabaseBackup.write(database, dataKey: dataKey)
        }
        try PrivateFile.write(data, to: file)
        print("backed up to \(file) (\(data.count) bytes); keep \(try await store.configuration().dataDirectory)/data-key with it")
    }
}

/// `todo-server restore FILE`: replaces the store's contents with a backup's, all or nothing.
struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replace the store's contents with FILE's (all or nothing); stop the servers on this store first.")
    @OptionGroup var store: StoreOptions
    @Argument(help: "The backup file to read.") var file: String

    func run() async throws {
        guard let data = FileManager.default.contents(atPath: file) else { throw CommandFailure("cannot read \(file)") }
        do {
            let dataKey = try await store.configuration().loadDataKey()
            let written = try await StoreSession.with(store) { database, logger in
                try await TodoSystem.migrate(database, logger: logger)
                return try await DatabaseBackup.restore(data, into: database, dataKey: dataKey)
            }
            print("restored \(written.values.reduce(0, +)) rows in \(written.count) tables from \(file)")
        } catch let error as DatabaseBackup.BackupError {
            throw CommandFailure(error.description)
        }
    }
}

/// The store's database and a quiet logger, for the commands that work on the whole store.
enum StoreSession {
    /// Runs `body` with the store's database, closing it after.
    static func with<T>(_ store: StoreOptions, _ body: (any Database, Logger) async throws -> T) async throws -> T {
        let configuration = try await store.configuration()
        var logger = configuration.logger(label: "todo-server")
        logger.logLevel = max(logger.logLevel, .warning)
        let database = try await DatabaseFactory.open(url: configuration.databaseURL, logger: logger)
        do {
            let result = try await body(database, logger)
            try await database.close()
            return result
        } catch {
            try? await database.close()
            throw error
        }
    }
}
