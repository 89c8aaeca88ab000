import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// Graph's `GET /v1.0/auditLogs/signIns` and `/{id}` over the sign-in log (SPEC §2.13), for
/// app-only tokens holding `AuditLog.Read.All`: newest first, `$top` (1–1000) with
/// `@odata.nextLink`, and the `$filter` clauses Graph documents for sign-ins that this log can
/// answer exactly, ANDed.
struct GraphSignIns: Sendable {
    let permit: GraphCallers
    let clock: any IdentityClock
    let log: SignInLog
    let hosts: HostPolicy

    static let roles = ["AuditLog.Read.All"]

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let options = try AuditLogOptions(signIns: request.uri.query)
        var query = options.query
        query.limit += 1  // one more than the page, to know whether another follows
        query.after = max(query.after ?? .min, log.oldestKept(now: clock.now))
        let found = try await log.events(tenantID: tenant.id, query)
        return Self.page(found, options: options, request: request, hosts: hosts, time: \.at, id: \.id, json: Self.json)
    }

    /// A page of `found` (newest first, one more than `$top` when another page follows), with
    /// `@odata.nextLink` after its last row.
    static func page<Row, Query>(
        _ found: [Row], options: AuditLogOptions<Query>, request: Request, hosts: HostPolicy, time: KeyPath<Row, Date>,
        id: KeyPath<Row, String>, json: (Row) -> JSONText
    ) -> Response {
        let page = found.prefix(options.top)
        var body: [(String, JSONText)] = [
            ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#auditLogs/\(options.segment)")),
            ("value", .array(page.map(json))),
        ]
        if found.count > page.count, let last = page.last {
            body.append(
                ("@odata.nextLink", .string(options.nextLink(origin: hosts.origin(of: request), afterTime: last[keyPath: time], id: last[keyPath: id]))))
        }
        return .json(.object(body))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        guard let id = context.parameters.get("id"), id.count <= 64, let event = try await log.event(tenantID: tenant.id, id: id),
            event.at.epochMilliseconds > log.oldestKept(now: clock.now)
        else {
            throw GraphError.resourceNotFound
        }
        guard case .object(var members) = Self.json(event) else { throw GraphError.resourceNotFound }
        members.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#auditLogs/signIns/$entity")), at: 0)
        return .json(.object(members))
    }

    /// A `microsoft.graph.signIn`. What B2C adds (the policy, the kind of event, the grant type
    /// and the steps) is in `status.additionalDetails`, which Graph defines as free text.
    static func json(_ event: SignInEvent) -> JSONText {
        func text(_ value: String?) -> JSONText { value.map(JSONText.string) ?? .null }
        var details = "\(event.kind.rawValue)"
        if let policy = event.policy { details += " with \(policy)" }
        if let grant = event.grantType { details += " (grant_type \(grant))" }
        if !event.steps.isEmpty { details += "; steps: " + event.steps.joined(separator: ", ") }
        let none = JSONText.string("none")
        return .object([
            ("id", .string(event.id)), ("createdDateTime", .string(GraphTime.format(event.at))),
            ("userDisplayName", text(event.userDisplayName)), ("userPrincipalName", text(event.userPrincipalName)),
            ("userId", text(event.userID?.uuidString.lowercased())), ("appId", text(event.appID)),
            ("appDisplayName", text(event.appName)), ("ipAddress", text(event.ipAddress)),
            ("clientAppUsed", .string(event.interactive ? "Browser" : "Mobile Apps and Desktop clients")),
            ("correlationId", .string(event.correlationID)), ("conditionalAccessStatus", .string("notApplied")),
            ("isInteractive", .bool(event.interactive)), ("riskDetail", none), ("riskLevelAggregated", none),
            ("riskLevelDuringSignIn", none), ("riskState", none), ("riskEventTypes_v2", .array([])),
            ("resourceDisplayName", text(event.policy)), ("resourceId", .null),
            (
                "status",
                .object([
                    ("errorCode", .int(Int64(event.errorCode))), ("failureReason", text(event.failureReason)),
                    ("additionalDetails", .string(details)),
                ])
            ),
            ("appliedConditionalAccessPolicies", .array([])),
        ])
    }
}

/// Graph's date-time form in audit logs: UTC with a `Z`.
enum GraphTime {
    static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// An OData `DateTimeOffset` literal (`2026-11-26T07:00:00Z`, fractions or an offset allowed).
    static func parse(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}

extension GraphSignIns {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.roles))
            .get("auditLogs/signIns", use: list)
            .get("auditLogs/signIns/:id", use: get)
        return collection
    }
}
