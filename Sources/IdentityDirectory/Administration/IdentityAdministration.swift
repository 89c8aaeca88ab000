import Foundation
import Storage
import TodoModels
import WireCoding

/// The one door for changing a tenant's directory: accounts, app registrations and their
/// secrets and permissions, signing keys. The admin commands, Graph, the tenant YAML and the
/// dev seed all come through it, so each rule is written once (the sign-up page's rules for
/// accounts, B2C's for app registrations) and there is one secret generator.
public struct IdentityAdministration: Sendable {
    let tenants: any TenantDirectory
    let users: any UserDirectory
    let keys: SigningKeyRing
    let hasher: PasswordHasher
    let secondFactors: any SecondFactorStore
    package let customPolicies: CustomPolicyLibrary
    package let policyKeySets: PolicyKeySetLibrary
    let clock: any IdentityClock
    /// Seals what a declaration or an export carries (password hashes, connector and provider
    /// secrets) as the database seals what it holds.
    let dataKey: DataKey
    /// Directory roles (the console's `admin`).
    let roles: DirectoryRoles?
    /// Security groups and their members (SPEC §2.14).
    package let groups: DirectoryGroups?
    /// Where each change is recorded (SPEC §2.13), and who is making them.
    let auditLog: DirectoryAuditLog?
    public private(set) var initiator = AuditInitiator.commandLine()

    /// The same door, for changes `initiator` makes (a Graph caller, a console admin, a command).
    public func acting(as initiator: AuditInitiator) -> IdentityAdministration {
        var copy = self
        copy.initiator = initiator
        return copy
    }

    /// A new client secret: 30 random bytes as base64url (240 bits), for every secret this
    /// service makes (an app registered by the admin commands, the dev seed, a YAML app without
    /// one).
    public static func newClientSecret() -> String { Secrets.randomToken(byteCount: 30) }

    // MARK: Tenants

    /// The tenant `serve` seeds and the admin commands manage.
    public func defaultTenant() async throws -> Tenant? { try await tenants.defaultTenant() }

    public func userFlows(tenantID: UUID) async throws -> [UserFlow] { try await tenants.userFlows(tenantID: tenantID) }

    // MARK: Accounts

    public func users(tenantID: UUID) async throws -> [UserAccount] { try await users.users(tenantID: tenantID) }

    /// Deletes the account: its sessions, refresh tokens, authenticator and tasks' owner with it
    /// (the store's cascades). False when there was none.
    @discardableResult
    public func deleteUser(_ user: UserAccount) async throws -> Bool {
        try await audited(.deleteUser, tenantID: user.tenantID, target: .user(user), result: { $0 ? .user(user) : nil }) {
            try await users.delete(id: user.id)
        }
    }

    /// Lifts a smart lockout of the account.
    public func clearLockout(_ user: UserAccount) async throws {
        try await audited(.unlockUser, tenantID: user.tenantID, target: .user(user)) { try await users.clearLockout(id: user.id) }
    }

    /// Ends every SSO session and refresh token of the account (Graph's `revokeSignInSessions`).
    public func revokeSessions(_ user: UserAccount) async throws {
        try await audited(.revokeSessions, tenantID: user.tenantID, target: .user(user)) {
            try await users.revokeSessions(id: user.id, now: clock.now)
        }
    }

    /// Removes the account's authenticator (a lost phone): its next sign-in in a flow with TOTP
    /// enrols anew. The admin command `users reset-mfa`.
    public func resetSecondFactor(userID: UUID) async throws -> Bool {
        try await atomically {
            let had = try await secondFactors.hasAuthenticator(userID: userID)
            try await secondFactors.removeAuthenticator(userID: userID)
            if had, let user = try await users.user(id: userID) {
                try await audited(.resetSecondFactor, tenantID: user.tenantID, target: .user(user)) {}
            }
            return had
        }
    }

    /// The account's directory roles.
    public func roles(of user: UserAccount) async throws -> Set<DirectoryRole> { try await roles?.roles(of: user.id) ?? [] }

    /// Gives the account a directory role (`users add --role admin`, the console); recorded when
    /// it did not hold it.
    public func assignRole(_ role: DirectoryRole, to user: UserAccount) async throws {
        guard let roles else { return }
        let target = AuditTarget.user(user, modified: [.init(name: "Role", newValue: role.rawValue)])
        try await audited(.addRoleMember, tenantID: user.tenantID, target: target, result: { $0 ? target : nil }) {
            try await roles.add(role, to: user, now: clock.now)
        }
    }

    /// Takes a directory role from the account; recorded when it held it.
    public func removeRole(_ role: DirectoryRole, from user: UserAccount) async throws {
        guard let roles else { return }
        let target = AuditTarget.user(user, modified: [.init(name: "Role", newValue: role.rawValue)])
        try await audited(.removeRoleMember, tenantID: user.tenantID, target: target, result: { $0 ? target : nil }) {
            try await roles.remove(role, from: user)
        }
    }

    // MARK: App registrations

    /// An app registration to make.
    public struct NewApplication: Sendable {
        public var name: String
        public var kind: ClientKind
        public var redirectURIs: [String] = []
        public var allowPublicClientFlows = false
        /// The portal's "ID tokens" and "Access tokens" boxes: the implicit response types.
        public var allowImplicit = false
        public var requirePKCE = false
        public var appIDURI: String?
        public var exposedScopes: [String] = []
        /// External ID's app-bound user flow.
        public var userFlow: String?
        /// Microsoft Graph application permissions (`User.Read.All`, `User.ReadWrite.All`).
        public var graphPermissions: [String] = []
        /// External ID's native authentication API answers it (SPEC §2.15).
        public var nativeAuthentication = false

        public init(name: String, kind: ClientKind) {
            self.name = name
            self.kind = kind
        }
    }

    /// Registers an app with B2C's rules, checked before anything is written: a name of 1 to
    /// 256 characters without controls, an app-bound flow that exists, Graph permissions this
    /// service serves and only for confidential apps. A confidential app gets a secret,
    /// returned once.
    public func register(_ draft: NewApplication, tenantID: UUID) async throws -> (AppRegistration, secret: String?) {
        // A refusal is recorded under the name asked for; the app's record is written with it.
        let asked = AuditTarget(type: "Application", id: nil, displayName: draft.name)
        do {
            return try await registerChecked(draft, tenantID: tenantID)
        } catch let refusal as AdministrationError {
            try await audited(.addApplication, tenantID: tenantID, target: asked) { throw refusal }
            throw refusal
        }
    }

    private func registerChecked(_ draft: NewApplication, tenantID: UUID) async throws -> (AppRegistration, secret: String?) {
        guard (try? TextRules.name(draft.name, maximumLength: 256).get()) == draft.name else {
            throw AdministrationError.invalidName(
                "An app's name must be 1 to 256 characters without controls, invisible characters or extra spaces.")
        }
        for permission in draft.graphPermissions
        where !APIPermission.graphRoles.contains(where: { $0.lowercased() == permission.lowercased() }) {
            throw AdministrationError.roleNotServed(permission)
        }
        if !draft.graphPermissions.isEmpty, draft.kind != .confidential {
            throw AdministrationError.needsConfidentialApp("a Graph permission")
        }
        for uri in draft.redirectURIs {
            if let problem = RedirectURIRule.problem(with: uri, kind: draft.kind) { throw AdministrationError.invalidRedirectURI(problem) }
        }
        var flowName: String?
        if let name = draft.userFlow {
            guard let flow = try await tenants.userFlow(tenantID: tenantID, name: name) else {
                throw AdministrationError.unknownUserFlow(name)
            }
            flowName = flow.name
        }
        var app = AppRegistration(
            clientID: UUID(), tenantID: tenantID, displayName: draft.name, kind: draft.kind, redirectURIs: draft.redirectURIs,
            allowPublicClientFlows: draft.allowPublicClientFlows, requirePKCE: draft.requirePKCE, appIDURI: draft.appIDURI,
            exposedScopes: draft.exposedScopes, userFlow: flowName)
        app.nativeAuthentication = draft.nativeAuthentication
        app.allowImplicit = draft.allowImplicit
        try await audited(.addApplication, tenantID: tenantID, target: .application(app)) { try await tenants.save(app, now: clock.now) }
        var registered = app
        if !draft.graphPermissions.isEmpty {
            registered = try await grantPermission(
                tenantID: tenantID, clientID: app.clientID, api: APIPermission.graphResource, scopes: [], roles: draft.graphPermissions)
        }
        var secret: String?
        if draft.kind == .confidential { secret = try await addSecret(to: app) }
        return (registered, secret)
    }

    /// A new secret for `app`, returned once; the store keeps its hash.
    public func addSecret(to app: AppRegistration, expiresAt: Date? = nil) async throws -> String {
        let secret = Self.newClientSecret()
        let target = AuditTarget.application(app, modified: [.init(name: "KeyDescription", newValue: nil)])
        try await audited(.addSecret, tenantID: app.tenantID, target: target) {
            try await tenants.addSecret(clientID: app.clientID, secret: secret, now: clock.now, expiresAt: expiresAt)
        }
        return secret
    }

    public func applications(tenantID: UUID) async throws -> [AppRegistration] { try await tenants.applications(tenantID: tenantID) }

    /// Replaces the app's redirect URIs, each checked with B2C's rules (``RedirectURIRule``)
    /// before any is written.
    public func setRedirectURIs(_ uris: [String], of app: AppRegistration) async throws {
        let modified = [AuditTarget.ModifiedProperty(name: "ReplyUrls", newValue: uris.joined(separator: " "))]
        try await audited(.updateApplication, tenantID: app.tenantID, target: .application(app, modified: modified)) {
            guard uris.count <= RedirectURIRule.maximumCount else {
                throw AdministrationError.invalidRedirectURI("An app holds at most \(RedirectURIRule.maximumCount) redirect URIs.")
            }
            // The app as stored now (a grant made meanwhile stays); only the URIs it did not have
            // are checked, so one an older rule let in does not block every other change.
            guard var changed = try await tenants.application(tenantID: app.tenantID, clientID: app.clientIDString) else {
                throw AdministrationError.noSuchApplication(app.clientIDString)
            }
            for uri in uris where !changed.redirectURIs.contains(uri) {
                if let problem = RedirectURIRule.problem(with: uri, kind: changed.kind) { throw AdministrationError.invalidRedirectURI(problem) }
            }
            changed.redirectURIs = uris
            try await tenants.save(changed, now: clock.now)
        }
    }

    /// Removes every secret of the app (a leaked one): its token requests fail until a new one is added.
    public func removeSecrets(of app: AppRegistration) async throws {
        let target = AuditTarget.application(app, modified: [.init(name: "KeyDescription", newValue: "all removed")])
        try await audited(.addSecret, tenantID: app.tenantID, target: target) { try await tenants.removeSecrets(clientID: app.clientID) }
    }

    /// Removes an app registration; false when there was none.
    public func removeApplication(tenantID: UUID, clientID: UUID) async throws -> Bool {
        let target = AuditTarget(type: "Application", id: clientID.uuidString.lowercased())
        return try await audited(.deleteApplication, tenantID: tenantID, target: target, result: { $0 ? target : nil }) {
            try await tenants.removeApplication(tenantID: tenantID, clientID: clientID)
        }
    }

    // MARK: Signing keys

    public func signingKeys() async throws -> [SigningKey] { try await keys.allKeys() }

    /// A new signing key, published now and signing after `activateAfter`.
    public func rotateSigningKey(activateAfter: TimeInterval = SigningKeyRing.propagationDelay) async throws -> SigningKey {
        try await atomically {
            let key = try await keys.rotate(activateAfter: activateAfter)
            try await auditEveryTenant(.rotateSigningKey, target: AuditTarget(type: "Key", id: key.kid))
            return key
        }
    }

    /// Withdraws key `kid` at once (a leaked key); the replacement, if one was made.
    public func revokeSigningKey(kid: String) async throws -> SigningKey? {
        try await atomically {
            let replacement = try await keys.revoke(kid: kid)
            try await auditEveryTenant(.revokeSigningKey, target: AuditTarget(type: "Key", id: kid))
            return replacement
        }
    }

    // MARK: Custom policies

    /// The tenant's custom policies, by id.
    public func customPolicies(tenantID: UUID) async throws -> [CustomPolicy] { try await customPolicies.policies(tenantID: tenantID) }

    public func customPolicy(tenantID: UUID, id: String) async throws -> CustomPolicy? {
        try await customPolicies.policy(tenantID: tenantID, id: id)
    }

    /// Checks policies whole, together, and stores them all (bases and the policies built on
    /// them in any order); throws ``PolicyRejection`` naming every problem of the first policy
    /// refused, and stores none. Each result says whether the policy is new.
    @discardableResult
    public func uploadCustomPolicies(_ files: [Data], tenant: Tenant) async throws -> [(CustomPolicy, created: Bool)] {
        try await atomically {
            let stored = try await audited(.uploadPolicy, tenantID: tenant.id, target: nil, result: { $0.first.map { .policy($0.0.id) } }) {
                try await customPolicies.upload(files.map { ($0, nil) }, tenant: tenant)
            }
            for (policy, _) in stored.dropFirst() { try await audited(.uploadPolicy, tenantID: tenant.id, target: .policy(policy.id)) {} }
            return stored
        }
    }

    /// One policy, as Graph's `PUT trustFramework/policies/{id}/$value` uploads it (its id must be `expectedID`).
    public func uploadCustomPolicy(_ body: Data, tenant: Tenant, expectedID: String?) async throws -> (CustomPolicy, created: Bool) {
        try await audited(.uploadPolicy, tenantID: tenant.id, target: expectedID.map(AuditTarget.policy), result: { .policy($0.0.id) }) {
            try await customPolicies.upload(body, tenant: tenant, expectedID: expectedID)
        }
    }

    /// Deletes a policy no other builds on (``PolicyRejection`` otherwise); false when there was none.
    public func deleteCustomPolicy(tenant: Tenant, id: String) async throws -> Bool {
        try await audited(.deletePolicy, tenantID: tenant.id, target: .policy(id), result: { $0 ? .policy(id) : nil }) {
            try await customPolicies.delete(tenant: tenant, id: id)
        }
    }

    // MARK: Policy key sets

    /// The tenant's policy key sets, with what may be shown of their keys.
    public func policyKeySets(tenantID: UUID) async throws -> [PolicyKeySet] { try await policyKeySets.keySets(tenantID: tenantID) }

    /// A new, empty key set; its id gains B2C's `B2C_1A_` prefix when it lacks one.
    public func createPolicyKeySet(tenantID: UUID, id: String) async throws -> PolicyKeySet {
        try await audited(.createKeySet, tenantID: tenantID, target: .keySet(id), result: { .keySet($0.id) }) {
            try await policyKeySets.create(tenantID: tenantID, id: id)
        }
    }

    /// A new RSA key in `keySet` (`use` `sig` or `enc`), made here; its private part never leaves.
    public func generatePolicyKey(
        tenantID: UUID, keySet: String, use: String, kty: String = "RSA", notBefore: Date? = nil, expires: Date? = nil
    ) async throws -> PolicyKey {
        try await audited(.addKey, tenantID: tenantID, target: .keySet(keySet)) {
            try await policyKeySets.generateKey(tenantID: tenantID, keySet: keySet, use: use, kty: kty, notBefore: notBefore, expires: expires)
        }
    }

    /// A secret (an identity provider's client secret, a REST password) added to `keySet`.
    public func uploadPolicySecret(
        tenantID: UUID, keySet: String, use: String, value: String, notBefore: Date? = nil, expires: Date? = nil
    ) async throws -> PolicyKey {
        try await audited(.addKey, tenantID: tenantID, target: .keySet(keySet)) {
            try await policyKeySets.uploadSecret(
                tenantID: tenantID, keySet: keySet, use: use, value: value, notBefore: notBefore, expires: expires)
        }
    }

    /// A certificate with its private key (a PKCS#12 file) added to `keySet`.
    public func uploadPolicyCertificate(tenantID: UUID, keySet: String, pkcs12: String, password: String) async throws -> PolicyKey {
        try await audited(.addKey, tenantID: tenantID, target: .keySet(keySet)) {
            try await policyKeySets.uploadPkcs12(tenantID: tenantID, keySet: keySet, pkcs12: pkcs12, password: password)
        }
    }

    /// Deletes a key set and its keys; false when there was none.
    public func deletePolicyKeySet(tenantID: UUID, id: String) async throws -> Bool {
        try await audited(.deleteKeySet, tenantID: tenantID, target: .keySet(id), result: { $0 ? .keySet(id) : nil }) {
            try await policyKeySets.delete(tenantID: tenantID, id: id)
        }
    }

    package init(
        tenants: any TenantDirectory,
        users: any UserDirectory,
        keys: SigningKeyRing,
        hasher: PasswordHasher,
        secondFactors: any SecondFactorStore,
        customPolicies: CustomPolicyLibrary,
        policyKeySets: PolicyKeySetLibrary,
        clock: any IdentityClock,
        dataKey: DataKey,
        roles: DirectoryRoles? = nil,
        groups: DirectoryGroups? = nil,
        auditLog: DirectoryAuditLog? = nil
    ) {
        self.groups = groups
        self.tenants = tenants
        self.users = users
        self.keys = keys
        self.hasher = hasher
        self.secondFactors = secondFactors
        self.customPolicies = customPolicies
        self.policyKeySets = policyKeySets
        self.clock = clock
        self.dataKey = dataKey
        self.roles = roles
        self.auditLog = auditLog
    }
}
