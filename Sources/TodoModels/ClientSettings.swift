import Foundation

/// `<data-dir>/settings.json` and its `.plist` twin: what a client needs to reach this system,
/// under the keys of the B2C tutorials' `settings.plist` (SPEC §1). `todo-server` writes it; the
/// `todo` CLI, the web app and the tutorials' own apps read it, so no id is ever copied by hand.
public struct ClientSettings: Codable, Sendable, Equatable {
    /// `{identity base}/{tenant}/`: the B2C authority without a policy.
    public var authority: String
    public var clientID: String
    public var scopes: [String]
    public var additionalScopes: [String]
    public var redirectURI: String
    /// The Task API's origin.
    public var taskAPI: String?
    /// The ADAL tutorial's name for the API: the origin followed by `/tasks`.
    public var taskWebAPI: String?
    public var identityBaseURL: String?
    /// The origin serving Microsoft Graph's `/v1.0/…` (`https://graph.microsoft.com` in the cloud).
    public var graphBaseURL: String?
    /// The app id of the tenant's b2c-extensions-app: Graph names the tenant's own user attributes
    /// `extension_{this id without dashes}_{name}`.
    public var extensionsAppID: String?
    public var tenant: String?
    public var tenantID: String?
    /// The confidential "web" twin of the public client (the browser app).
    public var webClientID: String?
    /// The API's scopes as full URIs (`{App ID URI}/{scope}`).
    public var apiScopes: [String]
    public var signUpSignInPolicy: String?
    public var signUpPolicy: String?
    public var signInPolicy: String?
    public var facebookPolicy: String?
    public var passwordResetPolicy: String?
    public var profileEditPolicy: String?
    public var ropcPolicy: String?
    public var fullScreen: Bool?
    public var showClaims: Bool?
    /// The development CA to trust under `serve --tls`.
    public var caCertificate: String?

    enum CodingKeys: String, CodingKey {
        case authority
        case clientID = "clientId"
        case scopes, additionalScopes
        case redirectURI = "redirectUri"
        case taskAPI, taskWebAPI, identityBaseURL, graphBaseURL, tenant
        case extensionsAppID = "extensionsAppId"
        case tenantID = "tenantId"
        case webClientID = "webClientId"
        case apiScopes
        case signUpSignInPolicy = "signUpSignInPolicyId"
        case signUpPolicy = "emailSignUpPolicyId"
        case signInPolicy = "emailSignInPolicyId"
        case facebookPolicy = "faceBookSignInPolicyId"
        case passwordResetPolicy = "passwordResetPolicyId"
        case profileEditPolicy = "profileEditPolicyId"
        case ropcPolicy = "ropcPolicyId"
        case fullScreen, showClaims, caCertificate
    }

    public init(authority: String, clientID: String, redirectURI: String = "http://127.0.0.1") {
        self.authority = authority
        self.clientID = clientID
        self.scopes = [clientID]
        self.additionalScopes = []
        self.redirectURI = redirectURI
        self.apiScopes = []
    }

    /// Tolerant of the tutorials' files: only `authority` and `clientId` are required; an
    /// empty string counts as absent.
    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        func text(_ key: CodingKeys) throws -> String? {
            try values.decodeIfPresent(String.self, forKey: key).flatMap { $0.isEmpty ? nil : $0 }
        }
        func required(_ key: CodingKeys) throws -> String {
            guard let value = try text(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: values.codingPath, debugDescription: "'\(key.rawValue)' is missing"))
            }
            return value
        }
        authority = try required(.authority)
        clientID = try required(.clientID)
        scopes = try values.decodeIfPresent([String].self, forKey: .scopes).flatMap { $0.isEmpty ? nil : $0 } ?? [clientID]
        additionalScopes = try values.decodeIfPresent([String].self, forKey: .additionalScopes) ?? []
        redirectURI = try text(.redirectURI) ?? "http://127.0.0.1"
        taskAPI = try text(.taskAPI)
        taskWebAPI = try text(.taskWebAPI)
        identityBaseURL = try text(.identityBaseURL)
        graphBaseURL = try text(.graphBaseURL)
        extensionsAppID = try text(.extensionsAppID)
        tenant = try text(.tenant)
        tenantID = try text(.tenantID)
        webClientID = try text(.webClientID)
        apiScopes = try values.decodeIfPresent([String].self, forKey: .apiScopes) ?? []
        signUpSignInPolicy = try text(.signUpSignInPolicy)
        signUpPolicy = try text(.signUpPolicy)
        signInPolicy = try text(.signInPolicy)
        facebookPolicy = try text(.facebookPolicy)
        passwordResetPolicy = try text(.passwordResetPolicy)
        profileEditPolicy = try text(.profileEditPolicy)
        ropcPolicy = try text(.ropcPolicy)
        fullScreen = try values.decodeIfPresent(Bool.self, forKey: .fullScreen)
        showClaims = try values.decodeIfPresent(Bool.self, forKey: .showClaims)
        caCertificate = try text(.caCertificate)
    }

    /// The Task API's origin: `taskAPI`, else `taskWebAPI` without its `/tasks`.
    public var taskAPIOrigin: String? {
        taskAPI ?? taskWebAPI.map { $0.hasSuffix("/tasks") ? String($0.dropLast("/tasks".count)) : $0 }
    }

    public enum ReadError: Error, CustomStringConvertible {
        case missing(path: String)
        case unreadable(path: String, reason: String)

        public var description: String {
            switch self {
            case .missing(let path): "no settings at \(path)"
            case .unreadable(let path, let reason): "\(path) is not a settings file: \(reason)"
            }
        }
    }

    /// Reads JSON or a property list, whatever the file's extension: ours, the ADAL tutorial's
    /// `settings.plist`, or the NXOAuth2 tutorial's (``NXOAuth2Settings``).
    public static func read(from url: URL) throws -> ClientSettings {
        guard let data = FileManager.default.contents(atPath: url.path) else { throw ReadError.missing(path: url.path) }
        do {
            return try JSONDecoder().decode(ClientSettings.self, from: data)
        } catch let jsonError {
            if let settings = try? PropertyListDecoder().decode(ClientSettings.self, from: data) { return settings }
            if let nxoauth2 = try? PropertyListDecoder().decode(NXOAuth2Settings.self, from: data), let settings = nxoauth2.clientSettings {
                return settings
            }
            let reason: String
            if case DecodingError.keyNotFound(let key, _) = jsonError {
                reason = "it has no '\(key.stringValue)'"
            } else {
                reason = "it is neither JSON nor a property list of settings"
            }
            throw ReadError.unreadable(path: url.path, reason: reason)
        }
    }

    /// Writes `settings.json` and `settings.plist` into `directory`, each atomically; returns the
    /// JSON file's URL.
    @discardableResult
    public func write(to directory: URL) throws -> URL {
        let json = JSONEncoder()
        json.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let jsonURL = directory.appendingPathComponent("settings.json")
        try json.encode(self).writeIfChanged(to: jsonURL)
        let plist = PropertyListEncoder()
        plist.outputFormat = .xml
        try plist.encode(self).writeIfChanged(to: directory.appendingPathComponent("settings.plist"))
        return jsonURL
    }
}

extension Data {
    /// Writes atomically, unless the file holds these bytes already: a restart with nothing
    /// changed writes nothing, so it works on a full disk or a read-only data dir (issue 14).
    func writeIfChanged(to url: URL) throws {
        if let existing = try? Data(contentsOf: url), existing == self { return }
        try write(to: url, options: .atomic)
    }
}
