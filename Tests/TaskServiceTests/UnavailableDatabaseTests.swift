import Foundation
import Hummingbird
import HummingbirdTesting
import SQLKit
import Storage
import TestSupport
import Testing
import TodoModels

@testable import TaskService

/// The Task API while its database cannot take writes (issue 14): 503 with `Retry-After` in the
/// problem form, `/readyz` 503 at once, reads still served, and nothing acknowledged lost.
@Suite("Task API on a database that cannot work")
struct UnavailableDatabaseTests {
    @Test("a full database: creates get 503 + Retry-After, /readyz 503, the list keeps every acknowledged task; space again heals both")
    func fullDatabase() async throws {
        try await TaskHarness.run(.sqlite) { h, client in
            let alice = h.authority.token(oid: "alice")
            let database = h.server.repository.database
            #expect(try await client.call(.get, "/readyz", token: nil).status == .ok)
            let pages = try await database.read { sql in
                try await sql.raw("PRAGMA page_count").first().map { try $0.decode(column: "page_count", as: Int.self) } ?? 0
            }
            try await database.transaction { try await $0.raw("PRAGMA max_page_count = \(unsafeRaw: "\(pages + 1)")").run() }
            var acknowledged: Set<String> = []
            var refused: TestResponse?
            let title = String(repeating: "t", count: 200)
            for n in 0..<300 {
                let response = try await client.call(.post, "/api/tasks", token: alice, json: #"{"title":"\#(title) \#(n)"}"#)
                if response.status == .created {
                    acknowledged.insert(try response.decode(TaskItem.self).title)
                } else {
                    refused = response
                    break
                }
            }
            let refusal = try #require(refused, "the database never filled")
            #expect(refusal.status == .serviceUnavailable)
            #expect(refusal.headers[.retryAfter] == "5")
            #expect(refusal.headers[.contentType] == "application/problem+json")
            #expect(refusal.problemType == "urn:todob2c:problem:unavailable")
            let ready = try await client.call(.get, "/readyz", token: nil)
            #expect(ready.status == .serviceUnavailable && ready.headers[.retryAfter] == "5")
            // Reads still work, and hold exactly what was acknowledged.
            let list = try await client.call(.get, "/api/tasks?limit=100", token: alice)
            #expect(list.status == .ok)
            let page = try list.decode(TaskPage.self)
            #expect(page.nextCursor == nil && acknowledged.count < 100)
            #expect(Set(page.items.map(\.title)) == acknowledged)
            // Space again: the next create succeeds and the instance is ready.
            try await database.transaction { try await $0.raw("PRAGMA max_page_count = 1000000").run() }
            #expect(try await client.call(.post, "/api/tasks", token: alice, json: #"{"title":"after"}"#).status == .created)
            #expect(try await client.call(.get, "/readyz", token: nil).status == .ok)
        }
    }
}
