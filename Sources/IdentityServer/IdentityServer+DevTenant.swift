import Foundation
import WireCoding
import IdentityDirectory

extension IdentityServer {
    /// Creates the dev tenant if no tenant exists yet; otherwise returns the existing default
    /// tenant's apps (and makes sure the web app's redirect URIs cover `apiPort` and
    /// `webOrigins`). `legacyWebAppSecret` is a secret older versions kept in the data dir: it
    /// moves into the database when none is stored there.
    public func seedDevelopmentTenant(apiPort: Int, webOrigins: [String] = [], legacyWebAppSecret: String? = nil) async throws
        -> DevTenantSeed
    {
        // Instances started together on one PostgreSQL seed one after the other: the second
        // finds the first one's tenant, whole (issue 14).
        try await database.exclusively(key: 72_017) {
            var seed = try await self.seedOnce(apiPort: apiPort, webOrigins: webOrigins)
            if seed.webApp.displayName == DevTenant.webAppName, seed.webApp.kind == .confidential {
                seed.webAppSecret = try await self.webAppSecret(for: seed.webApp, minted: seed.webAppSecret, legacy: legacyWebAppSecret)
            }
            return seed
        }
    }

    /// The dev web app's secret from the database; a just-minted or legacy one is stored first,
    /// and an app with none (a data dir whose file was lost) gets a new one.
    private func webAppSecret(for app: AppRegistration, minted: String?, legacy: String?) async throws -> String {
        let store = ServiceSecretStore(database: database, dataKey: service.dataKey)
        let name = ServiceSecretStore.webAppSecretName(clientID: app.clientID)
        let now = clock.now
        if minted == nil, let stored = try await store.read(name) { return stored }
        let secret: String
        if let minted {
            secret = minted
        } else if let legacy, !legacy.isEmpty, try await tenants.verifySecret(clientID: app.clientID, secret: legacy, now: now) {
            // Only a file that still holds one of the app's secrets moves in.
            secret = legacy
        } else {
            secret = IdentityAdministration.newClientSecret()
            try await tenants.addSecret(clientID: app.clientID, secret: secret, now: now, expiresAt: nil)
            logger.notice("the web app had no stored client secret: added a new one", metadata: ["client_id": "\(app.clientIDString)"])
        }
        try await store.write(name, secret, now: now)
        return secret
    }

    private func seedOnce(apiPort: Int, webOrigins: [String]) async throws -> DevTenantSeed {
        let now = clock.now
        if let existing = try await tenants.defaultTenant() {
            // A dev tenant from an older version gets the flows added since.
            if existing.name == DevTenant.name {
                if existing.languages.isEmpty {
                    var upgraded = existing
                    upgraded.languages = PageLanguage.builtIn
                    try await tenants.save(upgraded, now: now)
                }
                let names = Set(try await tenants.userFlows(tenantID: existing.id).map { $0.name.lowercased() })
                for flow in DevTenant.flows(tenantID: existing.id) where !names.contains(flow.name.lowercased()) {
                    try await tenants.save(flow)
                }
            }
            let apps = try await tenants.applications(tenantID: existing.id)
            let named = apps.first { $0.displayName == DevTenant.publicAppName }
            guard let publicApp = named ?? apps.first(where: { $0.kind == .public }) else {
                throw SeedError.noPublicApplication(existing.name)
            }
            guard var webApp = apps.first(where: { $0.displayName == DevTenant.webAppName }) else {
                // A declared tenant: its own confidential app (if any) plays the web app.
                return DevTenantSeed(
                    tenant: existing, publicApp: publicApp, webApp: apps.first { $0.kind == .confidential } ?? publicApp,
                    webAppSecret: nil)
            }
            let wanted = DevTenant.webRedirectURIs(apiPort: apiPort) + webOrigins.map { "\($0)/auth/openid/return" }
            var changed = false
            if !Set(wanted).isSubset(of: webApp.redirectURIs) {
                webApp.redirectURIs += wanted.filter { !webApp.redirectURIs.contains($0) }
                changed = true
            }
            // Data dirs from before API permissions existed: the dev apps get what they always used.
            var grantedPublic = publicApp
            if publicApp.displayName == DevTenant.publicAppName, publicApp.apiPermissions.isEmpty {
                grantedPublic.apiPermissions = DevTenant.permissions(taskAPI: publicApp, web: false)
                try await tenants.save(grantedPublic, now: now)
            }
            if webApp.apiPermissions.isEmpty {
                webApp.apiPermissions = DevTenant.permissions(taskAPI: publicApp, web: true)
                changed = true
            }
            if changed { try await tenants.save(webApp, now: now) }
            return DevTenantSeed(tenant: existing, publicApp: grantedPublic, webApp: webApp, webAppSecret: nil)
        }
        var tenant = Tenant(
            id: UUID(), name: DevTenant.name, displayName: "TodoB2C", defaultPolicy: "B2C_1_susi", isDefault: true,
            userAttributes: [DevTenant.loyaltyNumber])
        // English and Spanish pages; `ui_locales=es` picks Spanish.
        tenant.languages = PageLanguage.builtIn
        try await tenants.save(tenant, now: now)
        for flow in DevTenant.flows(tenantID: tenant.id) { try await tenants.save(flow) }
        var publicApp = AppRegistration(
            clientID: UUID(), tenantID: tenant.id, displayName: DevTenant.publicAppName, kind: .public,
            redirectURIs: DevTenant.nativeRedirectURIs, allowPublicClientFlows: true, allowImplicit: false,
            appIDURI: "https://\(DevTenant.name)/tasks", exposedScopes: ["tasks.read", "tasks.write"])
        publicApp.apiPermissions = DevTenant.permissions(taskAPI: publicApp, web: false)
        // A dev tenant's native app signs users in with the native authentication API too.
        publicApp.nativeAuthentication = true
        try await tenants.save(publicApp, now: now)
        let webApp = AppRegistration(
            clientID: UUID(), tenantID: tenant.id, displayName: DevTenant.webAppName, kind: .confidential,
            redirectURIs: DevTenant.webRedirectURIs(apiPort: apiPort) + webOrigins.map { "\($0)/auth/openid/return" },
            apiPermissions: DevTenant.permissions(taskAPI: publicApp, web: true))
        try await tenants.save(webApp, now: now)
        let secret = IdentityAdministration.newClientSecret()
        try await tenants.addSecret(clientID: webApp.clientID, secret: secret, now: now, expiresAt: nil)
        _ = try await keys.activeKey()
        return DevTenantSeed(tenant: tenant, publicApp: publicApp, webApp: webApp, webAppSecret: secret, created: true)
    }
}
