import Foundation
import SQLKit
import Storage
import WireCoding

/// A search of the audit log: the conditions Graph's `$filter` can express on
/// `directoryAudits`, ANDed; newest first, ``limit`` at a time from ``cursor``.
package struct DirectoryAuditQuery: Sendable, Equatable {
    /// Milliseconds since 1970; `activityDateTime > after` and `< before`.
    package var after: Int64?
    package var before: Int64?
    package var category: String?
    package var activityDisplayName: String?
    package var loggedByService: String?
    package var correlationID: String?
    package var succeeded: Bool?
    package var initiatorAppID: String?
    package var initiatorUserID: String?
    package var targetID: String?
    package var limit = 100
    package var cursor: ActivityCursor?

    package init() {}

    /// The same search over the sign-in log, for the token issuances B2C's audit log shows
    /// (category `Authentication`, logged by `B2C`, initiated by an app, about a user); nil
    /// when no such record could match.
    package var authentication: SignInQuery? {
        if let category, category.lowercased() != "authentication" { return nil }
        if let loggedByService, loggedByService.lowercased() != "b2c" { return nil }
        if initiatorUserID != nil { return nil }
        var query = SignInQuery()
        if let name = activityDisplayName {
            guard let activity = AuditActivity.tokenIssuance.first(where: { $0.displayName.lowercased() == name.lowercased() }) else { return nil }
            query.activity = activity
        }
        query.after = after
        query.before = before
        query.correlationID = correlationID
        query.succeeded = succeeded
        query.appID = initiatorAppID
        query.userID = targetID
        query.limit = limit
        query.cursor = cursor
        return query
    }
}

/// The audit log's table: one row per admin change (SPEC §2.13), written by
/// ``IdentityAdministration`` as each change is made, kept as long as the sign-in log.
package struct DirectoryAuditLog: Sendable {
    let database: any Database
    let retention: ActivityRetention
    let pruneEvery: Int
    private let writes = WriteCounter()

    package init(database: any Database, retention: TimeInterval, maximumRows: Int = 100_000, pruneEvery: Int = 64) {
        self.database = database
        self.retention = ActivityRetention(database: database, retention: retention, maximumRows: maximumRows)
        self.pruneEvery = pruneEvery
    }

    package func record(_ audit: DirectoryAudit) async throws {
        let (kind, initiatorID, name, principal): (String, String?, String?, String?) =
            switch audit.initiator.actor {
            case .application(let appID, let displayName): ("app", appID.lowercased(), displayName, nil)
            case .user(let id, let userPrincipalName, let displayName): ("user", id.uuidString.lowercased(), displayName, userPrincipalName)
            case .commandLine(let command): ("command", nil, command, nil)
            }
        let target = try audit.target.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        let details = String(decoding: try JSONEncoder().encode(audit.details.map { [$0.key, $0.value] }), as: UTF8.self)
        let values: [any Encodable & Sendable] = [
            audit.id, audit.tenantID.uuidString.lowercased(), audit.at.epochMilliseconds, audit.initiator.correlationID.lowercased(),
            audit.activity.displayName, audit.activity.category, audit.activity.operationType, audit.activity.loggedByService, kind,
            initiatorID, name, principal, audit.initiator.ipAddress, audit.target?.id?.lowercased(), target, audit.failureReason, details,
        ]
        try await database.singleStatement { sql in
            try await sql.insert(into: "directory_audits").columns(Self.columns).values(values.map { SQLBind($0) }).run()
        }
        // On this process's first write, and every `pruneEvery` after (admin changes are rare).
        let (before, after) = writes.add(1)
        if before == 0 || before / pruneEvery != after / pruneEvery { try await prune(tenantID: audit.tenantID, now: audit.at) }
    }

    /// The oldest time (ms) a read shows (``SignInLog/oldestKept(now:)``).
    package func oldestKept(now: Date) -> Int64 { now.addingTimeInterval(-retention.retention).epochMilliseconds - 1 }

    package func prune(tenantID: UUID, now: Date) async throws {
        try await retention.prune(.directoryAudits, tenantID: tenantID, now: now)
    }

    /// The tenant's admin changes matching `query`, newest first.
    package func audits(tenantID: UUID, _ query: DirectoryAuditQuery) async throws -> [DirectoryAudit] {
        var search = ActivitySearch(.directoryAudits, tenantID: tenantID, after: query.after, before: query.before)
        if let category = query.category { search.add("LOWER(category) = ?", .text(category.lowercased())) }
        if let activity = query.activityDisplayName { search.add("LOWER(activity) = ?", .text(activity.lowercased())) }
        if let service = query.loggedByService { search.add("LOWER(logged_by) = ?", .text(service.lowercased())) }
        if let correlation = query.correlationID { search.add("correlation_id = ?", .text(correlation.lowercased())) }
        if let succeeded = query.succeeded { search.add(succeeded ? "failure_reason IS NULL" : "failure_reason IS NOT NULL") }
        if let app = query.initiatorAppID { search.add("initiator_kind = 'app' AND initiator_id = ?", .text(app.lowercased())) }
        if let user = query.initiatorUserID { search.add("initiator_kind = 'user' AND initiator_id = ?", .text(user.lowercased())) }
        if let target = query.targetID { search.add("target_id = ?", .text(target.lowercased())) }
        return try await search.rows(database, after: query.cursor, limit: query.limit).map(Self.audit(from:))
    }

    package func audit(tenantID: UUID, id: String) async throws -> DirectoryAudit? {
        try await database.rows(
            "SELECT * FROM directory_audits WHERE tenant_id = ? AND id = ?", [.text(tenantID.uuidString.lowercased()), .text(id.lowercased())]
        ).first.map(Self.audit(from:))
    }

    static let columns = [
        "id", "tenant_id", "created_at", "correlation_id", "activity", "category", "operation_type", "logged_by", "initiator_kind",
        "initiator_id", "initiator_name", "initiator_principal", "ip_address", "target_id", "target", "failure_reason", "details",
    ]

    private static func audit(from row: StoredRow) throws -> DirectoryAudit {
        let actor: AuditInitiator.Actor =
            switch try row.text("initiator_kind") {
            case "app": .application(appID: try row.optionalText("initiator_id") ?? "", displayName: try row.optionalText("initiator_name"))
            case "user":
                .user(
                    id: try row.optionalText("initiator_id").flatMap(UUID.init(uuidString:)) ?? UUID(),
                    userPrincipalName: try row.optionalText("initiator_principal"), displayName: try row.optionalText("initiator_name"))
            default: .commandLine(try row.optionalText("initiator_name") ?? "todo-server")
            }
        let target = try row.optionalText("target").flatMap { try? JSONDecoder().decode(AuditTarget.self, from: Data($0.utf8)) }
        let pairs = (try? JSONDecoder().decode([[String]].self, from: Data(try row.text("details").utf8))) ?? []
        var audit = DirectoryAudit(
            tenantID: UUID(uuidString: try row.text("tenant_id")) ?? UUID(),
            at: Date(timeIntervalSince1970: TimeInterval(try row.integer("created_at")) / 1000),
            activity: AuditActivity(
                try row.text("activity"), try row.text("category"), try row.text("operation_type"), try row.text("logged_by")),
            initiator: AuditInitiator(
                actor: actor, correlationID: try row.text("correlation_id"), ipAddress: try row.optionalText("ip_address")),
            target: target, details: pairs.compactMap { $0.count == 2 ? (key: $0[0], value: $0[1]) : nil })
        audit.failureReason = try row.optionalText("failure_reason")
        audit.id = try row.text("id")
        return audit
    }
}
