import Foundation
import Hummingbird
import IdentityDirectory
import WireCoding

/// The Microsoft identity platform's consent (SPEC §2.9): the first time a user signs in to an
/// app for scopes not yet granted (and again under `prompt=consent`), a page asks; B2C has no
/// such step. The person has authenticated by then, so the SSO session starts when the page is
/// shown, and the page finishes only in the browser that holds it.
struct ConsentStep: OrchestrationStep {
    let tenants: any TenantDirectory
    let consents: any ConsentStore
    let sessions: SingleSignOnSessions

    let id = "Consent"
    var pages: Set<HostedPage> { [.consent] }
    var actsForUser: Bool { true }

    func applies(to run: JourneyRun) -> Bool { run.authorization.protocolFace.asksConsent }

    private func client(_ run: JourneyRun) async throws -> (AppRegistration, GrantedScopes, [AppRegistration]) {
        guard let client = try await tenants.application(tenantID: run.tenant.id, clientID: run.authorization.clientID) else {
            throw PageError(status: .badRequest, title: "Unknown application", message: "The application is no longer registered.")
        }
        let apps = try await tenants.applications(tenantID: run.tenant.id)
        return (client, try GrantedScopes.resolve(run.authorization.scopes, client: client, tenantApps: apps), apps)
    }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        guard let user = run.user else { return .next }
        let (client, scopes, _) = try await client(run)
        let granted = try await consents.granted(userID: user.id, clientID: client.clientIDString)
        guard run.authorization.prompt == .consent || !scopes.consentKeys.isSubset(of: granted) else { return .next }
        if run.authorization.prompt == .silent { return .fail(.consentRequired(clientID: client.clientIDString, name: client.displayName)) }
        // A grant without pages works only for what the user consented to already (AADSTS65001).
        guard run.pagesAllowed else { return .fail(.grantNotConsented(clientID: client.clientIDString, name: client.displayName)) }
        // The person has authenticated: the session starts now.
        let id = try await TokenIssuanceStep.sessionID(for: user, sessions: sessions, &run)
        run.cookies.append(sessions.cookie(current: id, request: run.request, tenant: run.tenant))
        return .interact(.redirecting(to: run.url(.consent)))
    }

    /// The consent page finishes with the session this journey holds only (the engine checks
    /// it is still the browser's and the store's): never one the browser got elsewhere.
    private func requireSession(_ run: JourneyRun) throws {
        guard run.claims.sessionHash != nil else {
            throw PageError(status: .forbidden, title: "Sign in first", message: "Sign in before granting permissions to the app.")
        }
    }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        try requireSession(run)
        guard let user = run.user else { throw JourneyEngine.notThisStep }
        let (client, scopes, apps) = try await client(run)
        return .interact(
            try run.page(
                .consent,
                [
                    "title": run.text("consent_title"), "action": run.url(.consent), "appName": client.displayName,
                    "account": user.email ?? user.displayName, "permissions": Self.describe(scopes, apps: apps),
                ]))
    }

    /// Accept records the grant and goes on; a refusal is Cancel's `access_denied`
    /// (AADSTS65004 on this face).
    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        try requireSession(run)
        guard let user = run.user else { throw JourneyEngine.notThisStep }
        guard run.form["decision"] == "accept" else { return .fail(.consentDeclined) }
        let (client, scopes, _) = try await client(run)
        try await consents.grant(scopes.consentKeys, userID: user.id, clientID: client.clientIDString, now: run.now)
        run.logger.info("consent granted", metadata: ["oid": "\(user.objectID)", "client_id": "\(client.clientIDString)"])
        return .next
    }

    /// What each permission lets the app do, in the words Entra's consent page uses.
    static func describe(_ scopes: GrantedScopes, apps: [AppRegistration]) -> [String] {
        var lines: [String] = []
        if scopes.openID { lines.append("View your basic profile") }
        if let resource = scopes.resource {
            let api = apps.first { $0.clientIDString == resource.audience }?.displayName ?? resource.audience
            if resource.scopeNames.isEmpty { lines.append("Access \(api) as you") }
            for name in resource.scopeNames where !name.isEmpty {
                if resource.audience == APIPermission.graphResource, name.lowercased() == "user.read" {
                    lines.append("Sign you in and read your profile")
                } else {
                    lines.append("Access \(api) (\(name))")
                }
            }
        }
        if scopes.offlineAccess { lines.append("Maintain access to data you have given it access to") }
        return lines
    }
}
