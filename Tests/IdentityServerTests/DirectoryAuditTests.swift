import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing
import WireCoding

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// The audit log (SPEC §2.13): one record per admin change, whoever makes it (a Graph app, the
/// command line), and B2C's token-issuance records seen through the sign-in log, read through
/// Graph's `auditLogs/directoryAudits` with `AuditLog.Read.All`.
@Suite("Audit log and Graph auditLogs/directoryAudits")
struct DirectoryAuditTests {
    static func list(_ driver: Driver, _ auth: HTTPFields, _ query: String = "") async throws -> TestResponse {
        try await driver.request(.get, "/v1.0/auditLogs/directoryAudits" + query, headers: auth)
    }

    static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text }

    static func values(_ response: TestResponse) -> [[String: Any]] { response.json["value"] as? [[String: Any]] ?? [] }

    static func named(_ records: [[String: Any]], _ activity: String) -> [[String: Any]] {
        records.filter { $0["activityDisplayName"] as? String == activity }
    }

    static func target(_ record: [String: Any]) -> [String: Any] { (record["targetResources"] as? [[String: Any]])?.first ?? [:] }

    static func app(_ record: [String: Any]) -> [String: Any] { (record["initiatedBy"] as? [String: Any])?["app"] as? [String: Any] ?? [:] }

    @Test(
        "a Graph app's user changes are recorded as made by that app, with the request's correlation id, the target and what changed; a refusal is recorded as a failure; no password or secret in any",
        arguments: TestDatabase.engines)
    func graphChanges(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let writer = try await GraphUsersTests.appToken(h, driver, roles: ["User.ReadWrite.All"])
            let writerID = try #require(DecodedJWT(String(writer[.authorization]!.dropFirst(7))).claims["azp"] as? String)
            let correlation = UUID().uuidString.lowercased()
            var headers = GraphUsersTests.json("", writer)
            headers[HTTPField.Name("client-request-id")!] = correlation
            let created = try await driver.request(
                .post, "/v1.0/users", headers: headers, body: GraphUsersTests.newUser(h, email: "audited@example.com"))
            #expect(created.status == .created, "\(created.text)")
            let oid = try #require(created.json["id"] as? String)
            let patched = try await driver.request(
                .patch, "/v1.0/users/\(oid)", headers: GraphUsersTests.json("", writer),
                body: #"{"accountEnabled":false,"passwordProfile":{"password":"Changed-Pass9","forceChangePasswordNextSignIn":false}}"#)
            #expect(patched.status == .noContent, "\(patched.text)")
            let weak = try await driver.request(
                .post, "/v1.0/users", headers: GraphUsersTests.json("", writer),
                body: GraphUsersTests.newUser(h, email: "weak@example.com", password: "short"))
            #expect(weak.status == .badRequest)
            #expect(try await driver.request(.delete, "/v1.0/users/\(oid)", headers: writer).status == .noContent)

            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let response = try await Self.list(driver, reader, "?$filter=" + Self.escape("category eq 'UserManagement'"))
            #expect(response.status == .ok, "\(response.text)")
            let records = Self.values(response)
            let added = try #require(Self.named(records, "Add user").first { $0["result"] as? String == "success" })
            #expect(added["correlationId"] as? String == correlation && added["loggedByService"] as? String == "Core Directory")
            #expect(Self.app(added)["appId"] as? String == writerID && Self.app(added)["displayName"] as? String == "Daemon")
            #expect(Self.target(added)["id"] as? String == oid && Self.target(added)["userPrincipalName"] as? String == "audited@example.com")
            #expect(Self.target(added)["type"] as? String == "User" && added["operationType"] as? String == "Add")
            let updated = try #require(Self.named(records, "Update user").first)
            let modified = try #require(Self.target(updated)["modifiedProperties"] as? [[String: Any]])
            #expect(modified.first { $0["displayName"] as? String == "AccountEnabled" }?["newValue"] as? String == #"["false"]"#)
            #expect(modified.contains { $0["displayName"] as? String == "PasswordProfile" && $0["newValue"] is NSNull })
            let refused = try #require(Self.named(records, "Add user").first { $0["result"] as? String == "failure" }, "\(records)")
            #expect((refused["resultReason"] as? String)?.isEmpty == false)
            #expect(Self.named(records, "Delete user").first.map { Self.target($0)["id"] as? String } == oid)
            // Newest first.
            let times = records.compactMap { $0["activityDateTime"] as? String }
            #expect(times == times.sorted(by: >))
            for secret in ["Graph-Pass1", "Changed-Pass9", "short", "daemon-secret"] {
                #expect(!response.text.contains(secret), "\(secret) in the audit log")
            }
        }
    }

    @Test("admin commands are recorded as the command line's; a secret's record names no secret; keys and policies are B2C's Key and Resource")
    func commandLineAndKeys() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let admin = h.server.administration
            var draft = IdentityAdministration.NewApplication(name: "Console", kind: .confidential)
            draft.redirectURIs = ["https://console.example/cb"]
            let (app, secret) = try await admin.register(draft, tenantID: h.tenant.id)
            let keyWriter = try await GraphUsersTests.appToken(h, driver, roles: ["TrustFrameworkKeySet.ReadWrite.All"])
            let set = try await driver.request(.post, "/beta/trustFramework/keySets", headers: GraphUsersTests.json("", keyWriter), body: #"{"id":"AuditedKeys"}"#)
            #expect(set.status == .created, "\(set.text)")
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let response = try await Self.list(driver, reader, "?$top=1000")
            let records = Self.values(response)
            let added = try #require(Self.named(records, "Add application").first)
            #expect(Self.app(added)["displayName"] as? String == "todo-server" && Self.app(added)["appId"] is NSNull)
            #expect(Self.target(added)["id"] as? String == app.clientIDString && added["category"] as? String == "ApplicationManagement")
            #expect(!Self.named(records, "Update application – Certificates and secrets management").isEmpty)
            #expect(!response.text.contains(try #require(secret)))
            let keySet = try #require(Self.named(records, "Create key container").first)
            #expect(Self.target(keySet)["id"] as? String == "B2C_1A_AuditedKeys")
            #expect(keySet["category"] as? String == "Key" && keySet["loggedByService"] as? String == "B2C")
            // The Graph tokens' own permissions, granted at the command line, are consents.
            #expect(Self.named(records, "Consent to application").count == 2)
        }
    }

    @Test(
        "a change and its record commit together: when the record cannot be written, the change is not stored and fails; a refusal is still recorded",
        arguments: TestDatabase.engines)
    func changeAndRecordTogether(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, _ in
            let admin = h.server.administration
            // The audit table refuses new rows (as a restart between two transactions would have
            // lost the record): the whole change must go with it (issue 51, F4).
            try await h.database.transaction { sql in try await sql.raw("ALTER TABLE directory_audits RENAME TO directory_audits_away").run() }
            await #expect(throws: (any Error).self) {
                _ = try await admin.createLocalUser(tenantID: h.tenant.id, email: "unrecorded@example.com", displayName: "U", password: "Passw0rd!")
            }
            #expect(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "unrecorded@example.com") == nil)
            await #expect(throws: (any Error).self) { _ = try await admin.rotateSigningKey() }
            #expect(try await admin.signingKeys().count == 1)
            try await h.database.transaction { sql in try await sql.raw("ALTER TABLE directory_audits_away RENAME TO directory_audits").run() }

            let user = try await admin.createLocalUser(tenantID: h.tenant.id, email: "recorded@example.com", displayName: "R", password: "Passw0rd!")
            await #expect(throws: IdentityAdministration.AdministrationError.self) {
                _ = try await admin.createLocalUser(tenantID: h.tenant.id, email: "recorded@example.com", displayName: "R", password: "Passw0rd!")
            }
            let records = try await h.server.service.directoryAudits.audits(tenantID: h.tenant.id, DirectoryAuditQuery())
            let adds = records.filter { $0.activity == .addUser }
            #expect(adds.count == 2)
            #expect(adds.contains { $0.failureReason == nil && $0.target?.id == user.objectID })
            #expect(adds.contains { $0.failureReason != nil })
        }
    }

    @Test("a multi-file policy upload refused for one file stores none, and its refusal is recorded (outside the rolled-back upload)", arguments: TestDatabase.engines)
    func refusedUploadRecorded(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, _ in
            try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            let files = try PolicyFixtures.localAccounts() + [Data(PolicyFixtures.relyingParty(id: "B2C_1A_broken", base: "B2C_1A_LocalBase", journey: "Nowhere").utf8)]
            await #expect(throws: PolicyRejection.self) { try await h.server.administration.uploadCustomPolicies(files, tenant: h.tenant) }
            #expect(try await h.server.administration.customPolicies(tenantID: h.tenant.id).isEmpty)
            let records = try await h.server.service.directoryAudits.audits(tenantID: h.tenant.id, DirectoryAuditQuery())
            #expect(records.contains { $0.activity == .uploadPolicy && $0.failureReason?.contains("Nowhere") == true }, "\(records.map(\.activity.displayName))")
        }
    }

    @Test(
        "a sign-in shows as B2C's Authentication record with TenantId, PolicyId and ApplicationId, initiated by the app, about the user",
        arguments: TestDatabase.engines)
    func authentication(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser("journey@example.com")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_susi")
            let done = try await driver.signIn(h, attempt: attempt, email: "journey@example.com")
            #expect(done.redirectParameters["code"] != nil)
            #expect(try await driver.ropc(h, username: "journey@example.com", password: "Wrong-Pass1").status == .badRequest)
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let response = try await Self.list(driver, reader, "?$filter=" + Self.escape("category eq 'Authentication'"))
            #expect(response.status == .ok, "\(response.text)")
            let records = Self.values(response)
            #expect(records.allSatisfy { $0["category"] as? String == "Authentication" && $0["loggedByService"] as? String == "B2C" })
            let issued = try #require(Self.named(records, "Issue an authorization code to the application").first, "\(records)")
            let details = Dictionary(
                uniqueKeysWithValues: (issued["additionalDetails"] as? [[String: String]] ?? []).compactMap { pair in
                    pair["key"].map { ($0, pair["value"] ?? "") }
                })
            #expect(details["PolicyId"] == "B2C_1_susi" && details["ApplicationId"] == h.clientID && details["TenantId"] == h.tenant.name)
            #expect(Self.app(issued)["appId"] as? String == h.clientID && Self.target(issued)["id"] as? String == user.objectID)
            let refused = try #require(Self.named(records, "Validate user credentials").first)
            #expect(refused["result"] as? String == "failure")
            // The same record by id, and the other categories hold none of them.
            let id = try #require(issued["id"] as? String)
            let one = try await driver.request(.get, "/v1.0/auditLogs/directoryAudits/\(id)", headers: reader)
            #expect(one.status == .ok && one.json["activityDisplayName"] as? String == "Issue an authorization code to the application")
            let others = Self.values(
                try await Self.list(driver, reader, "?$filter=" + Self.escape("category eq 'UserManagement'")))
            #expect(!others.contains { $0["category"] as? String == "Authentication" })
            let byUser = Self.values(
                try await Self.list(driver, reader, "?$filter=" + Self.escape("targetResources/any(t:t/id eq '\(user.objectID)')")))
            #expect(!byUser.isEmpty && byUser.allSatisfy { Self.target($0)["id"] as? String == user.objectID })
        }
    }

    @Test("both logs page together: $top pages through @odata.nextLink cover the unpaged list exactly, in order; filters narrow it")
    func pagesAndFilters() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            for index in 0..<3 {
                _ = try await h.addUser("paged\(index)@example.com")
                #expect(try await driver.ropc(h, username: "paged\(index)@example.com", password: "Passw0rd!").status == .ok)
            }
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let everything = Self.values(try await Self.list(driver, reader, "?$top=1000")).compactMap { $0["id"] as? String }
            #expect(everything.count == 8, "3 users, 3 password grants, the reader's consent and its token")
            var paged: [String] = []
            var next: String? = "/v1.0/auditLogs/directoryAudits?$top=2"
            while let link = next, paged.count < 100 {
                let page = try await driver.request(.get, link, headers: reader)
                #expect(page.status == .ok, "\(page.text)")
                let ids = Self.values(page).compactMap { $0["id"] as? String }
                #expect(ids.count <= 2)
                paged += ids
                next = page.json["@odata.nextLink"] as? String
            }
            #expect(paged == everything)
            func filtered(_ filter: String) async throws -> TestResponse {
                try await Self.list(driver, reader, "?$filter=" + Self.escape(filter))
            }
            #expect(Self.values(try await filtered("activityDateTime ge 2999-01-01T00:00:00Z")).isEmpty)
            let adds = Self.values(try await filtered("activityDisplayName eq 'Add user' and result eq 'success'"))
            #expect(adds.count == 3 && adds.allSatisfy { $0["activityDisplayName"] as? String == "Add user" })
            let tokens = Self.values(try await filtered("loggedByService eq 'B2C' and activityDisplayName eq 'Validate user credentials'"))
            #expect(tokens.count == 3)
            // Refusals in Graph's shape.
            for (filter, code) in [
                ("result eq 'maybe'", "BadRequest"), ("displayName eq 'x'", "Request_UnsupportedQuery"),
                ("category eq 'A' and category eq 'B'", "Request_BadRequest"), ("targetResources/any(t:t/name eq 'x')", "Request_UnsupportedQuery"),
            ] {
                let refused = try await filtered(filter)
                #expect(refused.status == .badRequest && (refused.json["error"] as? [String: Any])?["code"] as? String == code, "\(filter)")
            }
            let signInToken = Base64URL.encode(Data("signIns:1:\(UUID())".utf8))
            #expect(try await Self.list(driver, reader, "?$skiptoken=\(signInToken)").status == .badRequest)
            #expect(try await Self.list(driver, reader, "?$orderby=activityDateTime").status == .badRequest)
        }
    }

    @Test("AuditLog.Read.All is required, and records are the tenant's own")
    func permissionAndTenant() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let users = try await GraphUsersTests.appToken(h, driver, roles: ["User.ReadWrite.All"])
            let refused = try await Self.list(driver, users)
            #expect(refused.status == .forbidden && (refused.json["error"] as? [String: Any])?["code"] as? String == "Authorization_RequestDenied")
            #expect(try await Self.list(driver, [:]).status == .unauthorized)
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let consents = try await Self.list(driver, reader, "?$filter=" + Self.escape("category eq 'ApplicationManagement'"))
            let mine = try #require(Self.values(consents).first?["id"] as? String)
            #expect(try await h.server.service.directoryAudits.audit(tenantID: h.tenant.id, id: mine) != nil)
            #expect(try await h.server.service.directoryAudits.audit(tenantID: UUID(), id: mine) == nil)
        }
    }

    @Test(
        "a delete that deletes nothing is no record; a refused change's text is capped; records past the retention are gone from the answer before any prune"
    )
    func nothingFalseNothingHuge() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let keys = try await GraphUsersTests.appToken(h, driver, roles: ["TrustFrameworkKeySet.ReadWrite.All"])
            #expect(try await driver.request(.delete, "/beta/trustFramework/keySets/B2C_1A_Nothing", headers: keys).status == .notFound)
            let huge = String(repeating: "k", count: 5_000)
            let refused = try await driver.request(
                .post, "/beta/trustFramework/keySets", headers: GraphUsersTests.json("", keys), body: #"{"id":"\#(huge)"}"#)
            #expect(refused.status == .badRequest, "\(refused.text)")
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let records = Self.values(try await Self.list(driver, reader, "?$filter=" + Self.escape("category eq 'Key'")))
            #expect(Self.named(records, "Delete key container").isEmpty, "\(records)")
            let failed = try #require(Self.named(records, "Create key container").first, "\(records)")
            #expect(failed["result"] as? String == "failure")
            #expect((Self.target(failed)["id"] as? String)?.count ?? .max <= 256 && (failed["resultReason"] as? String)?.count ?? .max <= 256)
            // Eight days on, with the default 7-day retention: none of them is shown, by list or by id.
            let id = try #require(failed["id"] as? String)
            h.clock.advance(by: 8 * 86_400)
            let later = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let remaining = Self.values(try await Self.list(driver, later, "?$top=1000"))
            #expect(!remaining.contains { $0["id"] as? String == id })
            #expect(try await driver.request(.get, "/v1.0/auditLogs/directoryAudits/\(id)", headers: later).status == .notFound)
            // The sign-in log likewise: only the new token's own grant is left.
            let signIns = SignInLogTests.values(try await SignInLogTests.list(driver, later, "?$top=1000"))
            #expect(signIns.count == 1, "\(signIns)")
        }
    }

    @Test("the audit log is bounded like the sign-in log: a row cap per tenant and the retention")
    func bounded() async throws {
        try await TestDatabase.with(.sqlite) { database in
            try await IdentityMigrations.runner.run(on: database, logger: TestDatabase.logger)
            let tenant = Tenant(id: UUID(), name: "bounded", displayName: "Bounded", defaultPolicy: "B2C_1_susi")
            try await SQLTenantDirectory(database: database).save(tenant, now: Date())
            let log = DirectoryAuditLog(database: database, retention: 3600, maximumRows: 4, pruneEvery: 1)
            let start = Date()
            for index in 0..<9 {
                try await log.record(
                    DirectoryAudit(
                        tenantID: tenant.id, at: start.addingTimeInterval(TimeInterval(index)), activity: .addUser,
                        initiator: AuditInitiator(actor: .commandLine("test"), correlationID: "c\(index)"), target: nil))
            }
            var query = DirectoryAuditQuery()
            query.limit = 100
            #expect(try await log.audits(tenantID: tenant.id, query).map(\.initiator.correlationID) == ["c8", "c7", "c6", "c5"])
            try await log.prune(tenantID: tenant.id, now: start.addingTimeInterval(3600 + 7.5))
            #expect(try await log.audits(tenantID: tenant.id, query).map(\.initiator.correlationID) == ["c8"])
        }
    }
}
