import ArgumentParser
import Configuration
import Foundation
import IdentityServer
import Logging
import Storage
import TodoSystem

/// Options every command shares: where the data lives. Each falls back to its `TODO_*`
/// environment variable and then to its default, declared once in ``Setting``.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(Setting.dataDir.help)) var dataDir: String?
    @Option(name: .long, help: ArgumentHelp(Setting.databaseURL.help)) var databaseURL: String?
    @Option(name: .long, help: ArgumentHelp(Setting.logLevel.help)) var logLevel: String?

    /// The command line's store settings, by setting key.
    var flags: [String: ConfigValue] {
        var flags: [String: ConfigValue] = [:]
        for case (let setting, let value?) in [(Setting.dataDir, dataDir), (.databaseURL, databaseURL), (.logLevel, logLevel)] {
            flags[setting.key] = ConfigValue(.string(value), isSecret: false)
        }
        return flags
    }

    /// The store settings from flags, variables and `TODO_CONFIG`'s file.
    func configuration() async throws -> StoreConfiguration {
        do {
            return try StoreConfiguration(reader: try await SystemConfiguration.reader(flags: flags))
        } catch let problems as ConfigurationProblems {
            throw CommandFailure(problems.description)
        }
    }
}

/// Prints one line to stderr and exits non-zero: the CLI's failure form (SPEC §1).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = message }
}
