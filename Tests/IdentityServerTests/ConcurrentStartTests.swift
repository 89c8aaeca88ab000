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

    @Test("with a public origin, every instance writes the same issuer and URLs whatever Host reached it")
    func publicOrigin() async throws {
        var configuration = IdentityServerConfiguration(passwordHashCost: 4)
        configuration.publicOrigin = "https://id.example.com"
        try await IdentityHarness.run(.sqlite, configuration: configuration) { h, driver in
            let discovery = try await driver.get(h.path("B2C_1_susi", "v2.0/.well-known/openid-configuration"))
            #expect(discovery.json["issuer"] as? String == "https://id.example.com/\(h.tenant.guid)/v2.0/")
            #expect((discovery.json["authorization_endpoint"] as? String)?.hasPrefix("https://id.example.com/") == true)
            _ = try await h.addUser()
            let tokens = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")
            let claims = DecodedJWT(try #require(tokens.json["access_token"] as? String)).claims
            #expect(claims["iss"] as? String == "https://id.example.com/\(h.tenant.guid)/v2.0/")
            // The hosted pages' URLs, too: the authorize redirect names the public origin.
            let toPage = try await driver.get(AuthorizationAttempt(harness: h).url(harness: h))
            #expect(
                toPage.location?.hasPrefix("https://id.example.com/\(h.tenant.name)/B2C_1_susi/pages/signin?") == true,
                "\(toPage.location ?? "")")
        }
    }
}
