import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys

/// The console's views of the sign-in and audit logs: newest first, filtered by the fields a
/// developer asks "why did this sign-in do that?" with, and one sign-in's steps.
extension AdminConsole {
    @Sendable func signIns(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let form = RequestParameters(query: request.uri.query)
            var query = SignInQuery()
            query.limit = Self.pageSize
            query.after = server.service.signIns.log.oldestKept(now: server.clock.now)
            let user = Self.field(form["user"])
            let app = Self.field(form["app"])
            let correlation = Self.field(form["correlation"])
            if let user { query.userPrincipalName = user }
            if let app { query.appID = app }
            if let correlation { query.correlationID = correlation }
            switch form["result"] {
            case "success": query.succeeded = true
            case "failure": query.succeeded = false
            default: break
            }
            let events = try await server.service.signIns.log.events(tenantID: admin.tenant.id, query)
            let rows = events.map { event -> [String: Any] in
                ["id": event.id, "time": ConsoleFormat.time(event.at), "kind": event.kind.rawValue, "user": event.userPrincipalName ?? "",
                 "app": event.appName ?? event.appID ?? "", "policy": event.policy ?? "", "failed": event.errorCode != 0,
                 "code": event.errorCode == 0 ? "" : String(event.errorCode)]
            }
            return pages.render(
                "signins",
                ["title": "Sign-ins", "events": rows, "user": user ?? "", "app": app ?? "", "correlation": correlation ?? "",
                 "success": form["result"] == "success", "failure": form["result"] == "failure"],
                admin: admin)
        }
    }

    @Sendable func signIn(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            guard let id = context.parameters.get("id"), id.count <= 64,
                let event = try await server.service.signIns.log.event(tenantID: admin.tenant.id, id: id),
                event.at.epochMilliseconds > server.service.signIns.log.oldestKept(now: server.clock.now)
            else { return pages.message("No such sign-in", "The log has no such record (records are kept for a while only).", admin: admin, status: .notFound) }
            return pages.render(
                "signin",
                ["title": "Sign-in \(ConsoleFormat.time(event.at))", "time": ConsoleFormat.time(event.at), "kind": event.kind.rawValue,
                 "correlation": event.correlationID, "user": event.userPrincipalName ?? "", "userID": event.userID?.uuidString.lowercased() ?? "",
                 "app": event.appName ?? "", "appID": event.appID ?? "", "policy": event.policy ?? "", "grant": event.grantType ?? "",
                 "address": event.ipAddress ?? "", "failed": event.errorCode != 0, "code": String(event.errorCode),
                 "reason": event.failureReason ?? "", "steps": event.steps.map { ["step": $0] }],
                admin: admin)
        }
    }

    @Sendable func audits(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let form = RequestParameters(query: request.uri.query)
            var query = DirectoryAuditQuery()
            query.limit = Self.pageSize
            query.after = server.service.directoryAudits.oldestKept(now: server.clock.now)
            let category = Self.field(form["category"])
            query.category = category
            switch form["result"] {
            case "success": query.succeeded = true
            case "failure": query.succeeded = false
            default: break
            }
            let records = try await server.service.directoryAudits.audits(tenantID: admin.tenant.id, query)
            let rows = records.map { audit -> [String: Any] in
                let by: String =
                    switch audit.initiator.actor {
                    case .application(let appID, let name): name ?? appID
                    case .user(_, let principal, let name): principal ?? name ?? ""
                    case .commandLine(let command): command
                    }
                let target = audit.target.map { [$0.type, $0.displayName ?? $0.userPrincipalName ?? $0.id ?? ""].joined(separator: " ") } ?? ""
                return ["time": ConsoleFormat.time(audit.at), "activity": audit.activity.displayName, "category": audit.activity.category,
                        "by": by, "target": target, "failed": !audit.succeeded, "reason": audit.failureReason ?? "",
                        "changed": audit.target?.modifiedProperties.map { property in
                            property.newValue.map { "\(property.name): \($0)" } ?? property.name
                        }.joined(separator: ", ") ?? ""]
            }
            let categories = ["UserManagement", "ApplicationManagement", "RoleManagement", "Key", "Resource"].map {
                ["name": $0, "selected": $0 == category]
            }
            return pages.render(
                "audit",
                ["title": "Audit log", "records": rows, "categories": categories, "success": form["result"] == "success",
                 "failure": form["result"] == "failure"],
                admin: admin)
        }
    }

    /// A filter field: trimmed, at most 256 characters, nil when empty. (Shown again in the page,
    /// it is escaped there like every value, `MarkupTemplates`.)
    static func field(_ value: String?) -> String? {
        let text = String((value ?? "").trimmingCharacters(in: .whitespaces).prefix(256))
        return text.isEmpty ? nil : text
    }
}
