import Foundation
import TodoModels

/// Graph's `passwordPolicies`: `DisablePasswordExpiration` and/or `DisableStrongPassword`,
/// comma-separated (Graph user resource). Kept as given, after the check.
package enum PasswordPolicies {
    package static let known = ["DisablePasswordExpiration", "DisableStrongPassword"]

    /// The value in canonical spelling, or nil when it names anything else.
    package static func normalized(_ value: String) -> String? {
        let names = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !names.isEmpty else { return nil }
        var result: [String] = []
        for name in names {
            guard let known = known.first(where: { $0.lowercased() == name.lowercased() }) else { return nil }
            if !result.contains(known) { result.append(known) }
        }
        return result.joined(separator: ", ")
    }
}

/// A new account, as Graph's `POST /users` or an admin command describes it.
public struct NewAccount: Sendable {
    public enum Identity: Sendable {
        /// A local account signing in with this address.
        case email(String)
        /// An account of an upstream provider (`issuer` + `issuerAssignedId` in Graph).
        case federated(provider: IdentityProviderKind, subject: String, email: String?)
    }

    public var identity: Identity
    public var displayName: String
    /// ``UserAttribute`` raw values (givenName, surname, city, …) and the tenant's own attributes
    /// as `extension_{name}` in their stored text form.
    public var attributes: [String: String?] = [:]
    public var password: String?
    public var forcePasswordChange = false
    public var accountEnabled = true
    public var passwordPolicies: String?

    public init(identity: Identity, displayName: String, password: String? = nil) {
        self.identity = identity
        self.displayName = displayName
        self.password = password
    }
}

/// Changes to an account; nil leaves a value as it is (Graph's PATCH semantics).
public struct AccountChanges: Sendable {
    public var displayName: String?
    /// A nil value removes the attribute.
    public var attributes: [String: String?] = [:]
    public var accountEnabled: Bool?
    public var password: String?
    public var forcePasswordChange: Bool?
    /// `.some(nil)` clears it.
    public var passwordPolicies: String??

    public init() {}
}

/// The rules of accounts and permissions, shared by the admin commands, Graph, the YAML and tests.
extension IdentityAdministration {
    public enum AdministrationError: Error, CustomStringConvertible, Equatable {
        case invalidEmail(String)
        case invalidName(String)
        case weakPassword(String)
        case duplicate(String)
        case noSuchUser(String)
        case noSuchApplication(String)
        case noSuchAPI(String)
        case scopeNotExposed(api: String, scope: String)
        case roleNotServed(String)
        /// An app-bound user flow the tenant does not have.
        case unknownUserFlow(String)
        /// Application permissions asked for an app that cannot hold them (a public client).
        case needsConfidentialApp(String)
        /// A protocol refusal, in B2C's words (`AADB2C…: message`).
        case refused(String)
        /// A redirect URI B2C would not register.
        case invalidRedirectURI(String)

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
            case .refused(let message): message
            case .invalidRedirectURI(let reason): reason
            case .unknownUserFlow(let name): "'\(TextRules.printable(name))' is not a user flow of this tenant"
            case .needsConfidentialApp(let what): "\(what) needs a confidential app (app-only tokens are for confidential apps)"
            case .roleNotServed(let role):
                "Graph permission '\(TextRules.printable(role))' is not served here (\(APIPermission.graphRoles.joined(separator: ", ")) are)"
            }
        }
    }

    /// Creates a local account with the same rules as the sign-up page.
    public func createLocalUser(tenantID: UUID, email: String, displayName: String, password: String) async throws -> UserAccount {
        try await createUser(tenantID: tenantID, NewAccount(identity: .email(email), displayName: displayName, password: password))
    }

    /// Creates an account as Graph's `POST /users` and the admin commands describe it: every
    /// value is checked first, with the sign-up page's rules, and the account is written in one
    /// insert, so a refusal leaves nothing behind (SPEC §2.10).
    public func createUser(tenantID: UUID, _ account: NewAccount) async throws -> UserAccount {
        try await audited(.addUser, tenantID: tenantID, target: nil, result: { AuditTarget.user($0) }) {
            try await makeUser(tenantID: tenantID, account)
        }
    }

    private func makeUser(tenantID: UUID, _ account: NewAccount) async throws -> UserAccount {
        let name = try Self.checkedName(account.displayName)
        let attributes = try await checkedAttributes(account.attributes.compactMapValues { $0 }, tenantID: tenantID)
        var user: UserAccount
        switch account.identity {
        case .email(let email):
            guard let address = EmailAddress(email) else { throw AdministrationError.invalidEmail(email) }
            guard let password = account.password else { throw AdministrationError.weakPassword("A local account needs a password.") }
            if let problem = PasswordPolicy.problem(with: password) { throw AdministrationError.weakPassword(problem) }
            user = UserAccount(
                tenantID: tenantID, identityProvider: .local, signInName: address.canonical, email: address.display,
                displayName: name.isEmpty ? String(address.display.split(separator: "@").first ?? "") : name, attributes: attributes,
                passwordHash: try await hasher.hash(password), createdAt: clock.now,
                // The operator who adds an account vouches for its address.
                emailVerified: true)
        case .federated(let provider, let subject, let email):
            guard (try? TextRules.name(subject, maximumLength: 256).get()) == subject else {
                throw AdministrationError.invalidName("The issuerAssignedId must be 1 to 256 characters without controls.")
            }
            if account.password != nil { throw AdministrationError.weakPassword("A federated account has no password here.") }
            let address = try email.map { raw in
                guard let address = EmailAddress(raw) else { throw AdministrationError.invalidEmail(raw) }
                return address
            }
            user = UserAccount(
                tenantID: tenantID, identityProvider: provider, signInName: subject, email: address?.display,
                displayName: name.isEmpty ? subject : name, attributes: attributes, createdAt: clock.now, emailVerified: address != nil)
        }
        user.accountEnabled = account.accountEnabled
        user.forcePasswordChange = account.forcePasswordChange && user.passwordHash != nil
        user.passwordPolicies = account.passwordPolicies
        do {
            try await users.create(user)
        } catch UserDirectoryError.duplicate {
            // Named as the caller spelled it.
            switch account.identity {
            case .email(let raw): throw AdministrationError.duplicate(raw)
            case .federated(_, let subject, _): throw AdministrationError.duplicate(subject)
            }
        }
        return user
    }

    /// Applies Graph's `PATCH /users/{id}` (and the admin commands' equivalents): every change is
    /// checked before any is written, so a bad value changes nothing.
    public func updateUser(_ user: UserAccount, _ changes: AccountChanges) async throws {
        var modified: [AuditTarget.ModifiedProperty] = []
        if let name = changes.displayName { modified.append(.init(name: "DisplayName", newValue: name)) }
        // Attributes by name only: their values are the user's own data.
        for key in changes.attributes.keys.sorted() { modified.append(.init(name: key, newValue: nil)) }
        if let enabled = changes.accountEnabled { modified.append(.init(name: "AccountEnabled", newValue: "\(enabled)")) }
        if let policies = changes.passwordPolicies { modified.append(.init(name: "PasswordPolicies", newValue: policies ?? "")) }
        if changes.password != nil { modified.append(.init(name: "PasswordProfile", newValue: nil)) }
        let activity: AuditActivity = modified.map(\.name) == ["PasswordProfile"] ? .resetPassword : .updateUser
        // A PATCH that changes nothing is no change to record.
        let target = AuditTarget.user(user, modified: modified)
        try await audited(activity, tenantID: user.tenantID, target: target, result: { modified.isEmpty ? nil : target }) {
            try await applyChanges(user, changes)
        }
    }

    private func applyChanges(_ user: UserAccount, _ changes: AccountChanges) async throws {
        let now = clock.now
        let name = try changes.displayName.map(Self.checkedName)
        var attributes = user.attributes
        for (key, value) in changes.attributes { attributes[key] = value }
        attributes = try await checkedAttributes(attributes, tenantID: user.tenantID, existing: user.attributes)
        var hash: String?
        if let password = changes.password {
            guard user.identityProvider == .local else {
                throw AdministrationError.weakPassword("A federated account has no password here.")
            }
            if let problem = PasswordPolicy.problem(with: password) { throw AdministrationError.weakPassword(problem) }
            hash = try await hasher.hash(password)
        }
        if name != nil || !changes.attributes.isEmpty {
            try await users.updateProfile(id: user.id, displayName: name ?? user.displayName, attributes: attributes, now: now)
        }
        if changes.accountEnabled != nil || changes.passwordPolicies != nil {
            try await users.setAccountState(
                id: user.id, enabled: changes.accountEnabled, passwordPolicies: changes.passwordPolicies, now: now)
        }
        if let hash {
            try await users.setPassword(
                id: user.id, hash: hash, emailProven: false, forceChange: changes.forcePasswordChange ?? false, now: now)
        }
    }

    private static func checkedName(_ displayName: String) throws -> String {
        switch UserAttribute.displayName.validate(displayName) {
        case .success(let valid): return valid
        case .failure(let problem): throw AdministrationError.invalidName(problem.message)
        }
    }

    /// The attributes as stored, each checked by its rule: a built-in one as a name, the
    /// tenant's own by its declared type. Values of custom attributes the tenant no longer
    /// declares are kept as they are (a re-declared attribute finds them again).
    private func checkedAttributes(_ attributes: [String: String], tenantID: UUID, existing: [String: String] = [:]) async throws
        -> [String: String]
    {
        var checked: [String: String] = [:]
        var tenant: Tenant?
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
            // A value the account already holds stays as it is: a change elsewhere must not fail
            // on a value stored under an older declaration (another type, an attribute withdrawn).
            if existing[key] == value {
                checked[key] = value
                continue
            }
            if let attribute = UserAttribute(rawValue: key), attribute != .displayName {
                switch attribute.validate(value) {
                case .success(let valid): if !valid.isEmpty { checked[key] = valid }
                case .failure(let problem): throw AdministrationError.invalidName("\(key): \(problem.message)")
                }
                continue
            }
            guard case .custom? = FlowAttribute(rawValue: key) else {
                throw AdministrationError.invalidName("'\(TextRules.printable(key))' is not a user attribute.")
            }
            if tenant == nil { tenant = try await tenants.tenant(matching: tenantID.uuidString) }
            guard let declared = tenant?.customAttribute(forKey: key) else {
                throw AdministrationError.invalidName("'\(TextRules.printable(key))' is not a user attribute of this tenant.")
            }
            switch declared.validate(value) {
            case .success(let valid): if let valid { checked[key] = valid }
            case .failure(let problem): throw AdministrationError.invalidName("\(key): \(problem.message)")
            }
        }
        return checked
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
        let requested = (scopes + roles).map { AuditTarget.ModifiedProperty(name: "Permission", newValue: $0) }
        return try await audited(
            .consent, tenantID: tenantID, target: AuditTarget(type: "Application", id: clientID.uuidString.lowercased(), modified: requested),
            result: { AuditTarget.application($0, modified: requested) }
        ) { try await grant(tenantID: tenantID, clientID: clientID, api: api, scopes: scopes, roles: roles) }
    }

    private func grant(tenantID: UUID, clientID: UUID, api: String, scopes: [String], roles: [String]) async throws -> AppRegistration {
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
        var grantedRoles = roles
        if name == .graph {
            grantedRoles = try roles.map { role in
                guard let known = APIPermission.graphRoles.first(where: { $0.lowercased() == role.lowercased() }) else {
                    throw AdministrationError.roleNotServed(role)
                }
                return known
            }
        }
        var permission = app.permission(on: resource) ?? APIPermission(resource: resource)
        permission.scopes += granted.filter { !permission.scopes.contains($0) }
        permission.roles += grantedRoles.filter { !permission.roles.contains($0) }
        app.apiPermissions.removeAll { $0.resource == resource }
        app.apiPermissions.append(permission)
        try await tenants.save(app, now: clock.now)
        return app
    }
}
