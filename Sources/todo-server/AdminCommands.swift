import ArgumentParser
import Foundation
import IdentityServer
import Logging
import Storage
import TodoModels
import TodoSystem

/// Runs `body` with the identity service of the default tenant, closing everything after.
func withDefaultTenant<T>(
    _ store: StoreOptions, _ body: (IdentityServer, Tenant) async throws -> T
) async throws -> T {
    try await withIdentity(store) { server in
        let tenant: Tenant
        if let existing = try await server.tenants.defaultTenant() {
            tenant = existing
        } else {
            tenant = try await server.seedDevelopmentTenant(apiPort: 3000).tenant
        }
        return try await body(server, tenant)
    }
}

/// Runs `body` with the store's identity service (no tenant seeded), closing everything after.
func withIdentity<T>(_ store: StoreOptions, _ body: (IdentityServer) async throws -> T) async throws -> T {
    try await StoreSession.with(store) { database, logger in
        let server = try await IdentityServer.make(
            configuration: .init(), database: database, dataKey: try await store.configuration().loadDataKey(), logger: logger)
        do {
            let result = try await body(server)
            try await server.shutdown()
            return result
        } catch {
            try? await server.shutdown()
            throw error
        }
    }
}

func readPasswordFromStdin() throws -> String {
    guard let line = readLine(strippingNewline: true), !line.isEmpty else {
        throw CommandFailure("no password on standard input")
    }
    return line
}

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage consumer accounts of the default tenant.",
        subcommands: [Add.self, List.self, Delete.self, Unlock.self, Disable.self, Enable.self, RevokeSessions.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a local account.")
        @OptionGroup var store: StoreOptions
        @Option(help: "Email address (the sign-in name).") var email: String
        @Option(help: "Display name.") var name: String
        @Flag(help: "Read the password from standard input (otherwise a random one is generated and printed).")
        var passwordStdin = false

        func run() async throws {
            let password = passwordStdin ? try readPasswordFromStdin() : "Aa1!" + UUID().uuidString.prefix(12)
            let user = try await withDefaultTenant(store) { server, tenant in
                try await server.createLocalUser(tenantID: tenant.id, email: email, displayName: name, password: password)
            }
            print("created \(user.email ?? "") oid \(user.objectID)")
            if !passwordStdin { print("password: \(password)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List accounts.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let users = try await withDefaultTenant(store) { server, tenant in try await server.users.users(tenantID: tenant.id) }
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
                let user = try await server.findUser(tenantID: tenant.id, emailOrID: account)
                _ = try await server.users.delete(id: user.id)
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
                let user = try await server.findUser(tenantID: tenant.id, emailOrID: account)
                try await server.users.clearLockout(id: user.id)
                print("unlocked \(user.email ?? user.objectID)")
            }
        }
    }
}

extension Users {
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
                let user = try await server.findUser(tenantID: tenant.id, emailOrID: account)
                try await server.users.revokeSessions(id: user.id, now: Date())
                print("revoked the sessions of \(TextRules.printable(user.email ?? user.objectID))")
            }
        }
    }

    static func setEnabled(_ enabled: Bool, account: String, store: StoreOptions) async throws {
        try await withDefaultTenant(store) { server, tenant in
            let user = try await server.findUser(tenantID: tenant.id, emailOrID: account)
            var changes = AccountChanges()
            changes.accountEnabled = enabled
            try await server.updateUser(user, changes)
            print("\(enabled ? "enabled" : "disabled") \(TextRules.printable(user.email ?? user.objectID))")
        }
    }
}

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage app registrations of the default tenant.", subcommands: [List.self, Add.self, Remove.self, Grant.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List app registrations.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let apps = try await withDefaultTenant(store) { server, tenant in try await server.tenants.applications(tenantID: tenant.id) }
            for app in apps {
                print("\(app.clientIDString)  \(app.kind.rawValue)  \(TextRules.printable(app.displayName))")
                for uri in app.redirectURIs { print("    redirect \(uri)") }
                if let uri = app.appIDURI { print("    api \(uri) scopes \(app.exposedScopes.joined(separator: " "))") }
                if let flow = app.userFlow { print("    user flow \(flow)") }
                for permission in app.apiPermissions {
                    let roles = permission.roles.isEmpty ? "" : " roles \(permission.roles.joined(separator: " "))"
                    print("    granted \(permission.resource) scopes \(permission.scopes.joined(separator: " "))\(roles)")
                }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register an app. A confidential app's secret is printed once.")
        @OptionGroup var store: StoreOptions
        @Option(help: "Display name.") var name: String
        @Option(help: "public or confidential.") var kind: String = "public"
        @Option(name: .customLong("redirect-uri"), help: "A redirect URI (repeatable).") var redirectURIs: [String] = []
        @Flag(help: "Allow the ROPC (password) grant.") var allowRopc = false
        @Flag(help: "Refuse sign-ins without PKCE (B2C requires it of single-page apps only).") var requirePkce = false
        @Option(name: .customLong("app-id-uri"), help: "Application ID URI when the app exposes an API.") var appIDURI: String?
        @Option(name: .customLong("scope"), help: "A scope the API exposes (repeatable).") var scopes: [String] = []
        @Option(
            name: .customLong("user-flow"),
            help: "External ID's app-bound user flow: policy-less (Entra) sign-ins of this app run it instead of the tenant's default.")
        var userFlow: String?
        @Option(
            name: .customLong("graph-permission"),
            help: "A Microsoft Graph application permission for app-only tokens: User.Read.All or User.ReadWrite.All (repeatable).")
        var graphPermissions: [String] = []
        @Flag(help: "Print {\"clientId\", \"clientSecret\"} as JSON (the secret once).") var json = false

        func run() async throws {
            guard let clientKind = ClientKind(rawValue: kind) else { throw CommandFailure("--kind must be public or confidential") }
            // Checked before anything is written.
            for permission in graphPermissions
            where !APIPermission.graphRoles.contains(where: { $0.lowercased() == permission.lowercased() }) {
                throw CommandFailure(
                    "--graph-permission '\(TextRules.printable(permission))' is not served here (\(APIPermission.graphRoles.joined(separator: ", ")) are)"
                )
            }
            if !graphPermissions.isEmpty, clientKind != .confidential {
                throw CommandFailure("--graph-permission needs --kind confidential (app-only tokens are for confidential apps)")
            }
            guard (try? TextRules.name(name, maximumLength: 256).get()) == name else {
                throw CommandFailure("--name must be 1 to 256 characters without controls, invisible characters or extra spaces")
            }
            let (app, secret) = try await withDefaultTenant(store) { server, tenant in
                var flowName: String?
                if let userFlow {
                    guard let flow = try await server.tenants.userFlow(tenantID: tenant.id, name: userFlow) else {
                        throw CommandFailure("--user-flow '\(TextRules.printable(userFlow))' is not a user flow of \(tenant.name)")
                    }
                    flowName = flow.name
                }
                let app = AppRegistration(
                    clientID: UUID(), tenantID: tenant.id, displayName: name, kind: clientKind, redirectURIs: redirectURIs,
                    allowPublicClientFlows: allowRopc, requirePKCE: requirePkce, appIDURI: appIDURI, exposedScopes: scopes,
                    userFlow: flowName)
                try await server.tenants.save(app, now: Date())
                if !graphPermissions.isEmpty {
                    _ = try await server.grantPermission(
                        tenantID: tenant.id, clientID: app.clientID, api: "https://graph.microsoft.com", scopes: [], roles: graphPermissions
                    )
                }
                var secret: String?
                if clientKind == .confidential {
                    let value = "s" + UUID().uuidString.replacingOccurrences(of: "-", with: "") + UUID().uuidString.prefix(8)
                    try await server.tenants.addSecret(clientID: app.clientID, secret: value, now: Date(), expiresAt: nil)
                    secret = value
                }
                return (app, secret)
            }
            if json {
                var object = ["clientId": app.clientIDString]
                object["clientSecret"] = secret
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                print(String(decoding: try encoder.encode(object), as: UTF8.self))
                return
            }
            print("client id: \(app.clientIDString)")
            if let secret { print("client secret (shown once): \(secret)") }
        }
    }

    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Grant an app API permissions with admin consent: delegated scopes (all the API exposes when none are named) and application roles. Without a grant an app gets no API's scopes but its own client id's."
        )
        @OptionGroup var store: StoreOptions
        @Argument(help: "The app's client id.") var clientID: String
        @Option(help: "The API: its Application ID URI, its client id, or https://graph.microsoft.com.") var api: String
        @Option(name: .customLong("scope"), help: "A delegated scope (repeatable).") var scopes: [String] = []
        @Option(name: .customLong("role"), help: "An application role for client-credentials tokens (repeatable).") var roles: [String] = []

        func run() async throws {
            guard let id = UUID(uuidString: clientID) else { throw CommandFailure("'\(clientID)' is not a client id (a GUID)") }
            let app = try await withDefaultTenant(store) { server, tenant in
                try await server.grantPermission(tenantID: tenant.id, clientID: id, api: api, scopes: scopes, roles: roles)
            }
            for permission in app.apiPermissions {
                print(
                    "granted \(permission.resource) scopes \(permission.scopes.joined(separator: " ")) roles \(permission.roles.joined(separator: " "))"
                )
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an app registration.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "Client id.") var clientID: String

        func run() async throws {
            guard let id = UUID(uuidString: clientID) else { throw CommandFailure("'\(clientID)' is not a client id (a GUID)") }
            let removed = try await withDefaultTenant(store) { server, tenant in
                try await server.tenants.removeApplication(tenantID: tenant.id, clientID: id)
            }
            guard removed else { throw CommandFailure("no app with client id \(clientID)") }
            print("removed \(clientID)")
        }
    }
}

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage token-signing keys.", subcommands: [List.self, Rotate.self, Revoke.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List signing keys.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let keys = try await withDefaultTenant(store) { server, _ in try await server.keys.allKeys() }
            let formatter = ISO8601DateFormatter()
            let now = Date()
            for key in keys {
                let state: String
                if key.retiredAt == nil {
                    state = "active"
                } else if let until = key.publishUntil, until > now {
                    state = "retired, published until \(formatter.string(from: until))"
                } else {
                    state = "withdrawn (not published, verifies nothing)"
                }
                print("\(key.kid)  RSA-\(key.bits)  created \(formatter.string(from: key.createdAt))  \(state)")
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new signing key. The old one stays in the JWKS until its tokens have expired.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let key = try await withDefaultTenant(store) { server, _ in try await server.keys.rotate() }
            print("new active key \(key.kid)")
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Withdraw a key at once (a leaked key): it leaves the JWKS and verifies nothing more. Tokens it signed stop working; an active key is replaced first."
        )
        @OptionGroup var store: StoreOptions
        // An option taking its value unconditionally: a kid is base64url and may begin with '-'.
        @Option(name: .long, parsing: .unconditional, help: "The key's kid (see keys list).") var kid: String

        func run() async throws {
            let replacement = try await withDefaultTenant(store) { server, _ in try await server.keys.revoke(kid: kid) }
            print("revoked \(kid)")
            if let replacement { print("new active key \(replacement.kid)") }
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
                try await server.exportTenant(tenantID: tenant.id, withUsers: withUsers)
            }
            guard let output else {
                print(yaml, terminator: "")
                return
            }
            guard FileManager.default.createFile(atPath: output, contents: Data(yaml.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw CommandFailure("cannot write \(output)")
            }
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
                    try await declaration.applyReporting(to: server, baseDirectory: URL(fileURLWithPath: file).deletingLastPathComponent())
                        .changes
                }
            } catch let error as TenantDeclaration.DeclarationError {
                throw CommandFailure(error.description)
            }
            print(changes.isEmpty ? "no changes" : changes.joined(separator: "\n"))
        }
    }
}

/// `todo-server backup FILE`: the whole store (accounts, apps, keys, sessions, tasks) as one
/// JSON file, 0600. Sealed values stay sealed: keep the data directory's `data-key` with it.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the whole store (accounts, apps, keys, tasks) to FILE; restore needs the same data-key.")
    @OptionGroup var store: StoreOptions
    @Argument(help: "The backup file to write.") var file: String

    func run() async throws {
        let data = try await StoreSession.with(store) { database, logger in
            try await TodoSystem.migrate(database, logger: logger)
            return try await DatabaseBackup.write(database)
        }
        guard FileManager.default.createFile(atPath: file, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CommandFailure("cannot write \(file)")
        }
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
            let written = try await StoreSession.with(store) { database, logger in
                try await TodoSystem.migrate(database, logger: logger)
                return try await DatabaseBackup.restore(data, into: database)
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
