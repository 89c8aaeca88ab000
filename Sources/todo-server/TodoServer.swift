import ArgumentParser

/// `todo-server`: `serve` runs the system that ``TodoSystem`` builds; the other commands administer
/// the same data directory or database, with the server running or not (SPEC §1).
@main
struct TodoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todo-server",
        abstract: "TodoB2C: an Azure AD B2C-compatible identity service and a to-do API on one machine.",
        subcommands: [
            Serve.self, Users.self, Apps.self, Keys.self, TenantCommand.self, Token.self, Backup.self, Restore.self, CryptoCost.self,
        ],
        defaultSubcommand: Serve.self)
}
