import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys

/// The console's app registrations: register, and per app its redirect URIs, secrets (a new one
/// shown once; the store keeps its hash) and API permissions with admin consent, or delete it —
/// through the rules the CLI and Graph use, as the signed-in admin.
extension AdminConsole {
    @Sendable func apps(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let console = Self.clientID(of: admin.tenant)
            let rows = try await admin.administration.applications(tenantID: admin.tenant.id).filter { $0.clientID != console }.map {
                ["id": $0.clientIDString, "name": $0.displayName, "kind": $0.kind.rawValue, "redirects": $0.redirectURIs.count]
            }
            return pages.render("apps", ["title": "App registrations", "apps": rows], admin: admin)
        }
    }

    @Sendable func createApp(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { admin, form in
            var draft = IdentityAdministration.NewApplication(
                name: form["name"] ?? "", kind: form["kind"] == "confidential" ? .confidential : .public)
            // As typed (trimmed): the redirect-URI rule judges it, nothing here changes it.
            if let uri = form["redirect"]?.trimmingCharacters(in: .whitespaces), !uri.isEmpty { draft.redirectURIs = [uri] }
            draft.requirePKCE = draft.kind == .public
            do {
                let (app, secret) = try await admin.administration.register(draft, tenantID: admin.tenant.id)
                return secretPage(app, secret: secret, admin: admin)
            } catch let refusal as IdentityAdministration.AdministrationError {
                return pages.message("Not registered", refusal.description, admin: admin, status: .badRequest)
            }
        }
    }

    @Sendable func app(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            guard let app = try await registration(context, admin: admin) else {
                return pages.message("No such app", "There is no such app registration in this tenant.", admin: admin, status: .notFound)
            }
            let secrets = try await server.tenants.secretHashes(clientID: app.clientID).count
            let permissions = app.apiPermissions.map { permission -> [String: Any] in
                ["api": permission.resource, "scopes": (permission.scopes + permission.roles).joined(separator: ", ")]
            }
            return pages.render(
                "app",
                ["title": app.displayName, "id": app.clientIDString, "kind": app.kind.rawValue, "confidential": app.kind == .confidential,
                 "redirects": app.redirectURIs.map { ["uri": $0] }, "secrets": secrets, "permissions": permissions,
                 "appIDURI": app.appIDURI ?? "", "scopes": app.exposedScopes.joined(separator: ", "),
                 "notice": Self.appNotice(RequestParameters(query: request.uri.query)["done"])],
                admin: admin)
        }
    }

    /// `POST /admin/apps/{id}/{action}`: add-redirect, remove-redirect, new-secret, remove-secrets, grant, delete.
    @Sendable func appAction(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { admin, form in
            guard let app = try await registration(context, admin: admin) else {
                return pages.message("No such app", "There is no such app registration in this tenant.", admin: admin, status: .notFound)
            }
            let door = admin.administration
            let action = context.parameters.get("action") ?? ""
            do {
                switch action {
                case "add-redirect":
                    let uri = (form["uri"] ?? "").trimmingCharacters(in: .whitespaces)
                    guard !app.redirectURIs.contains(uri) else {
                        return pages.message("Already there", "The app has that redirect URI already.", admin: admin, status: .badRequest)
                    }
                    try await door.setRedirectURIs(app.redirectURIs + [uri], of: app)
                case "remove-redirect":
                    guard let uri = form["uri"], app.redirectURIs.contains(uri) else {
                        return pages.message("Not there", "The app has no such redirect URI.", admin: admin, status: .badRequest)
                    }
                    try await door.setRedirectURIs(app.redirectURIs.filter { $0 != uri }, of: app)
                case "new-secret":
                    guard app.kind == .confidential else {
                        return pages.message("No secrets", "A public client has no secret.", admin: admin, status: .badRequest)
                    }
                    return secretPage(app, secret: try await door.addSecret(to: app), admin: admin)
                case "remove-secrets": try await door.removeSecrets(of: app)
                case "grant":
                    let scopes = (form["scopes"] ?? "").split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
                    _ = try await door.grantPermission(tenantID: admin.tenant.id, clientID: app.clientID, api: form["api"] ?? "", scopes: scopes, roles: [])
                case "delete":
                    _ = try await door.removeApplication(tenantID: admin.tenant.id, clientID: app.clientID)
                    return Response(status: .seeOther, headers: [.location: "/admin/apps"])
                default:
                    return pages.message("Unknown action", "The console has no such action.", admin: admin, status: .notFound)
                }
            } catch let refusal as IdentityAdministration.AdministrationError {
                return pages.message("Refused", refusal.description, admin: admin, status: .badRequest)
            }
            return Response(status: .seeOther, headers: [.location: "/admin/apps/\(app.clientIDString)?done=\(action)"])
        }
    }

    /// A new secret, shown this once (never stored in the clear, never in a URL).
    private func secretPage(_ app: AppRegistration, secret: String?, admin: Admin) -> Response {
        pages.render("secret", ["title": app.displayName, "id": app.clientIDString, "secret": secret ?? false], admin: admin)
    }

    /// The `{id}` of the path: an app of the admin's tenant, never the console's own.
    private func registration(_ context: IdentityRequestContext, admin: Admin) async throws -> AppRegistration? {
        guard let id = context.parameters.get("id"), UUID(uuidString: id) != nil, id.lowercased() != Self.clientID(of: admin.tenant).uuidString.lowercased()
        else { return nil }
        return try await server.tenants.application(tenantID: admin.tenant.id, clientID: id.lowercased())
    }

    static func appNotice(_ done: String?) -> Any {
        switch done {
        case "add-redirect": "Redirect URI added."
        case "remove-redirect": "Redirect URI removed."
        case "remove-secrets": "Every secret removed: the app's token requests fail until it has a new one."
        case "grant": "Permission granted, with admin consent."
        default: false
        }
    }
}
