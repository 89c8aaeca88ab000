import Foundation
import IdentityClient

/// The client settings `todo-server` writes to `<data-dir>/settings.json` (and `.plist`), with
/// the keys of the B2C tutorials' `settings.plist` (SPEC §1).
struct ClientSettings {
    var authority: String
    var clientID: String
    var scopes: [String]
    var redirectURI: String
    var taskAPI: URL
    var identityBaseURL: String?
    var signUpSignInPolicy: String
    var signUpPolicy: String
    var signInPolicy: String
    var facebookPolicy: String
    var passwordResetPolicy: String
    var profileEditPolicy: String
    var ropcPolicy: String

    /// Reads JSON or a property list (either format, whatever the extension).
    init(contentsOf url: URL) throws {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw CommandError("no settings at \(url.path): start `todo-server serve` first, or pass --settings PATH")
        }
        let object =
            (try? JSONSerialization.jsonObject(with: data))
            ?? (try? PropertyListSerialization.propertyList(from: data, options: [], format: nil))
        guard let dictionary = object as? [String: Any] else {
            throw CommandError("\(url.path) is neither JSON nor a property list of settings")
        }
        func string(_ key: String) -> String? { (dictionary[key] as? String).flatMap { $0.isEmpty ? nil : $0 } }
        func required(_ key: String) throws -> String {
            guard let value = string(key) else { throw CommandError("\(url.path) has no '\(key)'") }
            return value
        }
        authority = try required("authority")
        clientID = try required("clientId")
        scopes = (dictionary["scopes"] as? [String]).flatMap { $0.isEmpty ? nil : $0 } ?? [clientID]
        redirectURI = string("redirectUri") ?? "http://127.0.0.1"
        // `taskAPI` is the API origin; the ADAL tutorial's `taskWebAPI` ends in `/tasks`.
        let api =
            string("taskAPI")
            ?? string("taskWebAPI").map { $0.hasSuffix("/tasks") ? String($0.dropLast("/tasks".count)) : $0 }
        guard let api, let apiURL = URL(string: api) else { throw CommandError("\(url.path) has no 'taskAPI'") }
        // Bearer tokens never travel in clear text off this machine.
        for (key, value) in [("taskAPI", api), ("identityBaseURL", dictionary["identityBaseURL"] as? String)] {
            guard let value, let components = URLComponents(string: value) else { continue }
            if components.scheme?.lowercased() != "https" && !Authority.isLoopback(components.host ?? "") {
                throw CommandError("\(url.path): '\(key)' must use https (http is allowed for loopback hosts only)")
            }
        }
        taskAPI = apiURL
        identityBaseURL = string("identityBaseURL")
        signUpSignInPolicy = string("signUpSignInPolicyId") ?? string("emailSignInPolicyId") ?? "B2C_1_susi"
        signUpPolicy = string("emailSignUpPolicyId") ?? signUpSignInPolicy
        signInPolicy = string("emailSignInPolicyId") ?? signUpSignInPolicy
        facebookPolicy = string("faceBookSignInPolicyId") ?? signUpSignInPolicy
        passwordResetPolicy = string("passwordResetPolicyId") ?? "B2C_1_reset"
        profileEditPolicy = string("profileEditPolicyId") ?? "B2C_1_edit_profile"
        ropcPolicy = string("ropcPolicyId") ?? "B2C_1_ROPC"
    }
}
