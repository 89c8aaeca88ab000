import ArgumentParser
import Foundation
import IdentityDirectory
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
        if let existing = try await server.administration.defaultTenant() {
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
        let settings = try await store.configuration()
        let server = try await IdentityServer.make(
            configuration: .init(passwordHashCost: UInt8(settings.passwordHashCost)), database: database, dataKey: try settings.loadDataKey(),
            logger: logger)
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
