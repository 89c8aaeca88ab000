import ArgumentParser
import Foundation
import IdentityDirectory
import IdentityServer

/// `todo-server policies keys …`: the default tenant's policy key sets (SPEC §2.12), as the IEF
/// setup asks for them before the starter pack uploads (`TokenSigningKeyContainer`,
/// `TokenEncryptionKeyContainer`, an identity provider's secret), through the same rules as
/// Graph beta's `trustFramework/keySets`.
struct PolicyKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List, create, fill or delete the tenant's policy key sets (B2C_1A_…), which custom policies name by StorageReferenceId.",
        subcommands: [List.self, Create.self, Generate.self, UploadSecret.self, Delete.self])

    /// Runs `body` on the default tenant; a refused request is one line and a non-zero exit.
    static func onDefaultTenant<T: Sendable>(_ store: StoreOptions, _ body: @escaping @Sendable (IdentityServer, Tenant) async throws -> T)
        async throws -> T
    {
        do {
            return try await withDefaultTenant(store, body)
        } catch let refusal as PolicyKeySetError {
            throw CommandFailure(refusal.message)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the key sets and their keys (id, use, type; never a secret).")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let sets = try await PolicyKeys.onDefaultTenant(store) { server, tenant in try await server.administration.policyKeySets(tenantID: tenant.id) }
            for set in sets {
                print(set.id)
                for key in set.keys { print("  \(key.kid)  \(key.use)  \(key.kty)") }
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an empty key set; B2C_1A_ is added to its id when missing.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The key set's id, e.g. TokenSigningKeyContainer.") var id: String

        func run() async throws {
            let set = try await PolicyKeys.onDefaultTenant(store) { server, tenant in
                try await server.administration.createPolicyKeySet(tenantID: tenant.id, id: id)
            }
            print("created \(set.id)")
        }
    }

    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Generate an RSA key in a key set; prints its kid.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The key set's id.") var id: String
        @Option(help: "sig or enc.") var use = "sig"

        func run() async throws {
            let key = try await PolicyKeys.onDefaultTenant(store) { server, tenant in
                try await server.administration.generatePolicyKey(tenantID: tenant.id, keySet: id, use: use)
            }
            print(key.kid)
        }
    }

    struct UploadSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a secret, read from standard input (one line), to a key set; prints its kid. The secret is never shown again.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The key set's id.") var id: String
        @Option(help: "sig or enc.") var use = "sig"
        @Flag(help: "Read the secret from standard input (required: a secret is never an argument).") var secretStdin = false

        func run() async throws {
            guard secretStdin else { throw CommandFailure("pass --secret-stdin and the secret on standard input") }
            guard let secret = readLine(strippingNewline: true), !secret.isEmpty else { throw CommandFailure("no secret on standard input") }
            let key = try await PolicyKeys.onDefaultTenant(store) { server, tenant in
                try await server.administration.uploadPolicySecret(tenantID: tenant.id, keySet: id, use: use, value: secret)
            }
            print(key.kid)
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a key set and its keys.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The key set's id.") var id: String

        func run() async throws {
            let deleted = try await PolicyKeys.onDefaultTenant(store) { server, tenant in
                try await server.administration.deletePolicyKeySet(tenantID: tenant.id, id: id)
            }
            guard deleted else { throw CommandFailure("no key set \(id)") }
            print("deleted \(id)")
        }
    }
}
