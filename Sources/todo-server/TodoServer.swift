import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import TodoSystem

/// `todo-server`: `serve` runs the system that ``TodoSystem`` builds; the other commands administer
/// the same data directory or database, with the server running or not (SPEC §1).
@main
struct TodoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todo-server",
        abstract: "TodoB2C: an Azure AD B2C-compatible identity service and a to-do API on one machine.",
        // `buildCommit` is written by the BuildCommit plugin at build time.
        version: "todo-server \(TodoSystem.version) (commit \(buildCommit))",
        subcommands: [
            Serve.self, Users.self, Apps.self, Keys.self, TenantCommand.self, Policies.self, Token.self, Backup.self, Restore.self,
            CryptoCost.self, MCPCommand.self,
        ],
        defaultSubcommand: Serve.self)

    /// Swift concurrency's jobs run on NIO's event loops (the servers' and clients' singleton
    /// group) instead of a second pool of threads: a request's handler then continues on the loop
    /// that read it, not on another thread it is handed to and back from. The profile of the task
    /// list (issue 13) had a quarter of its time in those hand-overs (futex waits and wake-ups).
    /// Done before anything else runs, as NIO requires; nothing here blocks a loop on a future
    /// (`wait()`), and the blocking work (bcrypt, SQLite) has its own thread pools.
    static func main() async {
        // Before any command: the admin commands make ids too (``RandomSource``).
        do {
            try RandomSource.verify()
        } catch {
            FileHandle.standardError.write(Data("todo-server: \(error)\n".utf8))
            Self.exit(withError: ExitCode(70))
        }
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await main(nil)
    }
}
