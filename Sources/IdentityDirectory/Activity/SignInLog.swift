import Foundation
import SQLKit
import Storage
import Synchronization
import WireCoding

/// One sign-in, sign-up, reset, profile edit or token grant (SPEC §2.13), as Graph's
/// `auditLogs/signIns` shows it. Nothing secret is kept: no password, code or token; the user's
/// email only as the record's own user's name.
public struct SignInEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case signIn, signUp, passwordReset, profileEdit, tokenGrant
    }

    public var id: String
    public var tenantID: UUID
    public var at: Date
    public var correlationID: String
    public var kind: Kind
    public var appID: String?
    public var appName: String?
    public var policy: String?
    public var userID: UUID?
    public var userPrincipalName: String?
    public var userDisplayName: String?
    public var ipAddress: String?
    /// 0 for success, else the number of the `AADB2C` or `AADSTS` code it ended with.
    public var errorCode: Int
    public var failureReason: String?
    public var grantType: String?
    public var interactive: Bool
    /// Each step the journey ran and its result ("LocalAccountSignIn: succeeded"), no values.
    public var steps: [String]

    package init(
        tenantID: UUID, at: Date, correlationID: String, kind: Kind, appID: String?, appName: String?, policy: String?,
        userID: UUID? = nil, userPrincipalName: String? = nil, userDisplayName: String? = nil, ipAddress: String?,
        errorCode: Int = 0, failureReason: String? = nil, grantType: String? = nil, interactive: Bool, steps: [String] = []
    ) {
        self.id = Secrets.randomUUIDString()
        self.tenantID = tenantID
        self.at = at
        self.correlationID = correlationID
        self.kind = kind
        self.appID = appID
        self.appName = appName
        self.policy = policy
        self.userID = userID
        self.userPrincipalName = userPrincipalName
        self.userDisplayName = userDisplayName
        self.ipAddress = ipAddress
        self.errorCode = errorCode
        self.failureReason = failureReason
        self.grantType = grantType
        self.interactive = interactive
        self.steps = steps
    }

    /// The number of an error code such as `AADB2C90118` or `AADSTS50126` (0 when none is in it).
    package static func number(ofCode text: String) -> Int {
        // The trailing digits: "AADB2C" has a digit of its own.
        let digits = String(text.reversed().prefix { $0.isNumber }.reversed())
        return Int(digits.suffix(9)) ?? 0
    }
}

/// A search of the sign-in log: the conditions Graph's `$filter` can express, ANDed; newest
/// first, ``limit`` at a time from ``cursor``.
package struct SignInQuery: Sendable, Equatable {
    /// Milliseconds since 1970; `createdAt > after` and `createdAt < before`.
    package var after: Int64?
    package var before: Int64?
    package var appID: String?
    package var userID: String?
    package var userPrincipalName: String?
    package var errorCode: Int?
    package var correlationID: String?
    package var limit = 100
    /// Only successes (`true`) or only failures (`false`).
    package var succeeded: Bool?
    /// Only the records B2C's audit log shows as this activity (``DirectoryAudit/init(authentication:tenantName:)``).
    package var activity: AuditActivity?
    /// The last row of the previous page (its time and id).
    package var cursor: ActivityCursor?

    package init() {}
}

/// Where a newest-first page of a log ends: its last row's time and id. Both logs order by
/// (time, id), so one cursor pages through either, or through both merged.
package struct ActivityCursor: Sendable, Equatable {
    package var createdAt: Int64
    package var id: String

    package init(createdAt: Int64, id: String) {
        self.createdAt = createdAt
        self.id = id
    }
}

/// The sign-in log's table. Rows are written in batches (``SignInBatches``); every
/// ``pruneEvery`` writes, rows older than the retention (B2C keeps 7 days) or beyond the
/// tenant's newest ``maximumRows`` are removed, so a flood of sign-ins cannot grow it without
/// bound.
package struct SignInLog: Sendable {
    let database: any Database
    let retention: TimeInterval
    let maximumRows: Int
    let pruneEvery: Int
    private let writes = WriteCounter()
    private let batches = SignInBatches()

    package init(database: any Database, retention: TimeInterval, maximumRows: Int = 100_000, pruneEvery: Int = 256) {
        self.database = database
        self.retention = retention
        self.maximumRows = maximumRows
        self.pruneEvery = pruneEvery
    }

    /// Hands `event` to the writer, which writes it with the others that arrive meanwhile, behind
    /// the caller (``SignInBatches``): false when the queue was full and it was dropped.
    @discardableResult
    package func record(_ event: SignInEvent) -> Bool {
        batches.add(event) { [self] batch in try await write(batch) }
    }

    /// Returns once every record handed over so far is written or dropped (reads, and shutdown).
    package func flushed() async { await batches.flushed() }

    private func write(_ batch: [SignInEvent]) async throws {
        let rows = try batch.map { event -> [any SQLExpression] in
            let steps = String(decoding: try JSONEncoder().encode(event.steps), as: UTF8.self)
            let values: [any Encodable & Sendable] = [
                event.id, event.tenantID.uuidString.lowercased(), event.at.epochMilliseconds, event.correlationID, event.kind.rawValue,
                event.appID?.lowercased(), event.appName, event.policy, event.userID?.uuidString.lowercased(), event.userPrincipalName,
                event.userDisplayName, event.ipAddress, Int64(event.errorCode), event.failureReason, event.grantType,
                Int64(event.interactive ? 1 : 0), steps,
            ]
            return values.map { SQLBind($0) }
        }
        try await database.singleStatement { sql in
            var insert = sql.insert(into: "sign_in_events").columns(Self.columns)
            for row in rows { insert = insert.values(row) }
            try await insert.run()
        }
        // On this process's first write, and every `pruneEvery` rows after, the tenants of the batch are pruned.
        let (before, after) = writes.add(batch.count)
        guard before == 0 || before / pruneEvery != after / pruneEvery, let newest = batch.map(\.at).max() else { return }
        for tenantID in Set(batch.map(\.tenantID)) { try await prune(tenantID: tenantID, now: newest) }
    }

    /// The oldest time (ms) a read shows: rows past the retention are gone from every answer even
    /// before a prune removes them.
    package func oldestKept(now: Date) -> Int64 { now.addingTimeInterval(-retention).epochMilliseconds - 1 }

    /// Removes the rows past the retention, and the tenant's rows beyond its newest ``maximumRows``.
    package func prune(tenantID: UUID, now: Date) async throws {
        try await ActivityRetention(database: database, retention: retention, maximumRows: maximumRows)
            .prune(.signIns, tenantID: tenantID, now: now)
    }

    /// The tenant's events matching `query`, newest first.
    package func events(tenantID: UUID, _ query: SignInQuery) async throws -> [SignInEvent] {
        await flushed()
        var search = ActivitySearch(.signIns, tenantID: tenantID, after: query.after, before: query.before)
        if let app = query.appID { search.add("app_id = ?", .text(app.lowercased())) }
        if let user = query.userID { search.add("user_id = ?", .text(user.lowercased())) }
        if let name = query.userPrincipalName { search.add("LOWER(user_principal_name) = ?", .text(name.lowercased())) }
        if let code = query.errorCode { search.add("error_code = ?", .integer(Int64(code))) }
        if let correlation = query.correlationID { search.add("correlation_id = ?", .text(correlation.lowercased())) }
        if let succeeded = query.succeeded { search.add(succeeded ? "error_code = 0" : "error_code <> 0") }
        switch query.activity {
        case .issueCode?: search.add("kind <> 'tokenGrant'")
        case .validateCredentials?: search.add("kind = 'tokenGrant' AND grant_type = 'password'")
        case .issueAccessToken?: search.add("kind = 'tokenGrant' AND grant_type = 'client_credentials'")
        case .issueIDToken?: search.add("kind = 'tokenGrant' AND (grant_type IS NULL OR grant_type NOT IN ('password', 'client_credentials'))")
        case nil: break
        case _?: return []  // no sign-in record is any other activity
        }
        return try await search.rows(database, after: query.cursor, limit: query.limit).map(Self.event(from:))
    }

    package func event(tenantID: UUID, id: String) async throws -> SignInEvent? {
        await flushed()
        return try await database.rows(
            "SELECT * FROM sign_in_events WHERE tenant_id = ? AND id = ?",
            [.text(tenantID.uuidString.lowercased()), .text(id.lowercased())]
        ).first.map(Self.event(from:))
    }

    static let columns = [
        "id", "tenant_id", "created_at", "correlation_id", "kind", "app_id", "app_name", "policy", "user_id", "user_principal_name",
        "user_display_name", "ip_address", "error_code", "failure_reason", "grant_type", "interactive", "steps",
    ]

    private static func event(from row: StoredRow) throws -> SignInEvent {
        var event = SignInEvent(
            tenantID: UUID(uuidString: try row.text("tenant_id")) ?? UUID(),
            at: Date(timeIntervalSince1970: TimeInterval(try row.integer("created_at")) / 1000),
            correlationID: try row.text("correlation_id"), kind: SignInEvent.Kind(rawValue: try row.text("kind")) ?? .signIn,
            appID: try row.optionalText("app_id"), appName: try row.optionalText("app_name"), policy: try row.optionalText("policy"),
            userID: try row.optionalText("user_id").flatMap(UUID.init(uuidString:)),
            userPrincipalName: try row.optionalText("user_principal_name"), userDisplayName: try row.optionalText("user_display_name"),
            ipAddress: try row.optionalText("ip_address"), errorCode: Int(try row.integer("error_code")),
            failureReason: try row.optionalText("failure_reason"), grantType: try row.optionalText("grant_type"),
            interactive: try row.integer("interactive") != 0,
            steps: (try? JSONDecoder().decode([String].self, from: Data(try row.text("steps").utf8))) ?? [])
        event.id = try row.text("id")
        return event
    }
}

/// A newest-first page of one of the logs, its conditions ANDed: the time bounds, the keyset
/// cursor and the limit every log search has, and the log's own conditions between.
struct ActivitySearch {
    private(set) var sql: String
    private(set) var binds: [StoredValue]

    init(_ table: ActivityRetention.Table, tenantID: UUID, after: Int64?, before: Int64?) {
        sql = "SELECT * FROM \(table.rawValue) WHERE tenant_id = ?"
        binds = [.text(tenantID.uuidString.lowercased())]
        if let after { add("created_at > ?", .integer(after)) }
        if let before { add("created_at < ?", .integer(before)) }
    }

    /// `condition` with its one `?` bound to `value`.
    mutating func add(_ condition: String, _ value: StoredValue) {
        sql += " AND (" + condition + ")"
        binds.append(value)
    }

    /// A condition with nothing bound (a fixed text of this module's, never input).
    mutating func add(_ condition: String) { sql += " AND (" + condition + ")" }

    /// The statement's rows: after `cursor`, at most `limit`, newest first.
    func rows(_ database: any Database, after cursor: ActivityCursor?, limit: Int) async throws -> [StoredRow] {
        var search = self
        if let cursor {
            search.sql += " AND (created_at < ? OR (created_at = ? AND id < ?))"
            search.binds += [.integer(cursor.createdAt), .integer(cursor.createdAt), .text(cursor.id)]
        }
        search.sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        search.binds.append(.integer(Int64(limit)))
        return try await database.rows(search.sql, search.binds)
    }
}

/// How long a log keeps its rows, and how many per tenant (B2C keeps audit logs 7 days).
struct ActivityRetention: Sendable {
    let database: any Database
    let retention: TimeInterval
    let maximumRows: Int

    static let pruneBatch = 5_000

    enum Table: String {
        case signIns = "sign_in_events"
        case directoryAudits = "directory_audits"
    }

    /// Removes `table`'s rows past the retention, and the tenant's rows beyond its newest
    /// ``maximumRows``. At most a batch of old rows per prune, so no request waits on a long
    /// delete (the next prune takes more).
    func prune(_ log: Table, tenantID: UUID, now: Date) async throws {
        let table = log.rawValue
        let oldest = now.addingTimeInterval(-retention).epochMilliseconds
        let tenant = tenantID.uuidString.lowercased()
        try await database.singleStatement { sql in
            try await sql.raw(
                """
                DELETE FROM \(unsafeRaw: table) WHERE id IN (
                    SELECT id FROM \(unsafeRaw: table) WHERE created_at < \(bind: oldest) LIMIT \(bind: Self.pruneBatch))
                """
            ).run()
        }
        try await database.singleStatement { sql in
            try await sql.raw(
                """
                DELETE FROM \(unsafeRaw: table) WHERE tenant_id = \(bind: tenant) AND created_at < (
                    SELECT created_at FROM \(unsafeRaw: table) WHERE tenant_id = \(bind: tenant)
                    ORDER BY created_at DESC LIMIT 1 OFFSET \(bind: maximumRows - 1))
                """
            ).run()
        }
    }
}

/// Rows written by this process, to prune now and then rather than on every write.
final class WriteCounter: Sendable {
    private let count = Atomic<Int>(0)

    /// Adds `rows`; the count before and after.
    func add(_ rows: Int) -> (before: Int, after: Int) {
        let after = count.add(rows, ordering: .relaxed).newValue
        return (after - rows, after)
    }
}
