import ArgumentParser
import Foundation
import IdentityDirectory
import IdentityServer
import Logging
import Storage
import TodoModels
import TodoSystem

extension DirectoryRole: ExpressibleByArgument {}

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage consumer accounts of the default tenant.",
        subcommands: [
            Add.self, List.self, Delete.self, Unlock.self, Disable.self, Enable.self, RevokeSessions.self, ResetMFA.self, Role.self,
        ])

    struct Role: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Give an account a directory role, or take it (--remove).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Email address or object id.") var account: String
        @Argument(help: "The role: admin.") var role: DirectoryRole
        @Flag(help: "Take the role instead.") var remove = false

        func run() async throws {
            try await withDefaultTenant(store) { server, tenant in
                let user = try await server.administration.findUser(tenantID: tenant.id, emailOrID: account)
                if remove {
                    try await server.administration.removeRole(role, from: user)
                } else {
                    try await server.administration.assignRole(role, to: user)
                }
            }
            print("\(remove ? "removed" : "gave") role \(role.rawValue) \(remove ? "from" : "to") \(TextRules.printable(account))")
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a local account.")
        @OptionGroup var store: StoreOptions
        @Option(help: "Email address (the sign-in name).") var email: String
        @Option(help: "Display name.") var name: String
        @Flag(help: "Read the password from standard input (otherwise a random one is generated and printed).")
        var passwordStdin = false
        @Option(help: "A directory role to give the account: admin (signs in to the admin console at /admin).")
        var role: [DirectoryRole] = []

        func run() async throws {
            let password = passwordStdin ? try readPasswordFromStdin() : "Aa1!" + UUID().uuidString.prefix(12)
            let user = try await withDefaultTenant(store) { server, tenant in
                let user = try await server.administration.createLocalUser(
                    tenantID: tenant.id, email: email, displayName: name, password: password)
                for role in role { try await server.administration.assignRole(role, to: user) }
                return user
            }
            print("created \(user.email ?? "") oid \(user.objectID)" + (role.isEmpty ? "" : " with role \(role.map(\.rawValue).joined(separator: ", "))"))
            if !passwordStdin { print("password: \(password)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List accounts.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let users = try await withDefaultTenant(store) { server, tenant in try await server.administration.users(tenantID: tenant.id) }
            let now = Date()
            for user in users {
                let locked = (user.lockout.isLocked(at: now) ? "  locked" : "") + (user.accountEnabled ? "" : "  disabled")
                // Stored names are validated, but rows from before that rule (or a tampered database)
                // must still not drive the terminal: controls are shown as escapes.
                let account = TextRules.printable(user.email ?? user.signInName)
                print("\(user.objectID)  \(user.identityProvider.rawValue)  \(account)  \(TextRules.printable(user.displayName))\(locked)")
            }
            if users.isEmpty { print("no users") }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an account (its sessions and refresh tokens go with it).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Email address or object id.") var account: String

        func run() async throws {
            try await withDefaultTenant(store) { server, tenant in
                let user = try await server.administration.findUser(tenantID: tenant.id, emailOrID: account)
                try await server.administration.deleteUser(user)
                print("deleted \(user.email ?? user.objectID)")
            }
        }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Clear an account's smart-lockout state.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Email address or object id.") var account: String

        func run() async throws {
            try await withDefaultTenant(store) { server, tenant in
                let user = try await server.administration.findUser(tenantID: tenant.id, emailOrID: account)
                try await server.administration.clearLockout(user)
                print("unlocked \(user.email ?? user.objectID)")
            }
        }
    }
}

extension Users {
    struct ResetMFA: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset-mfa", abstract: "Remove an account's authenticator app; its next MFA sign-in enrols a new one.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Email address or object id.") var account: String

        func run() async throws {
            try await withDefaultTenant(store) { server, tenant in
                let user = try await server.administration.findUser(tenantID: tenant.id, emailOrID: account)
                let had = try await server.administration.resetSecondFactor(userID: user.id)
                print(
                    had ? "authenticator removed for \(user.email ?? user.objectID)" : "\(user.email ?? user.objectID) had no authenticator"
                )
            }
        }
    }

    /// Graph's `accountEnabled`, through the same rules as `PATCH /v1.0/users/{id}`.
    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an account: it cannot sign in, and its sessions end.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Email address or object id.") var account: String

        func run() async throws { try await setEnabled(false, account: account, store: store) }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled account.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Email address or object id.") var account: String

        func run() async throws { try await setEnabled(true, account: account, store: store) }
    }

    /// Graph's `revokeSignInSessions`.
    struct RevokeSessions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-sessions", abstract: "End an account's SSO sessions and refresh tokens (Graph's revokeSignInSessions).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Email address or object id.") var account: String

        func run() async throws {
            try await withDefaultTenant(store) { server, tenant in
                let user = try await server.administration.findUser(tenantID: tenant.id, emailOrID: account)
                try await server.administration.revokeSessions(user)
                print("revoked the sessions of \(TextRules.printable(user.email ?? user.objectID))")
            }
        }
    }

    static func setEnabled(_ enabled: Bool, account: String, store: StoreOptions) async throws {
        try await withDefaultTenant(store) { server, tenant in
            let user = try await server.administration.findUser(tenantID: tenant.id, emailOrID: account)
            var changes = AccountChanges()
            changes.accountEnabled = enabled
            try await server.administration.updateUser(user, changes)
            print("\(enabled ? "enabled" : "disabled") \(TextRules.printable(user.email ?? user.objectID))")
        }
    }
}
