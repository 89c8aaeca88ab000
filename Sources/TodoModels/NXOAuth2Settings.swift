import Foundation

/// `<data-dir>/settings-nxoauth2.plist`: the NXOAuth2 tutorial app's settings, under the keys of
/// its `SampleForB2C/settings.plist` (SPEC §2.8, https://github.com/Azure-Samples/active-directory-ios-native-nxoauth2-b2c/blob/complete/SampleForB2C/settings.plist), so
/// that app runs against this system with only this file swapped in.
public struct NXOAuth2Settings: Codable, Sendable, Equatable {
    /// NXOAuth2's account store name; the tutorial uses `B2C_Account`.
    public var accountIdentifier: String
    public var clientID: String
    /// Empty: the app is a public client, and NXOAuth2 still sends `client_secret=`.
    public var clientSecret: String
    /// `{base}/{tenant}/oauth2/v2.0/authorize?p={policy}`
    public var authURL: String
    /// `{base}/{tenant}/login`, which the app only compares navigations against.
    public var loginURL: String
    /// The redirect URI the app's web view watches for ("bhh"): `urn:ietf:wg:oauth:2.0:oob`.
    public var bhh: String
    /// `{base}/{tenant}/oauth2/v2.0/token?p={policy}`
    public var tokenURL: String
    public var keychain: String
    /// The content type of the app's token requests.
    public var contentType: String
    /// The base serving the .NET TaskService format at `{taskAPI}/api/tasks`.
    public var taskAPI: String
    /// Not the tutorial's: the development CA under `serve --tls`, for the `todo` CLI.
    public var caCertificate: String?

    public init(
        clientID: String, tenantURL: String, policy: String, taskServiceBase: String, caCertificate: String? = nil
    ) {
        accountIdentifier = "B2C_Account"
        self.clientID = clientID
        clientSecret = ""
        let query = "p=\(policy.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? policy)"
        authURL = "\(tenantURL)/oauth2/v2.0/authorize?\(query)"
        loginURL = "\(tenantURL)/login"
        bhh = "urn:ietf:wg:oauth:2.0:oob"
        tokenURL = "\(tenantURL)/oauth2/v2.0/token?\(query)"
        keychain = "com.microsoft.azureactivedirectory.samples.graph.QuickStart"
        contentType = "application/x-www-form-urlencoded"
        taskAPI = taskServiceBase
        self.caCertificate = caCertificate
    }

    /// The same system as ``ClientSettings`` see it, for the `todo` CLI: the authority and
    /// policy come from `authURL`, and the Task API is `taskAPI`'s origin (our own `/api/tasks`
    /// is served there, the .NET shape under `taskAPI` itself).
    public var clientSettings: ClientSettings? {
        guard let auth = URLComponents(string: authURL), let scheme = auth.scheme, let host = auth.host,
            let range = auth.path.range(of: "/oauth2/", options: .caseInsensitive)
        else { return nil }
        let port = auth.port.map { ":\($0)" } ?? ""
        let origin = "\(scheme)://\(host)\(port)"
        let tenantPath = String(auth.path[..<range.lowerBound])
        var settings = ClientSettings(authority: "\(origin)\(tenantPath)/", clientID: clientID, redirectURI: bhh)
        settings.identityBaseURL = origin
        settings.tenant = tenantPath.split(separator: "/").last.map(String.init)
        settings.signUpSignInPolicy = auth.queryItems?.first { $0.name.lowercased() == "p" }?.value
        if let api = URLComponents(string: taskAPI), let apiScheme = api.scheme, let apiHost = api.host {
            settings.taskAPI = "\(apiScheme)://\(apiHost)\(api.port.map { ":\($0)" } ?? "")"
        }
        settings.caCertificate = caCertificate
        return settings
    }

    /// Writes the plist (XML, as Xcode keeps it) atomically into `directory`.
    public func write(to directory: URL) throws {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .xml
        try encoder.encode(self).writeIfChanged(to: directory.appendingPathComponent("settings-nxoauth2.plist"))
    }
}
