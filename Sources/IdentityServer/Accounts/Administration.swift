import Foundation
import TodoModels

/// Account administration shared by the admin commands and tests.
extension IdentityServer {
    public enum AdministrationError: Error, CustomStringConvertible, Equatable {
        case invalidEmail(String)
        case invalidName(String)
        case weakPassword(String)
        case duplicate(String)
        case noSuchUser(String)
        case noSuchApplication(String)
        case noSuchAPI(String)
        case scopeNotExposed(api: String, scope: String)

        public var description: String {
            switch self {
            case .invalidEmail(let email): "'\(TextRules.printable(email))' is not a valid email address"
            case .invalidName(let reason): reason
            case .weakPassword(let reason): reason
            case .duplicate(let email): "an account with the email \(TextRules.printable(email)) already exists"
            case .noSuchUser(let key): "no account '\(TextRules.printable(key))'"
            case .noSuchApplication(let id): "no app with client id \(TextRules.printable(id))"
            case .noSuchAPI(let api):
                "no API '\(TextRules.printable(api))' in this tenant (give an Application ID URI, a client id, or https://graph.microsoft.com)"
            case .scopeNotExposed(let api, let scope): "'\(TextRules.printable(api))' exposes no scope '\(TextRules.printable(scope))'"
            }
        }
    }

    /// Creates a local account with the same rules as the sign-up page.
    public func createLocalUser(tenantID: UUID, email: String, displayName: String, password: String) async throws -> UserAccount {
        guard let address = EmailAddress(email) else { throw AdministrationError.invalidEmail(email) }
        let name: String
        switch UserAttribute.displayName.validate(displayName) {
        case .success(let valid): name = valid.isEmpty ? String(address.display.split(separator: "@").first ?? "") : valid
        case .failure(let problem): throw AdministrationError.invalidName(problem.message)
        }
        if let problem = PasswordPolicy.problem(with: password) { throw AdministrationError.weakPassword(problem) }
        let user = UserAccount(
            tenantID: tenantID, identityProvider: .local, signInName: address.canonical, email: address.display,
            displayName: name, passwordHash: try await hasher.hash(password), createdAt: clock.now,
            // The operator who adds an account vouches for its address.
            emailVerified: true)
        do {
            try await users.create(user)
        } catch UserDirectoryError.duplicate {
            throw AdministrationError.duplicate(email)
        }
        return user
    }

    /// Finds an account by object id or by (local) email.
    public func findUser(tenantID: UUID, emailOrID: String) async throws -> UserAccount {
        if let id = UUID(uuidString: emailOrID), let user = try await users.user(id: id), user.tenantID == tenantID { return user }
        if let name = EmailAddress.canonical(emailOrID),
            let user = try await users.user(tenantID: tenantID, provider: .local, signInName: name)
        {
            return user
        }
        throw AdministrationError.noSuchUser(emailOrID)
    }

    /// Grants `clientID` delegated `scopes` (none: all the API exposes) and application `roles` on
    /// `api` (an Application ID URI, a client id, or `https://graph.microsoft.com`), as B2C's
    /// "API permissions" + "Grant admin consent" do. Merges with what was granted before.
    public func grantPermission(tenantID: UUID, clientID: UUID, api: String, scopes: [String], roles: [String]) async throws
        -> AppRegistration
    {
        let apps = try await tenants.applications(tenantID: tenantID)
        guard var app = apps.first(where: { $0.clientID == clientID }) else {
            throw AdministrationError.noSuchApplication(clientID.uuidString.lowercased())
        }
        let name = APIPermission.APIName(api)
        let resource: String
        let exposed: [String]
        if name == .graph {
            resource = APIPermission.graphResource
            exposed = APIPermission.graphScopes
        } else if let target = apps.first(where: { name.names(appIDURI: $0.appIDURI, clientID: $0.clientIDString) }) {
            resource = target.clientIDString
            exposed = target.exposedScopes
        } else {
            throw AdministrationError.noSuchAPI(api)
        }
        var granted: [String] = []
        for scope in scopes.isEmpty ? exposed : scopes {
            guard let match = exposed.first(where: { $0.lowercased() == scope.lowercased() }) else {
                throw AdministrationError.scopeNotExposed(api: api, scope: scope)
            }
            granted.append(match)
        }
        var permission = app.permission(on: resource) ?? APIPermission(resource: resource)
        permission.scopes += granted.filter { !permission.scopes.contains($0) }
        permission.roles += roles.filter { !permission.roles.contains($0) }
        app.apiPermissions.removeAll { $0.resource == resource }
        app.apiPermissions.append(permission)
        try await tenants.save(app, now: clock.now)
        return app
    }
}
