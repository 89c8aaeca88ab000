import Foundation
import SQLKit
import Storage
import TestSupport
import Testing

/// A transaction whose connection is lost during COMMIT (PostgreSQL restarting under load) is
/// not left "outcome unknown" (a 500) while PostgreSQL can say what became of it: committed is a
/// success, rolled back is "unavailable, retry later". The cut is made by a relay in front of the
/// real PostgreSQL, at the COMMIT itself.
@Suite("A COMMIT whose answer is lost")
struct CommitOutcomeTests {
    /// A schema with one table, reached directly and through the relay.
    static func withRelay(
        reusedTransactionIDs: Bool = false, _ body: (_ relayed: PostgresDatabase, _ direct: PostgresDatabase, CommitCuttingProxy) async throws -> Void
    ) async throws {
        guard let base = TestDatabase.postgresURL else { return }
        var components = try #require(URLComponents(string: base))
        let proxy = try await CommitCuttingProxy.start(upstreamHost: try #require(components.host), upstreamPort: components.port ?? 5432)
        let schema = "c_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try PostgresDatabase(url: base, logger: TestDatabase.logger)
        try await admin.read { try await $0.raw("CREATE SCHEMA \(unsafeRaw: schema)").run() }
        try await admin.read { try await $0.raw("CREATE TABLE \(unsafeRaw: schema).items (id TEXT PRIMARY KEY)").run() }
        var searchPath = schema
        if reusedTransactionIDs {
            // What a crash restart makes of txid_status: PostgreSQL gives the lost transaction's
            // xid to the next one, which commits, so the question about ours answers "committed".
            // The schema's function comes before pg_catalog's on the relayed side's path.
            try await admin.read {
                try await $0.raw("CREATE FUNCTION \(unsafeRaw: schema).txid_status(bigint) RETURNS text LANGUAGE sql AS $$ SELECT 'committed'::text $$").run()
            }
            searchPath += ",pg_catalog"
        }
        components.port = proxy.port
        let separator = base.contains("?") ? "&" : "?"
        let relayed = try PostgresDatabase(
            url: "\(try #require(components.string))\(separator)search_path=\(searchPath)", logger: TestDatabase.logger)
        let direct = try PostgresDatabase(url: "\(base)\(separator)search_path=\(schema)", logger: TestDatabase.logger)
        do {
            try await body(relayed, direct, proxy)
        } catch {
            Issue.record(error)
        }
        try? await relayed.close()
        try? await direct.close()
        try? await admin.read { try await $0.raw("DROP SCHEMA \(unsafeRaw: schema) CASCADE").run() }
        try? await admin.close()
        try? await proxy.close()
    }

    static func count(_ database: PostgresDatabase, _ id: String) async throws -> Int64 {
        try await database.rows("SELECT count(*) AS n FROM items WHERE id = ?", [.text(id)]).first?.integer("n") ?? -1
    }

    @Test("COMMIT reached PostgreSQL and its answer was lost: the transaction returns its value, and the row is stored once")
    func answerLost() async throws {
        try await Self.withRelay { relayed, direct, proxy in
            try await relayed.read { try await $0.raw("SELECT 1").run() }  // the pool is up
            proxy.arm(.answerLost)
            let value = try await relayed.transaction { sql in
                try await sql.raw("INSERT INTO items (id) VALUES ('kept')").run()
                return 42
            }
            #expect(proxy.hasCut, "the relay cut the connection at COMMIT")
            #expect(value == 42)
            #expect(try await Self.count(direct, "kept") == 1)
            // And the relayed database works on.
            #expect(try await Self.count(relayed, "kept") == 1)
        }
    }

    @Test("the connection went before COMMIT reached PostgreSQL: unavailable (retry later), and nothing is stored")
    func commitLost() async throws {
        try await Self.withRelay { relayed, direct, proxy in
            try await relayed.read { try await $0.raw("SELECT 1").run() }
            proxy.arm(.commitLost)
            await #expect(
                performing: {
                    try await relayed.transaction { sql in try await sql.raw("INSERT INTO items (id) VALUES ('lost')").run() }
                }, throws: AvailabilityTests.isUnavailable)
            #expect(proxy.hasCut)
            #expect(try await Self.count(direct, "lost") == 0)
            // A retry, as the 503's Retry-After invites, stores it once.
            try await relayed.transaction { sql in try await sql.raw("INSERT INTO items (id) VALUES ('lost')").run() }
            #expect(try await Self.count(direct, "lost") == 1)
        }
    }

    @Test("the xid of a lost transaction given to another one (a crash restart): no acknowledgement, as only the transaction's own marker proves a commit")
    func transactionIDReused() async throws {
        try await Self.withRelay(reusedTransactionIDs: true) { relayed, direct, proxy in
            try await relayed.read { try await $0.raw("SELECT 1").run() }
            // txid_status, as the relayed side reads it, says every transaction committed.
            #expect(try await relayed.rows("SELECT txid_status(1) AS s", []).first?.optionalText("s") == "committed")
            proxy.arm(.commitLost)
            await #expect(throws: StorageError.self) {
                try await relayed.transaction { sql in try await sql.raw("INSERT INTO items (id) VALUES ('gone')").run() }
            }
            #expect(proxy.hasCut)
            #expect(try await Self.count(direct, "gone") == 0)
            // A COMMIT whose answer is lost, but which happened, is still acknowledged by its marker.
            proxy.arm(.answerLost)
            let value = try await relayed.transaction { sql in
                try await sql.raw("INSERT INTO items (id) VALUES ('kept')").run()
                return 7
            }
            let kept = try await Self.count(direct, "kept")
            #expect(value == 7 && kept == 1)
        }
    }
}
