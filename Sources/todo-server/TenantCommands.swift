import ArgumentParser
import Foundation
import IdentityDirectory
import IdentityServer
import Logging
import Storage
import TodoModels
import TodoSystem

/// `todo-server tenant export|apply`: the default tenant as declarative YAML, and back.
struct TenantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tenant", abstract: "Export the default tenant as YAML, or apply a YAML declaration.",
        subcommands: [Export.self, Apply.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Write the tenant's declaration: flows, apps (secrets as SHA-256 hashes only) and, with --with-users, accounts (password hashes sealed with the data key)."
        )
        @OptionGroup var store: StoreOptions
        @Flag(help: "Include the accounts.") var withUsers = false
        @Option(help: "Write to this file (0600) instead of standard output.") var output: String?

        func run() async throws {
            let yaml = try await withDefaultTenant(store) { server, tenant in
                try await server.administration.exportTenant(tenantID: tenant.id, withUsers: withUsers)
            }
            guard let output else {
                print(yaml, terminator: "")
                return
            }
            try PrivateFile.write(Data(yaml.utf8), to: output)
            print("exported to \(output)")
        }
    }

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply a tenant declaration (the format export writes) and print what changed; applying it again changes nothing.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The YAML file.") var file: String

        func run() async throws {
            let declaration: TenantDeclaration
            do {
                declaration = try TenantDeclaration.load(path: file)
            } catch let error as TenantDeclaration.DeclarationError {
                throw CommandFailure(error.description)
            }
            // Not through withDefaultTenant: an empty store gets the declared tenant, not the dev one.
            let changes: [String]
            do {
                changes = try await withIdentity(store) { server in
                    try await declaration.applyReporting(to: server.administration, baseDirectory: URL(fileURLWithPath: file).deletingLastPathComponent())
                        .changes
                }
            } catch let error as TenantDeclaration.DeclarationError {
                throw CommandFailure(error.description)
            }
            print(changes.isEmpty ? "no changes" : changes.joined(separator: "\n"))
        }
    }
}

/// `todo-server token`: tokens for a user without a browser, through the real issuer (the
/// test-control surface's `POST /dev/tokens` as a command). The issuer is the running
/// service's, read from the data directory's settings.json unless `--origin` names it.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mint tokens for a user without a browser, as a sign-in would get them (development and tests).")
    @OptionGroup var store: StoreOptions
    @Option(help: "The user: email address or object id.") var user: String
    @Option(help: "The app's client id.") var client: String
    @Option(help: "The user flow (default: the tenant's default).") var policy: String?
    @Option(help: "The scopes (default: openid offline_access <client>).") var scope: String?
    @Flag(help: "The Microsoft identity platform's v2 token shapes instead of B2C's.") var entra = false
    @Option(help: "The identity service's public origin (default: identityBaseURL from the data directory's settings.json).")
    var origin: String?

    func run() async throws {
        let settingsURL = URL(fileURLWithPath: try await store.configuration().dataDirectory).appendingPathComponent("settings.json")
        guard let origin = origin ?? (try? ClientSettings.read(from: settingsURL))?.identityBaseURL else {
            throw CommandFailure("no identityBaseURL in \(settingsURL.path): start `todo-server serve` once, or pass --origin")
        }
        let request = TokenMintRequest(user: user, client: client, policy: policy, scope: scope, entra: entra)
        let response = try await withDefaultTenant(store) { server, tenant in
            try await server.mintTokens(tenantID: tenant.id, request, origin: origin)
        }
        print(response.serialized)
    }
}
