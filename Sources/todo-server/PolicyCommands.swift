import ArgumentParser
import Foundation
import IdentityDirectory
import IdentityServer
import TrustFramework

/// `todo-server policies upload|list|show|delete|keys`: the default tenant's custom policies
/// (SPEC §2.12), through the same checks as Graph's `trustFramework/policies`.
struct Policies: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload, list, show or delete the tenant's custom policies (B2C_1A_…, Identity Experience Framework XML), and their key sets.",
        subcommands: [Upload.self, List.self, Show.self, Delete.self, Schema.self, PolicyKeys.self])

    struct Schema: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the supported part of the IEF schema as JSON: each element's children, step types, handlers, protocols, transformations, data types.")

        func run() throws { print(CustomPolicySchema.json()) }
    }

    struct Upload: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Check and store policy files, bases and the policies built on them in any order: all of them, or none when one has a problem."
        )
        @OptionGroup var store: StoreOptions
        @Argument(help: "Policy files, or directories of them (their *.xml files).") var paths: [String]

        func run() async throws {
            var files: [Data] = []
            for path in paths {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                    throw CommandFailure("no such file or directory: \(path)")
                }
                let names =
                    isDirectory.boolValue
                    ? try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.lowercased().hasSuffix(".xml") }.sorted()
                        .map { URL(fileURLWithPath: path).appendingPathComponent($0).path }
                    : [path]
                for name in names { files.append(try Data(contentsOf: URL(fileURLWithPath: name))) }
            }
            guard !files.isEmpty else { throw CommandFailure("no policy files in \(paths.joined(separator: " "))") }
            let uploaded: [(CustomPolicy, created: Bool)]
            do {
                uploaded = try await withDefaultTenant(store) { server, tenant in
                    try await server.administration.uploadCustomPolicies(files, tenant: tenant)
                }
            } catch let rejection as PolicyRejection {
                throw CommandFailure(rejection.description)
            }
            for (policy, created) in uploaded { print("\(created ? "created" : "updated") \(policy.id)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the tenant's custom policies and the base each names.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let policies = try await withDefaultTenant(store) { server, tenant in
                try await server.administration.customPolicies(tenantID: tenant.id)
            }
            for policy in policies { print(policy.baseID.map { "\(policy.id)  (base \($0))" } ?? policy.id) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a custom policy's XML as uploaded.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The policy id, e.g. B2C_1A_signup_signin.") var id: String

        func run() async throws {
            let policy = try await withDefaultTenant(store) { server, tenant in
                try await server.administration.customPolicy(tenantID: tenant.id, id: id)
            }
            guard let policy else { throw CommandFailure("no custom policy \(id)") }
            print(policy.body, terminator: policy.body.hasSuffix("\n") ? "" : "\n")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a custom policy that no other policy is built on.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The policy id.") var id: String

        func run() async throws {
            let deleted: Bool
            do {
                deleted = try await withDefaultTenant(store) { server, tenant in
                    try await server.administration.deleteCustomPolicy(tenant: tenant, id: id)
                }
            } catch let rejection as PolicyRejection {
                throw CommandFailure(rejection.description)
            }
            guard deleted else { throw CommandFailure("no custom policy \(id)") }
            print("deleted \(id)")
        }
    }
}
