import Foundation
import IdentityClient
import TodoModels

/// The CLI's view of the shared ``ClientSettings`` file: the tutorials' fallbacks filled in and
/// the URLs checked. Every other setting reads straight through to the file.
@dynamicMemberLookup
struct ResolvedSettings {
    let file: ClientSettings
    let taskAPI: URL

    subscript<Value>(dynamicMember keyPath: KeyPath<ClientSettings, Value>) -> Value { file[keyPath: keyPath] }

    var signUpSignInPolicy: String { file.signUpSignInPolicy ?? file.signInPolicy ?? "B2C_1_susi" }
    var signUpPolicy: String { file.signUpPolicy ?? signUpSignInPolicy }
    var signInPolicy: String { file.signInPolicy ?? signUpSignInPolicy }
    var facebookPolicy: String { file.facebookPolicy ?? signUpSignInPolicy }
    var passwordResetPolicy: String { file.passwordResetPolicy ?? "B2C_1_reset" }
    var profileEditPolicy: String { file.profileEditPolicy ?? "B2C_1_edit_profile" }
    var ropcPolicy: String { file.ropcPolicy ?? "B2C_1_ROPC" }

    /// Reads JSON or a property list (either format, whatever the extension).
    init(contentsOf url: URL) throws {
        do {
            file = try ClientSettings.read(from: url)
        } catch ClientSettings.ReadError.missing(let path) {
            throw CommandError("no settings at \(path): start `todo-server serve` first, or pass --settings PATH")
        } catch let error as ClientSettings.ReadError {
            throw CommandError(error.description)
        }
        guard let api = file.taskAPIOrigin, let apiURL = URL(string: api) else { throw CommandError("\(url.path) has no 'taskAPI'") }
        // Bearer tokens never travel in clear text off this machine.
        for (key, value) in [("taskAPI", api), ("identityBaseURL", file.identityBaseURL)] {
            guard let value, let components = URLComponents(string: value) else { continue }
            if components.scheme?.lowercased() != "https" && !Authority.isLoopback(components.host ?? "") {
                throw CommandError("\(url.path): '\(key)' must use https (http is allowed for loopback hosts only)")
            }
        }
        taskAPI = apiURL
    }
}
