import ArgumentParser
import Foundation
import IdentityDirectory
import IdentityServer
import Logging
import Storage
import TodoModels
import TodoSystem

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage app registrations of the default tenant.", subcommands: [List.self, Add.self, Remove.self, Grant.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List app registrations.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let apps = try await withDefaultTenant(store) { server, tenant in
                try await server.administration.applications(tenantID: tenant.id)
            }
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
        @Flag(help: "Allow the implicit response types id_token and token (the portal's \"ID tokens\" and \"Access tokens\").")
        var allowImplicit = false
        @Flag(help: "Refuse sign-ins without PKCE (B2C requires it of single-page apps only).") var requirePkce = false
        @Option(name: .customLong("app-id-uri"), help: "Application ID URI when the app exposes an API.") var appIDURI: String?
        @Option(name: .customLong("scope"), help: "A scope the API exposes (repeatable).") var scopes: [String] = []
        @Option(
            name: .customLong("user-flow"),
            help: "External ID's app-bound user flow: policy-less (Entra) sign-ins of this app run it instead of the tenant's default.")
        var userFlow: String?
        @Option(
            name: .customLong("graph-permission"),
            help: "A Microsoft Graph application permission for app-only tokens: User.Read.All, User.ReadWrite.All, Policy.ReadWrite.TrustFramework, TrustFrameworkKeySet.Read.All, TrustFrameworkKeySet.ReadWrite.All, AuditLog.Read.All, RoleManagement.Read.Directory or RoleManagement.ReadWrite.Directory (repeatable).")
        var graphPermissions: [String] = []
        @Flag(help: "Answer External ID's native authentication API for this app (Graph's nativeAuthenticationApisEnabled: all).")
        var nativeAuth = false
        @Flag(help: "Print {\"clientId\", \"clientSecret\"} as JSON (the secret once).") var json = false

        func run() async throws {
            guard let clientKind = ClientKind(rawValue: kind) else { throw CommandFailure("--kind must be public or confidential") }
            var draft = IdentityAdministration.NewApplication(name: name, kind: clientKind)
            draft.redirectURIs = redirectURIs
            draft.allowPublicClientFlows = allowRopc
            draft.allowImplicit = allowImplicit
            draft.requirePKCE = requirePkce
            draft.appIDURI = appIDURI
            draft.exposedScopes = scopes
            draft.userFlow = userFlow
            draft.graphPermissions = graphPermissions
            draft.nativeAuthentication = nativeAuth
            // The registration's rules are the administration's: checked before anything is written.
            let (app, secret): (AppRegistration, String?)
            do {
                (app, secret) = try await withDefaultTenant(store) { server, tenant in
                    try await server.administration.register(draft, tenantID: tenant.id)
                }
            } catch let refusal as IdentityAdministration.AdministrationError {
                // The administration's rule, said in the flag's words.
                switch refusal {
                case .invalidName(let reason): throw CommandFailure("--name: \(reason)")
                case .roleNotServed, .needsConfidentialApp: throw CommandFailure("--graph-permission: \(refusal)")
                case .unknownUserFlow: throw CommandFailure("--user-flow: \(refusal)")
                default: throw refusal
                }
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
                try await server.administration.grantPermission(tenantID: tenant.id, clientID: id, api: api, scopes: scopes, roles: roles)
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
                try await server.administration.removeApplication(tenantID: tenant.id, clientID: id)
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
            let keys = try await withDefaultTenant(store) { server, _ in try await server.administration.signingKeys() }
            let formatter = ISO8601DateFormatter()
            let now = Date()
            for key in keys {
                let state: String
                if key.signs(at: now) {
                    state = key.retiredAt.map { "active until \(formatter.string(from: $0))" } ?? "active"
                } else if let activation = key.activatedAt, activation > now, key.isPublished(at: now) {
                    state = "pending: published, signs from \(formatter.string(from: activation))"
                } else if key.isPublished(at: now), let until = key.publishUntil {
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
            abstract:
                "Make a new signing key: published at once, signing after a delay (10 minutes), so validators know it before any token needs it. The old key stays in the JWKS until its tokens have expired."
        )
        @OptionGroup var store: StoreOptions
        @Flag(help: "Sign with the new key at once (an emergency): validators refuse its tokens until they fetch the key set again.")
        var now = false
        @Option(
            help: ArgumentHelp(
                "Seconds between publishing the new key and signing with it; longer than validators' key cache and the instances' 10 s ring refresh.",
                valueName: "seconds"))
        var activateAfter: Int?

        func validate() throws {
            if now, activateAfter != nil { throw ValidationError("--now and --activate-after exclude each other") }
            if let activateAfter, !(0...2_592_000).contains(activateAfter) {
                throw ValidationError("--activate-after must be 0 to 2592000 seconds")
            }
        }

        func run() async throws {
            let delay = now ? 0 : activateAfter.map(TimeInterval.init) ?? SigningKeyRing.propagationDelay
            let key = try await withDefaultTenant(store) { server, _ in
                try await server.administration.rotateSigningKey(activateAfter: delay)
            }
            if delay == 0 {
                print("new active key \(key.kid)")
            } else {
                let when = ISO8601DateFormatter().string(from: key.activatedAt ?? Date())
                print("new key \(key.kid): published now, signs from \(when)")
            }
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
            let replacement = try await withDefaultTenant(store) { server, _ in try await server.administration.revokeSigningKey(kid: kid) }
            print("revoked \(kid)")
            if let replacement { print("new active key \(replacement.kid)") }
        }
    }
}
