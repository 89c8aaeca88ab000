import Foundation
import Hummingbird
import WireCoding

/// The Microsoft identity platform's own steps (SPEC §2.9): the consent page, shown the first
/// time a user signs in to an app for scopes not yet granted (and again under
/// `prompt=consent`), and the account picker of `prompt=select_account`. B2C has neither.
extension PageStep {
    // MARK: Consent

    /// The session of the user the transaction is waiting on, which the consent step finishes.
    private func consentingSession() async throws -> InteractionFlow.HeldSession {
        guard record.request.protocolFace == .entra, let pending = record.pendingUserID, let expected = record.consentSessionHash,
            let held = try await flow.sessions(from: request, tenant: tenant).first(where: {
                $0.user.id == pending && Secrets.constantTimeEquals(Secrets.sha256Hex($0.id), expected)
            })
        else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in before granting permissions to the app.")
        }
        return held
    }

    private func consentingClient() async throws -> (AppRegistration, GrantedScopes) {
        guard let client = try await service.tenants.application(tenantID: tenant.id, clientID: record.request.clientID) else {
            throw PageError(status: .badRequest, title: "Unknown application", message: "The application is no longer registered.")
        }
        let apps = try await service.tenants.applications(tenantID: tenant.id)
        return (client, try GrantedScopes.resolve(record.request.scopes, client: client, tenantApps: apps))
    }

    func consentPage() async throws -> Response {
        let held = try await consentingSession()
        let (client, scopes) = try await consentingClient()
        let apps = try await service.tenants.applications(tenantID: tenant.id)
        return try page(
            "consent",
            [
                "title": text("consent_title"), "action": flow.pageURL("consent", record: record), "appName": client.displayName,
                "account": held.user.email ?? held.user.displayName,
                "permissions": Self.describe(scopes, apps: apps),
            ])
    }

    /// Accept records the grant and finishes the sign-in; a refusal is Cancel's
    /// `access_denied` (AADSTS65004 on this face).
    func consent() async throws -> Response {
        let held = try await consentingSession()
        guard form["decision"] == "accept" else { return try await flow.fail(record, with: .consentDeclined, context: context) }
        let (client, scopes) = try await consentingClient()
        try await service.consents.grant(scopes.consentKeys, userID: held.user.id, clientID: client.clientIDString, now: service.now)
        context.logger.info("consent granted", metadata: ["oid": "\(held.user.objectID)", "client_id": "\(client.clientIDString)"])
        return try await flow.finish(
            record, user: held.user, identityProvider: held.session.identityProvider, newUser: false, authTime: held.session.authTime,
            session: .existing(id: held.id), request: request, context: context)
    }

    /// What each permission lets the app do, in the words Entra's consent page uses.
    static func describe(_ scopes: GrantedScopes, apps: [AppRegistration]) -> [String] {
        var lines: [String] = []
        if scopes.openID { lines.append("View your basic profile") }
        if let resource = scopes.resource {
            if resource.scopeNames.isEmpty {
                let api = apps.first { $0.clientIDString == resource.audience }?.displayName ?? resource.audience
                lines.append("Access \(api) as you")
            }
            for name in resource.scopeNames where !name.isEmpty {
                if resource.audience == APIPermission.graphResource, name.lowercased() == "user.read" {
                    lines.append("Sign you in and read your profile")
                } else {
                    let api = apps.first { $0.clientIDString == resource.audience }?.displayName ?? resource.audience
                    lines.append("Access \(api) (\(name))")
                }
            }
        }
        if scopes.offlineAccess { lines.append("Maintain access to data you have given it access to") }
        return lines
    }

    // MARK: Account picker

    /// The browser's sessions this transaction may continue with (not under `prompt=login`,
    /// not beyond `max_age`, from the flow's identity providers).
    private func pickableSessions() async throws -> [InteractionFlow.HeldSession] {
        try await flow.usableSessions(for: record, userFlow: userFlow, request: request, tenant: tenant)
    }

    func accountsPage() async throws -> Response {
        guard record.request.protocolFace == .entra else {
            throw PageError(status: .notFound, title: "Not found", message: "This sign-in has no account picker.")
        }
        let action = flow.pageURL("accounts", record: record)
        let accounts = try await pickableSessions().map { held -> [String: Any] in
            ["oid": held.user.objectID, "name": held.user.displayName, "email": held.user.email ?? "", "action": action]
        }
        return try page(
            "accounts", ["title": text("accounts_title"), "accounts": accounts, "otherURL": flow.pageURL("signin", record: record)])
    }

    /// Continues as the chosen account: its session becomes the browser's current one.
    func chooseAccount() async throws -> Response {
        guard record.request.protocolFace == .entra, let oid = form["account"],
            let held = try await pickableSessions().first(where: { $0.user.objectID == oid.lowercased() })
        else {
            throw PageError(status: .badRequest, title: "Account not available", message: "Pick one of the accounts shown, or sign in.")
        }
        return try await flow.complete(
            record, user: held.user, identityProvider: held.session.identityProvider, newUser: false,
            authTime: held.session.authTime, session: .existing(id: held.id), request: request, context: context)
    }
}
