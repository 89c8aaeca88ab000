import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// The console's users: find, create, and per account disable or enable, reset MFA, revoke
/// sessions, give or take the admin role, delete — each through the administration rules the
/// CLI and Graph use, as the signed-in admin.
extension AdminConsole {
    static let pageSize = 50

    @Sendable func users(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let query = RequestParameters(query: request.uri.query)
            let find = (Self.field(query["q"]) ?? "").lowercased()
            // In the database, a page at a time: open sign-up lets anyone grow the table.
            let (found, total) = try await server.service.users.search(tenantID: admin.tenant.id, text: find, limit: Self.pageSize)
            let rows = found.map { user -> [String: Any] in
                ["id": user.objectID, "name": user.displayName, "account": user.email ?? user.signInName,
                 "provider": user.identityProvider.rawValue, "disabled": !user.accountEnabled]
            }
            return pages.render(
                "users",
                ["title": "Users", "q": find, "users": rows, "count": total, "more": total > Self.pageSize,
                 "notice": Self.notice(query["done"])],
                admin: admin)
        }
    }

    @Sendable func createUser(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { admin, form in
            let account = NewAccount(
                identity: .email(form["email"] ?? ""), displayName: form["name"] ?? "", password: form["password"] ?? "")
            do {
                let user = try await admin.administration.createUser(tenantID: admin.tenant.id, account)
                return Response(status: .seeOther, headers: [.location: "/admin/users/\(user.objectID)?done=created"])
            } catch let refusal as IdentityAdministration.AdministrationError {
                return pages.message("Not created", refusal.description, admin: admin, status: .badRequest)
            }
        }
    }

    @Sendable func user(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            guard let user = try await account(context, admin: admin) else {
                return pages.message("No such user", "There is no such account in this tenant.", admin: admin, status: .notFound)
            }
            let roles = try await admin.administration.roles(of: user)
            let query = RequestParameters(query: request.uri.query)
            return pages.render(
                "user",
                ["title": user.displayName, "id": user.objectID, "name": user.displayName, "account": user.email ?? user.signInName,
                 "accountQuery": FormEncoding.encode([("user", user.email ?? user.signInName)]),
                 "provider": user.identityProvider.rawValue, "enabled": user.accountEnabled, "admin": roles.contains(.admin),
                 "locked": user.lockout.isLocked(at: server.clock.now), "created": ConsoleFormat.time(user.createdAt),
                 "self": user.id == admin.user.id, "notice": Self.notice(query["done"])],
                admin: admin)
        }
    }

    /// `POST /admin/users/{id}/{action}`.
    @Sendable func userAction(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { admin, _ in
            guard let user = try await account(context, admin: admin) else {
                return pages.message("No such user", "There is no such account in this tenant.", admin: admin, status: .notFound)
            }
            let action = context.parameters.get("action") ?? ""
            // An admin does not lock themselves out of the console by a slip of the mouse.
            if user.id == admin.user.id, ["disable", "delete", "remove-admin"].contains(action) {
                return pages.message("Not on yourself", "Use another admin's session to do that to your own account.", admin: admin, status: .badRequest)
            }
            let door = admin.administration
            switch action {
            case "disable", "enable":
                var changes = AccountChanges()
                changes.accountEnabled = action == "enable"
                try await door.updateUser(user, changes)
                if action == "disable" { try await sessions.endAll(userID: user.id) }
            case "reset-mfa": _ = try await door.resetSecondFactor(userID: user.id)
            case "revoke-sessions":
                try await door.revokeSessions(user)
                try await sessions.endAll(userID: user.id)
            case "make-admin": try await door.assignRole(.admin, to: user)
            case "remove-admin":
                try await door.removeRole(.admin, from: user)
                try await sessions.endAll(userID: user.id)
            case "unlock": try await door.clearLockout(user)
            case "delete":
                try await door.deleteUser(user)
                return Response(status: .seeOther, headers: [.location: "/admin/users?done=deleted"])
            default:
                return pages.message("Unknown action", "The console has no such action.", admin: admin, status: .notFound)
            }
            return Response(status: .seeOther, headers: [.location: "/admin/users/\(user.objectID)?done=\(action)"])
        }
    }

    /// The `{id}` of the path: an account of the admin's tenant.
    private func account(_ context: IdentityRequestContext, admin: Admin) async throws -> UserAccount? {
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text), let user = try await server.users.user(id: id),
            user.tenantID == admin.tenant.id
        else { return nil }
        return user
    }

    /// The line shown after an action (`?done=`), from a fixed list: never the query's text.
    /// False (no notice) for none.
    static func notice(_ done: String?) -> Any {
        let text = noticeText(done ?? "")
        return text.isEmpty ? false : text
    }

    private static func noticeText(_ done: String) -> String {
        switch done {
        case "created": "Account created."
        case "deleted": "Account deleted."
        case "disable": "Account disabled; its console sessions ended."
        case "enable": "Account enabled."
        case "reset-mfa": "Authenticator removed: the next sign-in with MFA enrols anew."
        case "revoke-sessions": "Sessions and refresh tokens revoked."
        case "make-admin": "Admin role given."
        case "remove-admin": "Admin role taken."
        case "unlock": "Lockout lifted."
        default: ""
        }
    }
}

/// How the console writes times: UTC, to the second.
enum ConsoleFormat {
    static func time(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date).replacingOccurrences(of: "T", with: " ")
    }
}
