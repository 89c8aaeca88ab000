import Foundation
import TodoModels

/// App registrations as Graph manages them (SPEC §2.14): the whole registration saved at once
/// after B2C's and Entra's rules are checked, secrets by key id, and admin consent as app-role
/// assignments (application permissions) and delegated permission grants (scopes).
extension IdentityAdministration {
    /// Why an app registration is refused, before anything is written.
    public static func problem(with app: AppRegistration, among others: [AppRegistration]) -> String? {
        guard (try? TextRules.name(app.displayName, maximumLength: 256).get()) == app.displayName else {
            return "An app's displayName must be 1 to 256 characters without controls, invisible characters or extra spaces."
        }
        guard app.redirectURIs.count <= RedirectURIRule.maximumCount else {
            return "An app holds at most \(RedirectURIRule.maximumCount) redirect URIs."
        }
        for uri in app.redirectURIs {
            // A single-page app's and a web app's URIs are a browser's: https (or http on
            // loopback), never a custom scheme; a native app's may be one.
            let kind: ClientKind = app.platform(of: uri) == .publicClient ? .public : .confidential
            if let problem = RedirectURIRule.problem(with: uri, kind: kind) { return problem }
        }
        if let uri = app.appIDURI {
            guard uri.count <= 256, let parts = URLComponents(string: uri), let scheme = parts.scheme?.lowercased(),
                ["https", "api", "urn"].contains(scheme), parts.fragment == nil, !uri.contains("*")
            else { return "The identifierUri '\(TextRules.printable(String(uri.prefix(80))))' is not an https, api: or urn: URI." }
            // Microsoft's own hosts name Microsoft's APIs (Graph's audience is its app id).
            let host = parts.host?.lowercased() ?? ""
            if ["microsoft.com", "microsoftonline.com", "windows.net", "azure.com"].contains(where: { host == $0 || host.hasSuffix("." + $0) }) {
                return "The identifierUri names a Microsoft host: use api://… or a domain of your own."
            }
            let key = uri.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            if others.contains(where: { $0.clientID != app.clientID && $0.appIDURI?.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "/")) == key }) {
                return "Another object with the same value for property identifierUris already exists."
            }
        }
        guard app.exposedScopes.count <= 100 else { return "An app exposes at most 100 scopes." }
        for scope in app.exposedScopes {
            guard !scope.isEmpty, scope.count <= 120, scope.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
            else { return "A scope's value is 1 to 120 letters, digits, '.', '_' or '-'." }
        }
        guard Set(app.exposedScopes.map { $0.lowercased() }).count == app.exposedScopes.count else {
            return "Two exposed scopes have the same value."
        }
        guard Set(app.exposedScopes.map(app.scopeID)).count == app.exposedScopes.count else { return "Two exposed scopes have the same id." }
        guard app.requiredResourceAccess.count <= 50, app.requiredResourceAccess.allSatisfy({ $0.resourceAccess.count <= 400 }) else {
            return "requiredResourceAccess is too long."
        }
        if let claims = app.groupMembershipClaims {
            let known = ["none", "securitygroup", "all", "directoryrole", "applicationgroup"]
            guard claims.split(separator: ",").allSatisfy({ known.contains($0.trimmingCharacters(in: .whitespaces).lowercased()) }) else {
                return "groupMembershipClaims is None, SecurityGroup, All, DirectoryRole or ApplicationGroup."
            }
        }
        return nil
    }

    /// A tenant holds at most this many app registrations made through Graph; an app this many secrets.
    public static let maximumApplications = 1_000
    public static let maximumSecrets = 20

    /// Registers `app` as given (Graph `POST /applications`): checked, then saved and audited.
    public func createApplication(_ app: AppRegistration) async throws -> AppRegistration {
        try await audited(.addApplication, tenantID: app.tenantID, target: .application(app)) {
            let others = try await tenants.uncached.applications(tenantID: app.tenantID)
            guard others.count < Self.maximumApplications else {
                throw AdministrationError.refused("A tenant holds at most \(Self.maximumApplications) app registrations.")
            }
            if let problem = Self.problem(with: app, among: others) { throw AdministrationError.refused(problem) }
            if let flow = app.userFlow, try await tenants.userFlow(tenantID: app.tenantID, name: flow) == nil {
                throw AdministrationError.unknownUserFlow(flow)
            }
            try await tenants.save(app, now: clock.now)
            return app
        }
    }

    /// Saves a changed registration (Graph `PATCH /applications/{id}`); `modified` names the
    /// properties the caller changed, for the audit record.
    public func updateApplication(_ changed: AppRegistration, modified: [String]) async throws {
        let target = AuditTarget.application(changed, modified: modified.map { .init(name: $0, newValue: nil) })
        try await audited(.updateApplication, tenantID: changed.tenantID, target: target) {
            let others = try await tenants.uncached.applications(tenantID: changed.tenantID)
            guard let stored = others.first(where: { $0.clientID == changed.clientID }) else {
                throw AdministrationError.noSuchApplication(changed.clientIDString)
            }
            // Its grants are changed only by consent (``assignAppRole(_:on:to:)``,
            // ``setGrantedScopes(_:on:of:)``): what is granted now stays, whatever the caller read.
            var app = changed
            app.apiPermissions = stored.apiPermissions
            if let problem = Self.problem(with: app, among: others) { throw AdministrationError.refused(problem) }
            // A scope another app was granted stays exposed until that grant goes.
            for scope in stored.exposedScopes where !app.exposedScopes.contains(scope) {
                if let holder = others.first(where: { $0.permission(on: app.clientIDString)?.scopes.contains(scope) == true }) {
                    throw AdministrationError.refused("The scope \(scope) is granted to '\(holder.displayName)': remove that grant first.")
                }
            }
            if let flow = app.userFlow, try await tenants.userFlow(tenantID: app.tenantID, name: flow) == nil {
                throw AdministrationError.unknownUserFlow(flow)
            }
            try await tenants.save(app, now: clock.now)
        }
    }

    public func passwordCredentials(of app: AppRegistration) async throws -> [PasswordCredential] {
        try await tenants.passwordCredentials(clientID: app.clientID)
    }

    /// A new secret for `app` (Graph `addPassword`), returned once with what Graph shows of it.
    /// An app with a secret authenticates at the token endpoint: a public one becomes confidential.
    public func addPassword(to app: AppRegistration, displayName: String?, expiresAt: Date?) async throws -> (PasswordCredential, String) {
        let secret = Self.newClientSecret()
        let target = AuditTarget.application(app, modified: [.init(name: "KeyDescription", newValue: nil)])
        let credential = try await audited(.addSecret, tenantID: app.tenantID, target: target) {
            if let expiresAt, expiresAt <= clock.now { throw AdministrationError.refused("endDateTime must be in the future.") }
            guard try await tenants.passwordCredentials(clientID: app.clientID).count < Self.maximumSecrets else {
                throw AdministrationError.refused("An app holds at most \(Self.maximumSecrets) secrets.")
            }
            // An app without a native or single-page redirect authenticates with its secret
            // (a daemon's client credentials); one with them stays a public client for those.
            if app.kind == .public, app.redirectURIs(on: .spa).isEmpty, app.redirectURIs(on: .publicClient).isEmpty,
                var confidential = try await tenants.uncached.application(tenantID: app.tenantID, clientID: app.clientIDString)
            {
                confidential.setKind(.confidential)
                try await tenants.save(confidential, now: clock.now)
            }
            return try await tenants.addPasswordCredential(
                clientID: app.clientID, secret: secret, now: clock.now, expiresAt: expiresAt, displayName: displayName)
        }
        return (credential, secret)
    }

    /// Withdraws one secret (Graph `removePassword`); false when the app has no such key.
    public func removePassword(_ keyID: UUID, of app: AppRegistration) async throws -> Bool {
        let target = AuditTarget.application(app, modified: [.init(name: "KeyDescription", newValue: "removed")])
        return try await audited(.addSecret, tenantID: app.tenantID, target: target, result: { $0 ? target : nil }) {
            try await tenants.removePasswordCredential(clientID: app.clientID, keyID: keyID)
        }
    }

    /// Grants application permission `role` on `resource` (Graph: an app-role assignment to the
    /// app's service principal). Graph's roles are the ones this service serves.
    public func assignAppRole(_ role: String, on resource: String, to app: AppRegistration) async throws {
        let target = AuditTarget.application(app, modified: [.init(name: "AppRole", newValue: role)])
        try await audited(.addAppRoleAssignment, tenantID: app.tenantID, target: target) {
            try await changePermission(of: app, on: resource) { permission in
                guard !permission.roles.contains(role) else {
                    throw AdministrationError.refused("Permission being assigned already exists on the object")
                }
                permission.roles.append(role)
            }
        }
    }

    /// Withdraws application permission `role` on `resource`; false when not granted.
    public func removeAppRole(_ role: String, on resource: String, from app: AppRegistration) async throws -> Bool {
        let target = AuditTarget.application(app, modified: [.init(name: "AppRole", newValue: role)])
        return try await audited(.removeAppRoleAssignment, tenantID: app.tenantID, target: target, result: { $0 ? target : nil }) {
            guard app.permission(on: resource)?.roles.contains(role) == true else { return false }
            try await changePermission(of: app, on: resource) { $0.roles.removeAll { $0 == role } }
            return true
        }
    }

    /// Sets the delegated scopes granted on `resource` to `scopes` (Graph: an
    /// `oauth2PermissionGrant` with `consentType: AllPrincipals`); each must be exposed by it.
    public func setGrantedScopes(_ scopes: [String], on resource: String, of app: AppRegistration) async throws {
        let target = AuditTarget.application(app, modified: scopes.map { .init(name: "Scope", newValue: $0) })
        try await audited(scopes.isEmpty ? .removePermissionGrant : .addPermissionGrant, tenantID: app.tenantID, target: target) {
            let exposed: [String]
            if resource == APIPermission.graphResource {
                exposed = APIPermission.graphScopes
            } else if let api = try await tenants.application(tenantID: app.tenantID, clientID: resource) {
                exposed = api.exposedScopes
            } else {
                throw AdministrationError.noSuchAPI(resource)
            }
            let granted = try scopes.map { scope in
                guard let match = exposed.first(where: { $0.lowercased() == scope.lowercased() }) else {
                    throw AdministrationError.scopeNotExposed(api: resource, scope: scope)
                }
                return match
            }
            try await changePermission(of: app, on: resource) { $0.scopes = granted }
        }
    }

    /// Applies `change` to the app's permission on `resource`, as stored now; a permission left
    /// empty goes.
    private func changePermission(of app: AppRegistration, on resource: String, _ change: (inout APIPermission) throws -> Void)
        async throws
    {
        guard var current = try await tenants.uncached.application(tenantID: app.tenantID, clientID: app.clientIDString) else {
            throw AdministrationError.noSuchApplication(app.clientIDString)
        }
        var permission = current.permission(on: resource) ?? APIPermission(resource: resource)
        try change(&permission)
        current.apiPermissions.removeAll { $0.resource == permission.resource }
        if !permission.scopes.isEmpty || !permission.roles.isEmpty { current.apiPermissions.append(permission) }
        try await tenants.save(current, now: clock.now)
    }
}
