import Foundation
import HummingbirdTesting
import SQLKit
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// The identity service while its database cannot take writes (issue 14): B2C's
/// `temporarily_unavailable` (AADB2C90035) with 503 and `Retry-After`, never a 500, and
/// `/readyz` says so.
@Suite("Identity service on a database that cannot work")
struct UnavailableStoreTests {
    @Test("a full database: sign-ins get 503 AADB2C90035 with Retry-After, /readyz 503; space again heals both")
    func fullDatabase() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser()
            #expect(try await driver.get("/readyz").status == .ok)
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)
            let pages = try await h.database.read { sql in
                try await sql.raw("PRAGMA page_count").first().map { try $0.decode(column: "page_count", as: Int.self) } ?? 0
            }
            try await h.database.transaction { try await $0.raw("PRAGMA max_page_count = \(unsafeRaw: "\(pages)")").run() }
            var refused: TestResponse?
            for _ in 0..<50 {
                let response = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")
                if response.status != .ok {
                    refused = response
                    break
                }
            }
            let refusal = try #require(refused, "the database never filled")
            #expect(refusal.status == .serviceUnavailable)
            #expect(refusal.json["error"] as? String == "temporarily_unavailable")
            #expect(b2cCode(refusal) == "AADB2C90035")
            #expect(refusal.headers[.retryAfter] == "5")
            let ready = try await driver.get("/readyz")
            #expect(ready.status == .serviceUnavailable && ready.headers[.retryAfter] == "5")
            try await h.database.transaction { try await $0.raw("PRAGMA max_page_count = 1000000").run() }
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)
            #expect(try await driver.get("/readyz").status == .ok)
        }
    }
}
