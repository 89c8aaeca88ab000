import Foundation
import IdentityDirectory
import IdentityServer
import TodoModels

extension ClientSettings {
    /// The settings of the default tenant's public client, as `serve` writes them.
    init(identityBaseURL: String, taskAPIBase: String, seed: DevTenantSeed, caCertificate: String?) {
        let tenant = seed.tenant
        self.init(authority: "\(identityBaseURL)/\(tenant.name)/", clientID: seed.publicApp.clientIDString)
        taskAPI = taskAPIBase
        taskWebAPI = "\(taskAPIBase)/tasks"
        self.identityBaseURL = identityBaseURL
        // Graph's `/v1.0/me` is served by the identity service (SPEC §2.10).
        graphBaseURL = identityBaseURL
        extensionsAppID = tenant.extensionsAppID.uuidString.lowercased()
        self.tenant = tenant.name
        tenantID = tenant.guid
        webClientID = seed.webApp.clientIDString
        apiScopes = seed.apiScopes
        signUpSignInPolicy = "B2C_1_susi"
        signUpPolicy = "B2C_1_sign_up"
        signInPolicy = "B2C_1_sign_in"
        facebookPolicy = "B2C_1_facebook"
        passwordResetPolicy = "B2C_1_reset"
        profileEditPolicy = "B2C_1_edit_profile"
        ropcPolicy = "B2C_1_ROPC"
        fullScreen = false
        showClaims = true
        self.caCertificate = caCertificate
    }
}
