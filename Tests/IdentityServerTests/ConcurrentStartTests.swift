import Foundation
import Storage
import TestSupport
import Testing

@testable import IdentityServer

/// Instances started together on one PostgreSQL (issue 14): migrations and the dev tenant's
/// seeding run once, one instance after the other, and every instance comes up with the same
/// whole tenant.
@Suite("Instances started together")
struct ConcurrentStartTests {
    @Test("four instances migrating and seeding at once on one PostgreSQL: one tenant, all its apps, every instance up")
    func startTogether() async throws {
        guard TestDatabase.engines.contains(.postgres) else {
            #expect(!TestDatabase.postgresRequired, "PostgreSQL is required for this run")
            return
        }
        try await TestDatabase.with(.postgres) { database in
            // Instances of one deployment share the data key.
            let dataKey = DataKey.generate()
            let seeds = try await withThrowingTaskGroup(of: DevTenantSeed.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        let server = try await IdentityServer.make(
                            configuration: .init(passwordHashCost: 4), database: database, dataKey: dataKey, clock: ManualClock(Date()),
                            logger: TestDatabase.logger)
                        do {
                            let seed = try await server.seedDevelopmentTenant(apiPort: 3000)
                            try await server.shutdown()
                            return seed
                        } catch {
                            try? await server.shutdown()
                            throw error
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(seeds.count == 4)
            #expect(Set(seeds.map(\.tenant.id)).count == 1)
            #expect(Set(seeds.map(\.publicApp.clientID)).count == 1 && Set(seeds.map(\.webApp.clientID)).count == 1)
            #expect(seeds.filter { $0.newWebAppSecret != nil }.count == 1, "one instance made the tenant")
            let directory = SQLTenantDirectory(database: database)
            #expect(try await directory.tenants().count == 1)
            #expect(try await directory.applications(tenantID: seeds[0].tenant.id).count == 2)
        }
    }
}
