import Foundation
import WireCoding

/// The development tenant created on first start (SPEC §2.1): the tutorials' seven user flows, a
/// public app for the CLI and native clients, and its confidential twin for the web app.
public enum DevTenant {
    public static let name = "todob2c.onmicrosoft.com"
    public static let publicAppName = "TodoB2C"
    public static let webAppName = "TodoB2C Web"

    /// The dev tenant's own attribute (SPEC §2.11): collected by `B2C_1_sign_up` and the profile
    /// page, returned by every flow as `extension_loyaltyNumber`.
    public static let loyaltyNumber = CustomAttribute(name: "loyaltyNumber", type: .string, displayName: "Loyalty number")

    public static func flows(tenantID: UUID) -> [UserFlow] {
        let profile: [FlowAttribute] = [.displayName, .builtIn(.givenName), .builtIn(.surname)]
        let flows = [
            UserFlow(
                tenantID: tenantID, name: "B2C_1_susi", type: .signUpOrSignIn, identityProviders: [.local, .facebook],
                signUpAttributes: profile),
            UserFlow(
                tenantID: tenantID, name: "B2C_1_sign_up", type: .signUp, identityProviders: [.local],
                signUpAttributes: profile + [.custom(loyaltyNumber.name)]),
            UserFlow(tenantID: tenantID, name: "B2C_1_sign_in", type: .signIn, identityProviders: [.local]),
            UserFlow(tenantID: tenantID, name: "B2C_1_facebook", type: .signIn, identityProviders: [.facebook]),
            UserFlow(
                tenantID: tenantID, name: "B2C_1_edit_profile", type: .profileEdit, identityProviders: [.local, .facebook],
                signUpAttributes: profile + [.builtIn(.city), .builtIn(.country), .custom(DevTenant.loyaltyNumber.name)]),
            UserFlow(tenantID: tenantID, name: "B2C_1_reset", type: .passwordReset, identityProviders: [.local], signUpAttributes: []),
            UserFlow(tenantID: tenantID, name: "B2C_1_ROPC", type: .ropc, identityProviders: [.local], signUpAttributes: []),
        ]
        // Sign-up-or-sign-in with an authenticator app on every sign-in (SPEC §2.11).
        var withMFA = UserFlow(
            tenantID: tenantID, name: "B2C_1_susi_mfa", type: .signUpOrSignIn, identityProviders: [.local], signUpAttributes: profile)
        withMFA.mfa = MFAPolicy(methods: [.totp], enforcement: .always)
        return (flows + [withMFA]).map { flow in
            var flow = flow
            flow.applicationClaims.append(loyaltyNumber.claimName)
            return flow
        }
    }

    /// The loopback, custom-scheme and out-of-band redirect URIs native clients use.
    public static let nativeRedirectURIs = [
        "http://localhost", "http://127.0.0.1", "msauth.com.todob2c.app://auth", "todob2c://auth", "urn:ietf:wg:oauth:2.0:oob",
    ]

    /// What the dev tenant's apps are granted (admin consent given): the Task API's scopes and
    /// Graph's User.Read, what the tutorials ask for; the web app may also call the API as itself.
    public static func permissions(taskAPI: AppRegistration, web: Bool) -> [APIPermission] {
        [
            APIPermission(resource: taskAPI.clientIDString, scopes: taskAPI.exposedScopes, roles: web ? ["Tasks.ReadWrite.All"] : []),
            APIPermission(resource: APIPermission.graphResource, scopes: ["User.Read"]),
        ]
    }

    public static func webRedirectURIs(apiPort: Int) -> [String] {
        // http and https: `serve --tls` serves the web app over TLS on the same port.
        ["http", "https"].flatMap { scheme in
            ["\(scheme)://localhost:\(apiPort)/auth/openid/return", "\(scheme)://127.0.0.1:\(apiPort)/auth/openid/return"]
        }
    }
}

/// What seeding produced: ids for `settings.json`, and the dev web app's client secret (kept
/// sealed in the database for every instance; nil for a declared tenant's app).
public struct DevTenantSeed: Sendable {
    public var tenant: Tenant
    public var publicApp: AppRegistration
    public var webApp: AppRegistration
    public var webAppSecret: String?
    /// Whether this call created the tenant (one of several instances started together did).
    public var created = false

    /// The API's scopes as full URIs (`{App ID URI}/{scope}`), as clients request them.
    public var apiScopes: [String] { publicApp.exposedScopes.map { "\(publicApp.appIDURI ?? "")/\($0)" } }
}

public enum SeedError: Error, CustomStringConvertible {
    case noPublicApplication(String)

    public var description: String {
        switch self {
        case .noPublicApplication(let tenant): "the default tenant \(tenant) has no public application for settings.json"
        }
    }
}

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
