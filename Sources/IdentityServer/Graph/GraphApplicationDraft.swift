import Foundation
import IdentityDirectory
import TodoModels
import WireCoding

/// Graph's `application` resource over ``AppRegistration`` (SPEC §2.14): what it shows, and
/// the create and update bodies it takes. The object id is derived from the app id (every
/// instance agrees); the app id is the client id.
enum GraphApplicationJSON {
    static let properties = [
        "id", "appId", "displayName", "createdDateTime", "deletedDateTime", "signInAudience", "identifierUris", "isFallbackPublicClient",
        "groupMembershipClaims", "api", "web", "spa", "publicClient", "requiredResourceAccess", "passwordCredentials", "keyCredentials",
        "appRoles", "publisherDomain", "tags", "nativeAuthenticationApisEnabled",
    ]
    static let filterable = ["appId", "displayName", "id", "identifierUris", "publisherDomain", "signInAudience"]
    /// B2C registers apps for "accounts in any identity provider or organizational directory".
    static let signInAudience = "AzureADandPersonalMicrosoftAccount"
    static let audiences = ["AzureADandPersonalMicrosoftAccount", "AzureADMyOrg", "AzureADMultipleOrgs", "PersonalMicrosoftAccount"]

    static func objectID(of app: AppRegistration) -> String { UUID(nameBased: "todo-application:\(app.clientIDString)").uuidString.lowercased() }

    static func members(_ app: AppRegistration, tenant: Tenant, credentials: [PasswordCredential]) -> [(String, JSONText)] {
        let dates = ISO8601DateFormatter()
        func uris(_ platform: RedirectPlatform) -> JSONText { .array(app.redirectURIs(on: platform).map(JSONText.string)) }
        let scopes = app.exposedScopes.map { scope in
            JSONText.object([
                ("adminConsentDescription", .string(scope)), ("adminConsentDisplayName", .string(scope)),
                ("id", .string(app.scopeID(scope).uuidString.lowercased())), ("isEnabled", .bool(true)), ("type", .string("Admin")),
                ("userConsentDescription", .null), ("userConsentDisplayName", .null), ("value", .string(scope)),
            ])
        }
        return [
            ("id", .string(objectID(of: app))), ("deletedDateTime", .null), ("appId", .string(app.clientIDString)),
            ("displayName", .string(app.displayName)), ("signInAudience", .string(signInAudience)),
            ("publisherDomain", .string(tenant.name)),
            ("identifierUris", .array(app.appIDURI.map { [.string($0)] } ?? [])),
            ("isFallbackPublicClient", .bool(app.allowPublicClientFlows)),
            ("groupMembershipClaims", app.groupMembershipClaims.map(JSONText.string) ?? .null),
            ("nativeAuthenticationApisEnabled", .string(app.nativeAuthentication ? "all" : "none")),
            ("tags", .array([])), ("appRoles", .array([])), ("keyCredentials", .array([])),
            (
                "api",
                .object([
                    ("acceptMappedClaims", .null), ("knownClientApplications", .array([])), ("requestedAccessTokenVersion", .int(2)),
                    ("oauth2PermissionScopes", .array(scopes)), ("preAuthorizedApplications", .array([])),
                ])
            ),
            (
                "web",
                .object([
                    ("homePageUrl", .null), ("logoutUrl", .null), ("redirectUris", uris(.web)),
                    (
                        "implicitGrantSettings",
                        .object([
                            ("enableAccessTokenIssuance", .bool(app.allowImplicit)), ("enableIdTokenIssuance", .bool(app.allowImplicit)),
                        ])
                    ),
                ])
            ),
            ("spa", .object([("redirectUris", uris(.spa))])),
            ("publicClient", .object([("redirectUris", uris(.publicClient))])),
            (
                "requiredResourceAccess",
                .array(
                    app.requiredResourceAccess.map { entry in
                        .object([
                            ("resourceAppId", .string(entry.resourceAppId)),
                            (
                                "resourceAccess",
                                .array(entry.resourceAccess.map { .object([("id", .string($0.id.uuidString.lowercased())), ("type", .string($0.type))]) })
                            ),
                        ])
                    })
            ),
            ("passwordCredentials", .array(credentials.map { credential(JSONText.null, $0, dates: dates) })),
        ]
    }

    /// A `passwordCredential`; `secretText` only in `addPassword`'s answer.
    static func credential(_ secretText: JSONText, _ credential: PasswordCredential, dates: ISO8601DateFormatter = ISO8601DateFormatter())
        -> JSONText
    {
        .object([
            ("customKeyIdentifier", .null), ("displayName", credential.displayName.map(JSONText.string) ?? .null),
            ("endDateTime", credential.end.map { .string(dates.string(from: $0)) } ?? .null), ("hint", .string(credential.hint)),
            ("keyId", .string(credential.keyID.uuidString.lowercased())), ("secretText", secretText),
            ("startDateTime", .string(dates.string(from: credential.start))),
        ])
    }
}

/// Reads `POST /applications` and `PATCH /applications/{id}` bodies onto a registration: each
/// property checked, anything this service does not keep refused, nothing written here.
enum GraphApplicationDraft {
    static let ignored: Set<String> = ["@odata.type", "id", "appId", "deletedDateTime", "publisherDomain", "createdDateTime"]
    static let accepted: Set<String> = [
        "displayName", "signInAudience", "identifierUris", "isFallbackPublicClient", "groupMembershipClaims", "nativeAuthenticationApisEnabled", "api", "web", "spa",
        "publicClient", "requiredResourceAccess", "tags", "appRoles", "keyCredentials", "passwordCredentials",
    ]

    /// Applies `body` to `app`; returns the names of the properties it changed.
    static func apply(_ body: [String: JSONValue], to app: inout AppRegistration, creating: Bool) throws -> [String] {
        for key in body.keys where !accepted.contains(key) && !ignored.contains(key) {
            throw GraphError.badRequest("Property '\(TextRules.printable(String(key.prefix(64))))' does not exist on type 'microsoft.graph.application'.")
        }
        var changed: [String] = []
        var platforms = Dictionary(uniqueKeysWithValues: RedirectPlatform.allCases.map { ($0, app.redirectURIs(on: $0)) })
        var platformsChanged = false
        for (key, value) in body.sorted(by: { $0.key < $1.key }) {
            switch key {
            case "displayName":
                guard case .string(let name) = value else { throw invalid(key) }
                app.displayName = name
            case "signInAudience":
                guard case .string(let audience) = value, GraphApplicationJSON.audiences.contains(audience) else { throw invalid(key) }
                guard audience == GraphApplicationJSON.signInAudience else {
                    throw GraphError.badRequest("A B2C tenant's apps are for AzureADandPersonalMicrosoftAccount.")
                }
            case "identifierUris":
                let uris = try strings(value, key)
                guard uris.count <= 1 else { throw GraphError.badRequest("This service keeps one identifierUri per app.") }
                app.appIDURI = uris.first
            case "isFallbackPublicClient":
                switch value {
                case .bool(let flag): app.allowPublicClientFlows = flag
                case .null: app.allowPublicClientFlows = false
                default: throw invalid(key)
                }
            case "groupMembershipClaims":
                switch value {
                case .string(let claims): app.groupMembershipClaims = claims
                case .null: app.groupMembershipClaims = nil
                default: throw invalid(key)
                }
            case "nativeAuthenticationApisEnabled":
                switch value {
                case .string("all"): app.nativeAuthentication = true
                case .string("none"), .null: app.nativeAuthentication = false
                default: throw invalid(key)
                }
            case "web":
                guard case .object(let web) = value else { throw invalid(key) }
                for member in web.keys where !["redirectUris", "implicitGrantSettings", "homePageUrl", "logoutUrl", "redirectUriSettings"].contains(member) {
                    throw invalid("web.\(member)")
                }
                if let uris = web["redirectUris"] {
                    platforms[.web] = try strings(uris, "web.redirectUris")
                    platformsChanged = true
                }
                if case .object(let implicit)? = web["implicitGrantSettings"] {
                    let flags = ["enableIdTokenIssuance", "enableAccessTokenIssuance"].compactMap { name -> Bool? in
                        if case .bool(let flag)? = implicit[name] { flag } else { nil }
                    }
                    if !flags.isEmpty { app.allowImplicit = flags.contains(true) }
                }
                for member in ["homePageUrl", "logoutUrl"] where web[member] != nil && web[member] != .null {
                    throw GraphError.badRequest("This service does not keep web.\(member).")
                }
            case "spa", "publicClient":
                guard case .object(let platform) = value, platform.keys.allSatisfy({ $0 == "redirectUris" }) else { throw invalid(key) }
                if let uris = platform["redirectUris"] {
                    platforms[key == "spa" ? .spa : .publicClient] = try strings(uris, "\(key).redirectUris")
                    platformsChanged = true
                }
            case "api":
                guard case .object(let api) = value else { throw invalid(key) }
                for member in api.keys where !["oauth2PermissionScopes", "requestedAccessTokenVersion", "acceptMappedClaims", "knownClientApplications", "preAuthorizedApplications"].contains(member) {
                    throw invalid("api.\(member)")
                }
                if let scopes = api["oauth2PermissionScopes"] { try applyScopes(scopes, to: &app) }
            case "requiredResourceAccess":
                app.requiredResourceAccess = try resourceAccess(value)
            case "tags", "appRoles", "keyCredentials", "passwordCredentials":
                // Kept empty here: secrets come through addPassword, as Graph advises.
                guard case .array(let items) = value, items.isEmpty else {
                    throw GraphError.badRequest(
                        key == "passwordCredentials"
                            ? "Add secrets with POST /applications/{id}/addPassword." : "This service does not keep an app's \(key).")
                }
            default:
                continue
            }
            if !GraphApplicationDraft.ignored.contains(key) { changed.append(key) }
        }
        if platformsChanged {
            let all = platforms.values.flatMap { $0 }
            guard Set(all).count == all.count else { throw GraphError.badRequest("A redirect URI is registered on one platform only.") }
            // A web redirect is a server's: such an app authenticates at the token endpoint.
            if !(platforms[.web] ?? []).isEmpty, app.kind == .public { app.setKind(.confidential) }
            app.setRedirectURIs(platforms)
        }
        if creating, body["displayName"] == nil { throw GraphError.badRequest("displayName is required.") }
        return changed
    }

    private static func applyScopes(_ value: JSONValue, to app: inout AppRegistration) throws {
        guard case .array(let items) = value, items.count <= 100 else { throw invalid("api.oauth2PermissionScopes") }
        var names: [String] = []
        var ids: [String: UUID] = [:]
        for item in items {
            guard case .object(let scope) = item, case .string(let name)? = scope["value"] else { throw invalid("api.oauth2PermissionScopes") }
            if case .bool(false)? = scope["isEnabled"] { continue }
            names.append(name)
            if case .string(let text)? = scope["id"] {
                guard let id = UUID(uuidString: text) else { throw invalid("api.oauth2PermissionScopes.id") }
                ids[name] = id
            }
        }
        app.exposedScopes = names
        var own: [String: UUID] = [:]
        let derivedApp = AppRegistration(clientID: app.clientID, tenantID: app.tenantID, displayName: "", kind: app.kind, redirectURIs: [])
        for (name, id) in ids where derivedApp.scopeID(name) != id { own[name] = id }
        app.scopeIDs = own
    }

    private static func resourceAccess(_ value: JSONValue) throws -> [RequiredResourceAccess] {
        guard case .array(let items) = value else { throw invalid("requiredResourceAccess") }
        return try items.map { item in
            guard case .object(let entry) = item, case .string(let resource)? = entry["resourceAppId"], UUID(uuidString: resource) != nil,
                case .array(let accesses)? = entry["resourceAccess"]
            else { throw invalid("requiredResourceAccess") }
            return RequiredResourceAccess(
                resourceAppId: resource,
                resourceAccess: try accesses.map { access in
                    guard case .object(let fields) = access, case .string(let idText)? = fields["id"], let id = UUID(uuidString: idText),
                        case .string(let type)? = fields["type"], ["Scope", "Role"].contains(type)
                    else { throw invalid("requiredResourceAccess.resourceAccess") }
                    return .init(id: id, type: type)
                })
        }
    }

    private static func strings(_ value: JSONValue, _ name: String) throws -> [String] {
        guard case .array(let items) = value else { throw invalid(name) }
        return try items.map { item in
            guard case .string(let text) = item else { throw invalid(name) }
            return text
        }
    }

    static func invalid(_ property: String) -> GraphError {
        GraphError.badRequest("Invalid value specified for property '\(TextRules.printable(property))' of resource 'Application'.")
    }
}
