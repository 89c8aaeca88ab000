import Foundation
import Synchronization
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// The sign-in log (SPEC §2.13): one record per journey and per token grant, read through
/// Graph's `auditLogs/signIns` with `AuditLog.Read.All`, filtered and paged; nothing secret in it;
/// bounded however many sign-ins come.
@Suite("Sign-in log and Graph auditLogs/signIns")
struct SignInLogTests {
    static func list(_ driver: Driver, _ auth: HTTPFields, _ query: String = "") async throws -> TestResponse {
        try await driver.request(.get, "/v1.0/auditLogs/signIns" + query, headers: auth)
    }

    static func values(_ response: TestResponse) -> [[String: Any]] { response.json["value"] as? [[String: Any]] ?? [] }

    @Test("the log's queue never holds its callers: past its bound a record is dropped at once; a flush waits for what was handed over")
    func queueBound() async throws {
        let batches = SignInBatches()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let written = Mutex(0)
        let event = SignInEvent(
            tenantID: UUID(), at: Date(), correlationID: "c", kind: .signIn, appID: nil, appName: nil, policy: nil, userID: nil,
            userPrincipalName: nil, userDisplayName: nil, ipAddress: nil, errorCode: 0, failureReason: nil, grantType: nil, interactive: true,
            steps: [])
        let write: @Sendable ([SignInEvent]) async throws -> Void = { batch in
            for await _ in gate { break }
            written.withLock { $0 += batch.count }
        }
        // The writer waits at the gate; the queue fills behind it until a record is refused.
        var admitted = 0
        var refused = false
        for _ in 0...(SignInBatches.maximumQueued + SignInBatches.maximumBatch) {
            if batches.add(event, write: write) { admitted += 1 } else { refused = true; break }
        }
        #expect(refused, "full: dropped, not waited for")
        #expect(admitted >= SignInBatches.maximumQueued && admitted <= SignInBatches.maximumQueued + SignInBatches.maximumBatch)
        for _ in 0..<(admitted / SignInBatches.maximumBatch + 2) { open.yield() }
        await batches.flushed()
        #expect(written.withLock { $0 } == admitted, "every admitted record written")
    }

    @Test(
        "a grant never waits on the log's table: with sign_in_events locked, a password grant answers; its record is there once the lock goes",
        arguments: TestDatabase.engines.filter { $0 == .postgres })
    func grantsDoNotWaitOnTheLog(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser("unblocked@example.com", password: "Passw0rd!", name: "Una")
            let (locked, lockTaken) = AsyncStream.makeStream(of: Void.self)
            let (released, release) = AsyncStream.makeStream(of: Void.self)
            let holder = Task {
                try await h.database.transaction { sql in
                    try await sql.raw("LOCK TABLE sign_in_events IN ACCESS EXCLUSIVE MODE").run()
                    lockTaken.yield()
                    for await _ in released { break }
                }
            }
            for await _ in locked { break }
            // The grant, raced against a bound: waiting on the lock would lose.
            let answered = try await withThrowingTaskGroup(of: Int?.self) { group in
                group.addTask { Int(try await driver.ropc(h, username: "unblocked@example.com", password: "Passw0rd!").status.code) }
                group.addTask {
                    try await Task.sleep(for: .seconds(10))
                    return nil
                }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            release.yield()
            try await holder.value
            #expect(answered == 200, "the grant answered while the log's table was locked")
            var query = SignInQuery()
            query.userID = user.objectID
            let records = try await h.server.service.signIns.log.events(tenantID: h.tenant.id, query)
            #expect(records.contains { $0.grantType == "password" && $0.errorCode == 0 }, "written behind the grant")
        }
    }

    @Test(
        "a hosted sign-in, a failed password, a code redemption and ROPC each leave one record with app, policy, user, result and steps; no password or code in any",
        arguments: TestDatabase.engines)
    func records(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser("logged@example.com", password: "Passw0rd!", name: "Logan")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_susi")
            let done = try await driver.signIn(h, attempt: attempt, email: "logged@example.com")
            let code = try #require(done.redirectParameters["code"], "\(done.status)")
            #expect(try await driver.redeem(h, attempt: attempt, code: code).status == .ok)
            #expect(try await driver.ropc(h, username: "logged@example.com", password: "Wrong-Pass1").status == .badRequest)
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let response = try await Self.list(driver, auth)
            #expect(response.status == .ok, "\(response.text)")
            let records = Self.values(response)
            // Newest first: the failed ROPC, the code redemption, the sign-in. (The Graph token's
            // client-credentials grant comes later still.)
            let signIn = try #require(
                records.first { ($0["isInteractive"] as? Bool) == true && $0["resourceDisplayName"] as? String == "B2C_1_susi" })
            #expect(signIn["userId"] as? String == user.objectID && signIn["appId"] as? String == h.clientID)
            #expect(signIn["userPrincipalName"] as? String == "logged@example.com" && signIn["userDisplayName"] as? String == "Logan")
            let signInStatus = try #require(signIn["status"] as? [String: Any])
            #expect(signInStatus["errorCode"] as? Int == 0)
            #expect((signInStatus["additionalDetails"] as? String)?.contains("signIn with B2C_1_susi; steps:") == true, "\(signInStatus)")
            let failed = try #require(records.first { ($0["status"] as? [String: Any])?["errorCode"] as? Int != 0 })
            #expect((failed["status"] as? [String: Any])?["errorCode"] as? Int == 90225, "\(failed)")
            #expect(failed["userId"] as? String == user.objectID, "a refused password is the account's record")
            #expect(((failed["status"] as? [String: Any])?["additionalDetails"] as? String)?.contains("grant_type password") == true)
            #expect(
                records.contains {
                    (($0["status"] as? [String: Any])?["additionalDetails"] as? String)?.contains("grant_type authorization_code") == true
                        && $0["userId"] as? String == user.objectID
                })
            #expect(!response.text.contains("Passw0rd!") && !response.text.contains("Wrong-Pass1") && !response.text.contains(code))
            // A request that names no app of the tenant leaves nothing: the log cannot be filled
            // (and real records pushed out) by anyone without a client id.
            let before = Self.values(try await Self.list(driver, auth, "?$top=1000")).count
            let stranger = try await driver.post(
                h.path("B2C_1_ROPC", "oauth2/v2.0/token"),
                [("grant_type", "password"), ("client_id", String(repeating: "x", count: 5_000)), ("username", "a"), ("password", "b")])
            #expect(stranger.status != .ok)
            let after = Self.values(try await Self.list(driver, auth, "?$top=1000"))
            #expect(after.count == before, "\(after.first ?? [:])")
            // One record by id.
            let id = try #require(signIn["id"] as? String)
            let one = try await driver.request(.get, "/v1.0/auditLogs/signIns/\(id)", headers: auth)
            #expect(one.status == .ok && one.json["correlationId"] as? String == signIn["correlationId"] as? String)
            #expect(try await driver.request(.get, "/v1.0/auditLogs/signIns/\(UUID())", headers: auth).status == .notFound)
        }
    }

    @Test("$filter by user, app, status and time, and $top pages with @odata.nextLink that never overlap")
    func filtersAndPages() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let user = try await h.addUser("pager@example.com")
            for _ in 0..<3 { #expect(try await driver.ropc(h, username: "pager@example.com", password: "Passw0rd!").status == .ok) }
            #expect(try await driver.ropc(h, username: "pager@example.com", password: "Nope-Pass1").status == .badRequest)
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            func filtered(_ filter: String, top: Int? = nil) async throws -> TestResponse {
                var query = "?$filter=" + (filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? filter)
                if let top { query += "&$top=\(top)" }
                return try await Self.list(driver, auth, query)
            }
            let mine = try await filtered("userId eq '\(user.objectID)'")
            #expect(Self.values(mine).count == 4, "\(mine.text)")
            let ok = try await filtered("userId eq '\(user.objectID)' and status/errorCode eq 0")
            #expect(Self.values(ok).count == 3)
            let app = try await filtered("appId eq '\(h.clientID)' and createdDateTime ge 2000-01-01T00:00:00Z")
            #expect(Self.values(app).count == 4)
            let future = try await filtered("createdDateTime gt 2999-01-01T00:00:00Z")
            #expect(future.status == .ok && Self.values(future).isEmpty)
            // Pages of one: four of them, each record once.
            var seen: [String] = []
            var next: String? =
                "/v1.0/auditLogs/signIns?$top=1&$filter="
                + ("userId eq '\(user.objectID)'".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            while let link = next, seen.count < 10 {
                let page = try await driver.request(.get, link.replacingOccurrences(of: IdentityHarness.origin, with: ""), headers: auth)
                #expect(page.status == .ok, "\(page.text)")
                seen += Self.values(page).compactMap { $0["id"] as? String }
                next = page.json["@odata.nextLink"] as? String
            }
            #expect(seen.count == 4 && Set(seen).count == 4)
            // Refusals in Graph's shape.
            for (bad, code) in [
                ("password eq 'x'", "Request_UnsupportedQuery"), ("userId eq", "BadRequest"),
                ("createdDateTime ge yesterday", "BadRequest"),
                (Array(repeating: "createdDateTime ge 2000-01-01T00:00:00Z", count: 13).joined(separator: " and "), "Request_BadRequest"),
                ("appId eq 'a' and appId eq 'b'", "Request_BadRequest"),
            ] {
                let refused = try await filtered(bad)
                #expect(refused.status == .badRequest, "\(bad): \(refused.text)")
                #expect((refused.json["error"] as? [String: Any])?["code"] as? String == code, "\(bad): \(refused.text)")
            }
            #expect(try await Self.list(driver, auth, "?$orderby=createdDateTime").status == .badRequest)
            #expect(try await Self.list(driver, auth, "?$skiptoken=bm9wZQ").status == .badRequest)
        }
    }

    @Test(
        "what a client sends is not kept as sent: an unknown grant type is 'unsupported', the reason printable and short; a refusal that is not of the password names no account"
    )
    func clientTextAndAttribution() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let user = try await h.addUser("named@example.com")
            let sent = "urn:\u{1}evil<script>" + String(repeating: "g", count: 2_000)
            let odd = try await driver.post(
                h.path("B2C_1_ROPC", "oauth2/v2.0/token"), [("grant_type", sent), ("client_id", h.clientID)])
            #expect(odd.status == .badRequest)
            // A public client that sends a secret is refused before any password is looked at.
            let secret = try await driver.post(
                h.path("B2C_1_ROPC", "oauth2/v2.0/token"),
                [
                    ("grant_type", "password"), ("client_id", h.clientID), ("client_secret", "s"), ("username", "named@example.com"),
                    ("password", "Passw0rd!"),
                ])
            #expect(secret.status != .ok)
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let records = Self.values(try await Self.list(driver, auth, "?$top=1000"))
            let statuses = records.compactMap { $0["status"] as? [String: Any] }
            let unsupported = try #require(
                statuses.first { ($0["additionalDetails"] as? String)?.contains("grant_type unsupported") == true })
            let reason = try #require(unsupported["failureReason"] as? String)
            #expect(reason.count <= 256 && !reason.unicodeScalars.contains { $0.value < 0x20 } && !reason.contains(sent), "\(reason)")
            #expect(!records.contains { ($0["status"] as? [String: Any])?["additionalDetails"] as? String == nil })
            let passwordRequests = records.filter {
                (($0["status"] as? [String: Any])?["additionalDetails"] as? String)?.contains("grant_type password") == true
            }
            #expect(passwordRequests.count == 1 && !passwordRequests.contains { $0["userId"] as? String == user.objectID })
        }
    }

    @Test(
        "records written together are batched without loss: 300 at once each stored exactly once, every caller answered",
        arguments: TestDatabase.engines)
    func concurrentRecords(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            try await IdentityMigrations.runner.run(on: database, logger: TestDatabase.logger)
            let tenant = Tenant(id: UUID(), name: "busy", displayName: "Busy", defaultPolicy: "B2C_1_susi")
            try await SQLTenantDirectory(database: database).save(tenant, now: Date())
            let log = SignInLog(database: database, retention: 3600)
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<300 {
                    group.addTask {
                        let event = SignInEvent(
                            tenantID: tenant.id, at: Date(), correlationID: "c\(index)", kind: .tokenGrant, appID: nil, appName: nil,
                            policy: nil, ipAddress: nil, interactive: false)
                        try await log.record(event)
                        return event.id
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            var query = SignInQuery()
            query.limit = 1000
            let stored = try await log.events(tenantID: tenant.id, query).map(\.id)
            #expect(ids.count == 300 && stored.count == 300 && Set(stored) == Set(ids))
        }
    }

    @Test("records are the tenant's own: another tenant's id finds none of them, by list or by id")
    func tenantScoped() async throws {
        try await TestDatabase.with(.sqlite) { database in
            try await IdentityMigrations.runner.run(on: database, logger: TestDatabase.logger)
            let directory = SQLTenantDirectory(database: database)
            let (mine, other) = (
                Tenant(id: UUID(), name: "mine", displayName: "Mine", defaultPolicy: "B2C_1_susi"),
                Tenant(id: UUID(), name: "other", displayName: "Other", defaultPolicy: "B2C_1_susi")
            )
            try await directory.save(mine, now: Date())
            try await directory.save(other, now: Date())
            let log = SignInLog(database: database, retention: 3600)
            let event = SignInEvent(
                tenantID: mine.id, at: Date(), correlationID: "c", kind: .signIn, appID: nil, appName: nil, policy: nil, ipAddress: nil,
                interactive: true)
            try await log.record(event)
            #expect(try await log.events(tenantID: mine.id, SignInQuery()).map(\.id) == [event.id])
            #expect(try await log.events(tenantID: other.id, SignInQuery()).isEmpty)
            #expect(try await log.event(tenantID: other.id, id: event.id) == nil)
        }
    }

    @Test("AuditLog.Read.All is required: a user-management token and no token are refused")
    func permission() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let users = try await GraphUsersTests.appToken(h, driver, roles: ["User.ReadWrite.All"])
            let refused = try await Self.list(driver, users)
            #expect(
                refused.status == .forbidden
                    && (refused.json["error"] as? [String: Any])?["code"] as? String == "Authorization_RequestDenied")
            #expect(try await Self.list(driver, [:]).status == .unauthorized)
        }
    }

    @Test("the log is bounded: past its row cap the oldest records go, and records past the retention are pruned")
    func bounded() async throws {
        try await TestDatabase.with(.sqlite) { database in
            try await IdentityMigrations.runner.run(on: database, logger: TestDatabase.logger)
            let tenant = Tenant(id: UUID(), name: "bounded", displayName: "Bounded", defaultPolicy: "B2C_1_susi")
            try await SQLTenantDirectory(database: database).save(tenant, now: Date())
            let log = SignInLog(database: database, retention: 3600, maximumRows: 5, pruneEvery: 1)
            let start = Date()
            for index in 0..<12 {
                try await log.record(
                    SignInEvent(
                        tenantID: tenant.id, at: start.addingTimeInterval(TimeInterval(index)), correlationID: "c\(index)", kind: .signIn,
                        appID: nil, appName: nil, policy: "B2C_1_susi", ipAddress: "127.0.0.1", interactive: true))
            }
            var query = SignInQuery()
            query.limit = 100
            let kept = try await log.events(tenantID: tenant.id, query)
            #expect(kept.map(\.correlationID) == ["c11", "c10", "c9", "c8", "c7"])
            try await log.prune(tenantID: tenant.id, now: start.addingTimeInterval(3600 + 9.5))
            #expect(try await log.events(tenantID: tenant.id, query).map(\.correlationID) == ["c11", "c10"])
        }
    }
}
