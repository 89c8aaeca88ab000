import Foundation
import IdentityServer

/// `<data-dir>/settings.json` (and its `.plist` twin): the client settings of the dev tenant with
/// the keys of the tutorials' `settings.plist`, so the CLI, the web app and samples never need an
/// id copied by hand (SPEC §1).
struct ClientSettings {
    var identityBaseURL: String
    var taskAPIBase: String
    var seed: DevTenantSeed
    var caCertificate: String?

    var dictionary: [String: Any] {
        let tenant = seed.tenant
        var settings: [String: Any] = [
            "authority": "\(identityBaseURL)/\(tenant.name)/",
            "clientId": seed.publicApp.clientIDString,
            "scopes": [seed.publicApp.clientIDString],
            "additionalScopes": [String](),
            "redirectUri": "http://127.0.0.1",
            "taskWebAPI": "\(taskAPIBase)/tasks",
            "taskAPI": taskAPIBase,
            "emailSignUpPolicyId": "B2C_1_sign_up",
            "emailSignInPolicyId": "B2C_1_sign_in",
            "faceBookSignInPolicyId": "B2C_1_facebook",
            "signUpSignInPolicyId": "B2C_1_susi",
            "passwordResetPolicyId": "B2C_1_reset",
            "profileEditPolicyId": "B2C_1_edit_profile",
            "ropcPolicyId": "B2C_1_ROPC",
            "fullScreen": false,
            "showClaims": true,
            "tenant": tenant.name,
            "tenantId": tenant.guid,
            "identityBaseURL": identityBaseURL,
            "webClientId": seed.webApp.clientIDString,
            "apiScopes": seed.publicApp.exposedScopes.map { "\(seed.publicApp.appIDURI ?? "")/\($0)" },
        ]
        if let caCertificate { settings["caCertificate"] = caCertificate }
        return settings
    }

    /// Writes both files atomically; returns the JSON path.
    func write(to dataDir: String) throws -> String {
        let directory = URL(fileURLWithPath: dataDir)
        let json = directory.appendingPathComponent("settings.json")
        let data = try JSONSerialization.data(withJSONObject: dictionary, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        try data.write(to: json, options: .atomic)
        let plist = try PropertyListSerialization.data(fromPropertyList: dictionary, format: .xml, options: 0)
        try plist.write(to: directory.appendingPathComponent("settings.plist"), options: .atomic)
        return json.path
    }
}
