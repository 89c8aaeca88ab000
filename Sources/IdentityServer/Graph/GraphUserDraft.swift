import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

// MARK: - Request bodies

/// A JSON object body, or Graph's 400 / 415 / 413.
enum GraphBody {
    static func object(_ request: Request, context: GraphRequestContext) async throws -> [String: JSONValue] {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/json") else {
            throw GraphError(status: .unsupportedMediaType, code: "BadRequest", message: "The request body must be application/json.")
        }
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: context.maxUploadSize)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw GraphError(status: .contentTooLarge, code: "BadRequest", message: "The request body is larger than 64 KiB.")
        }
        guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(buffer: buffer)) else {
            throw GraphError.badRequest("The request body is not a JSON object.", code: "BadRequest")
        }
        return object
    }
}

/// Reads B2C's `POST /users` and `PATCH /users/{id}` bodies into account changes; every
/// property is checked and anything unknown is refused, before anything is written.
enum GraphUserDraft {
    static let attributeProperties = ["givenName", "surname", "jobTitle", "city", "country", "postalCode", "state", "streetAddress"]
    /// Accepted and ignored: Graph requires or sends them, and they carry nothing this service keeps.
    static let ignored: Set<String> = ["@odata.type", "mailNickname", "userPrincipalName", "creationType", "mail", "id"]

    static func newAccount(from body: [String: JSONValue], tenant: Tenant) throws -> NewAccount {
        let known = Set(["accountEnabled", "displayName", "identities", "passwordProfile", "passwordPolicies"] + attributeProperties)
        let extensions = try extensionValues(body, tenant: tenant)
        try refuseUnknown(body, known: known.union(ignored).union(extensions.keys))
        guard let displayName = try string(body, "displayName") else {
            throw GraphError.badRequest("Property 'displayName' is required.")
        }
        let identity = try signInIdentity(body["identities"], tenant: tenant)
        var account = NewAccount(identity: identity, displayName: displayName)
        if let profile = try passwordProfile(body) {
            account.password = profile.password
            account.forcePasswordChange = profile.forceChange ?? false
        }
        if case .email = identity, account.password == nil {
            throw GraphError.badRequest("Property 'passwordProfile' is required for an emailAddress identity.")
        }
        account.accountEnabled = try bool(body, "accountEnabled") ?? true
        account.passwordPolicies = try passwordPolicies(body)
        for name in attributeProperties { if let value = try string(body, name) { account.attributes[name] = value } }
        for (_, value) in extensions { account.attributes[value.key] = value.stored }
        return account
    }

    /// The body's extension properties of this tenant, by their name in the body: the account's
    /// key (`extension_{name}`) and the value as stored (nil: remove). A JSON type other than the
    /// declared one is refused as Graph refuses it.
    private static func extensionValues(_ body: [String: JSONValue], tenant: Tenant) throws -> [String: (key: String, stored: String?)] {
        var values: [String: (key: String, stored: String?)] = [:]
        for (graphName, attribute) in GraphUserJSON.extensionProperties(of: tenant) {
            guard let property = body.keys.first(where: { $0.lowercased() == graphName.lowercased() }), let json = body[property] else {
                continue
            }
            switch attribute.storedValue(fromJSON: json) {
            case .success(let stored): values[property] = (attribute.claimName, stored)
            case .failure(let problem):
                throw GraphError.badRequest("Invalid value specified for property '\(graphName)' of resource 'User'. \(problem.message)")
            }
        }
        return values
    }

    static func changes(from body: [String: JSONValue], tenant: Tenant) throws -> AccountChanges {
        let known = Set(["accountEnabled", "displayName", "passwordProfile", "passwordPolicies"] + attributeProperties)
        let extensions = try extensionValues(body, tenant: tenant)
        if body["identities"] != nil {
            throw GraphError.badRequest("Changing 'identities' is not supported by this service; create the account anew.")
        }
        try refuseUnknown(body, known: known.union(ignored).union(extensions.keys))
        var changes = AccountChanges()
        for (_, value) in extensions { changes.attributes[value.key] = .some(value.stored) }
        changes.displayName = try string(body, "displayName")
        changes.accountEnabled = try bool(body, "accountEnabled")
        if body.keys.contains("passwordPolicies") { changes.passwordPolicies = .some(try passwordPolicies(body)) }
        if let profile = try passwordProfile(body) {
            guard let password = profile.password else {
                throw GraphError.badRequest("Property 'passwordProfile.password' is required to change the password.")
            }
            changes.password = password
            changes.forcePasswordChange = profile.forceChange ?? true
        }
        for name in attributeProperties where body.keys.contains(name) {
            changes.attributes[name] = .some(try string(body, name))
        }
        return changes
    }

    private static func refuseUnknown(_ body: [String: JSONValue], known: Set<String>) throws {
        for key in body.keys.sorted() where !known.contains(key) {
            throw GraphError.badRequest(
                "Property '\(TextRules.printable(key))' does not exist as a declared property or extension property.")
        }
    }

    private static func string(_ body: [String: JSONValue], _ key: String) throws -> String? {
        switch body[key] {
        case nil, .null: return nil
        case .string(let text): return text
        default: throw GraphError.badRequest("Property '\(key)' must be a string.")
        }
    }

    private static func passwordPolicies(_ body: [String: JSONValue]) throws -> String? {
        guard let value = try string(body, "passwordPolicies") else { return nil }
        guard let normalized = PasswordPolicies.normalized(value) else {
            throw GraphError.badRequest(
                "Property 'passwordPolicies' may name \(PasswordPolicies.known.joined(separator: " and ")) only, comma-separated.")
        }
        return normalized
    }

    private static func bool(_ body: [String: JSONValue], _ key: String) throws -> Bool? {
        switch body[key] {
        case nil, .null: return nil
        case .bool(let flag): return flag
        default: throw GraphError.badRequest("Property '\(key)' must be a boolean.")
        }
    }

    private static func passwordProfile(_ body: [String: JSONValue]) throws -> (password: String?, forceChange: Bool?)? {
        let profile: [String: JSONValue]
        switch body["passwordProfile"] {
        case nil, .null: return nil
        case .object(let value): profile = value
        default: throw GraphError.badRequest("Property 'passwordProfile' must be an object.")
        }
        try refuseUnknown(profile, known: ["password", "forceChangePasswordNextSignIn", "forceChangePasswordNextSignInWithMfa"])
        return (try string(profile, "password"), try bool(profile, "forceChangePasswordNextSignIn"))
    }

    /// The one sign-in identity of a new account: `emailAddress` issued by this tenant (a local
    /// account), or `federated` by a provider this service federates with. A `userPrincipalName`
    /// identity is accepted and ignored (the service assigns it).
    private static func signInIdentity(_ value: JSONValue?, tenant: Tenant) throws -> NewAccount.Identity {
        guard case .array(let list) = value, !list.isEmpty else {
            throw GraphError.badRequest("Property 'identities' must list the account's sign-in identity.")
        }
        var found: NewAccount.Identity?
        for item in list {
            guard case .object(let entry) = item else { throw GraphError.badRequest("Each identity must be an object.") }
            try refuseUnknown(entry, known: ["signInType", "issuer", "issuerAssignedId"])
            guard let type = try string(entry, "signInType"), let issuer = try string(entry, "issuer"),
                let id = try string(entry, "issuerAssignedId")
            else { throw GraphError.badRequest("Each identity needs signInType, issuer and issuerAssignedId strings.") }
            let identity: NewAccount.Identity
            switch type {
            case "userPrincipalName": continue
            case "emailAddress":
                guard issuer.lowercased() == tenant.name.lowercased() else {
                    throw GraphError.badRequest("The issuer of an emailAddress identity must be the tenant, '\(tenant.name)'.")
                }
                identity = .email(id)
            case "federated":
                let known = [IdentityProviderKind.facebook] + tenant.identityProviders.map(\.kind)
                guard let provider = known.first(where: { $0.rawValue.lowercased() == issuer.lowercased() }) else {
                    throw GraphError.badRequest("'\(TextRules.printable(issuer))' is not an identity provider of this tenant.")
                }
                identity = .federated(provider: provider, subject: id, email: nil)
            default:
                throw GraphError.badRequest(
                    "signInType '\(TextRules.printable(type))' is not supported by this service (emailAddress and federated are).")
            }
            guard found == nil else { throw GraphError.badRequest("Only one sign-in identity per account is supported.") }
            found = identity
        }
        guard let found else { throw GraphError.badRequest("Property 'identities' must list the account's sign-in identity.") }
        return found
    }
}

extension GraphError {
    static func badRequest(_ message: String, code: String = "Request_BadRequest") -> GraphError {
        GraphError(status: .badRequest, code: code, message: message)
    }

    /// The admin rules' refusals in Graph's words.
    init(_ error: IdentityAdministration.AdministrationError) {
        switch error {
        case .duplicate:
            self = .badRequest("Another object with the same value for property identities already exists.")
        case .weakPassword(let reason):
            self = .badRequest(
                "The specified password does not comply with password complexity requirements. Please provide a different password. \(reason)"
            )
        case .noSuchUser(let key):
            self = GraphError(
                status: .notFound, code: "Request_ResourceNotFound", message: "Resource '\(TextRules.printable(key))' does not exist.")
        default:
            self = .badRequest(error.description)
        }
    }
}
