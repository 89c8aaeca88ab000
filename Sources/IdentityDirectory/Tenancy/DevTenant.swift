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

    package init(
        tenant: Tenant,
        publicApp: AppRegistration,
        webApp: AppRegistration,
        webAppSecret: String? = nil,
        created: Bool = false
    ) {
        self.tenant = tenant
        self.publicApp = publicApp
        self.webApp = webApp
        self.webAppSecret = webAppSecret
        self.created = created
    }
}

public enum SeedError: Error, CustomStringConvertible {
    case noPublicApplication(String)

    public var description: String {
        switch self {
        case .noPublicApplication(let tenant): "the default tenant \(tenant) has no public application for settings.json"
        }
    }
}
