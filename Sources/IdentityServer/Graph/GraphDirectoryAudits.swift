import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// Graph's `GET /v1.0/auditLogs/directoryAudits` and `/{id}` (SPEC §2.13), for app-only tokens
/// holding `AuditLog.Read.All`. Two logs in one view, as B2C shows them: every admin change
/// (Core Directory's `UserManagement` and `ApplicationManagement`, B2C's `Key` and `Resource`),
/// and B2C's `Authentication` records of token issuance, which are the sign-in log's records
/// seen as B2C's audit log shows them (with `PolicyId` and `ApplicationId`). Newest first,
/// merged by time, with one cursor over both.
struct GraphDirectoryAudits: Sendable {
    let permit: GraphCallers
    let clock: any IdentityClock
    let audits: DirectoryAuditLog
    let signIns: SignInLog
    let hosts: HostPolicy

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let options = try AuditLogOptions(directoryAudits: request.uri.query)
        var query = options.query
        query.limit += 1  // one more than the page, to know whether another follows
        // Past the retention a record is gone from the answer, pruned yet or not.
        query.after = max(query.after ?? .min, audits.oldestKept(now: clock.now))
        var found = try await audits.audits(tenantID: tenant.id, query)
        if let authentication = query.authentication {
            found += try await signIns.events(tenantID: tenant.id, authentication).map {
                DirectoryAudit(authentication: $0, tenantName: tenant.name)
            }
            // Both are newest first by (time, id); so is their merge, cut to the page and one more.
            found.sort { ($0.at, $0.id) > ($1.at, $1.id) }
            found = Array(found.prefix(query.limit))
        }
        return GraphSignIns.page(found, options: options, request: request, hosts: hosts, time: \.at, id: \.id, json: Self.json)
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        guard let id = context.parameters.get("id"), id.count <= 64 else { throw GraphError.resourceNotFound }
        var audit = try await audits.audit(tenantID: tenant.id, id: id)
        if audit == nil, let event = try await signIns.event(tenantID: tenant.id, id: id) {
            audit = DirectoryAudit(authentication: event, tenantName: tenant.name)
        }
        guard let audit, audit.at.epochMilliseconds > audits.oldestKept(now: clock.now),
            case .object(var members) = Self.json(audit)
        else { throw GraphError.resourceNotFound }
        members.insert(("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#auditLogs/directoryAudits/$entity")), at: 0)
        return .json(.object(members))
    }

    /// A `microsoft.graph.directoryAudit`.
    static func json(_ audit: DirectoryAudit) -> JSONText {
        func text(_ value: String?) -> JSONText { value.map(JSONText.string) ?? .null }
        let initiatedBy: JSONText
        switch audit.initiator.actor {
        case .application(let appID, let name):
            initiatedBy = .object([
                ("user", .null),
                (
                    "app",
                    .object([
                        ("appId", text(appID.isEmpty ? nil : appID)), ("displayName", text(name)), ("servicePrincipalId", .null),
                        ("servicePrincipalName", text(appID.isEmpty ? nil : appID)),
                    ])
                ),
            ])
        case .user(let id, let principal, let name):
            initiatedBy = .object([
                (
                    "user",
                    .object([
                        ("id", .string(id.uuidString.lowercased())), ("displayName", text(name)), ("userPrincipalName", text(principal)),
                        ("ipAddress", text(audit.initiator.ipAddress)),
                    ])
                ),
                ("app", .null),
            ])
        case .commandLine(let command):
            initiatedBy = .object([
                ("user", .null),
                ("app", .object([("appId", .null), ("displayName", .string(command)), ("servicePrincipalId", .null), ("servicePrincipalName", .null)])),
            ])
        }
        let targets: [JSONText] = audit.target.map { target in
            [
                .object([
                    ("id", text(target.id)), ("displayName", text(target.displayName)), ("type", .string(target.type)),
                    ("userPrincipalName", text(target.userPrincipalName)), ("groupType", .null),
                    (
                        "modifiedProperties",
                        .array(
                            target.modifiedProperties.map {
                                .object([
                                    ("displayName", .string($0.name)), ("oldValue", .null),
                                    // Graph writes values as JSON text: `["false"]`.
                                    ("newValue", $0.newValue.map { .string(JSONText.array([.string($0)]).serialized) } ?? .null),
                                ])
                            })
                    ),
                ])
            ]
        } ?? []
        return .object([
            ("id", .string(audit.id)), ("category", .string(audit.activity.category)), ("correlationId", .string(audit.initiator.correlationID)),
            ("result", .string(audit.succeeded ? "success" : "failure")), ("resultReason", .string(audit.failureReason ?? "")),
            ("activityDisplayName", .string(audit.activity.displayName)), ("activityDateTime", .string(GraphTime.format(audit.at))),
            ("loggedByService", .string(audit.activity.loggedByService)), ("operationType", .string(audit.activity.operationType)),
            ("initiatedBy", initiatedBy), ("targetResources", .array(targets)),
            ("additionalDetails", .array(audit.details.map { .object([("key", .string($0.key)), ("value", .string($0.value))]) })),
        ])
    }
}

extension GraphDirectoryAudits {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: GraphSignIns.roles))
            .get("auditLogs/directoryAudits", use: list)
            .get("auditLogs/directoryAudits/:id", use: get)
        return collection
    }
}
