import Foundation
import TodoModels
import WireCoding

/// Who made an admin change (Graph's `initiatedBy`): an app holding a Graph permission, an
/// admin signed in to the console, or the operator at the command line. With the request's
/// correlation id and address, so an audit record leads to the request's log lines.
public struct AuditInitiator: Sendable, Equatable {
    public enum Actor: Sendable, Equatable {
        /// An app-only Graph caller: its client id and, when it is an app of the tenant, its name.
        case application(appID: String, displayName: String?)
        /// A signed-in admin (the console).
        case user(id: UUID, userPrincipalName: String?, displayName: String?)
        /// `todo-server` itself: an admin command, `tenant apply`, the dev seed.
        case commandLine(String)
    }

    public var actor: Actor
    public var correlationID: String
    public var ipAddress: String?

    public init(actor: Actor, correlationID: String, ipAddress: String? = nil) {
        self.actor = actor
        self.correlationID = correlationID
        self.ipAddress = ipAddress
    }

    /// The operator at the command line, for one command's changes.
    public static func commandLine(_ command: String = "todo-server") -> AuditInitiator {
        AuditInitiator(actor: .commandLine(command), correlationID: Secrets.randomUUIDString())
    }
}

/// What an admin change did, named as Entra's and B2C's audit logs name it: the activity, its
/// category (`UserManagement`, `ApplicationManagement` for Core Directory; B2C's `Key`,
/// `Resource`, `Authentication`), the operation and the service that logged it.
public struct AuditActivity: Sendable, Equatable {
    public var displayName: String
    public var category: String
    public var operationType: String
    public var loggedByService: String

    init(_ displayName: String, _ category: String, _ operationType: String, _ service: String) {
        self.displayName = displayName
        self.category = category
        self.operationType = operationType
        self.loggedByService = service
    }

    static let coreDirectory = "Core Directory"
    static let b2c = "B2C"

    public static let addUser = AuditActivity("Add user", "UserManagement", "Add", coreDirectory)
    public static let updateUser = AuditActivity("Update user", "UserManagement", "Update", coreDirectory)
    public static let deleteUser = AuditActivity("Delete user", "UserManagement", "Delete", coreDirectory)
    public static let resetPassword = AuditActivity("Reset user password", "UserManagement", "Update", coreDirectory)
    /// Entra's name for revoking a user's sessions and refresh tokens.
    public static let revokeSessions = AuditActivity(
        "Update StsRefreshTokenValidFrom Timestamp", "UserManagement", "Update", coreDirectory)
    public static let unlockUser = AuditActivity("Unlock user", "UserManagement", "Update", coreDirectory)
    public static let resetSecondFactor = AuditActivity("Admin deleted security info", "UserManagement", "Delete", coreDirectory)
    public static let addRoleMember = AuditActivity("Add member to role", "RoleManagement", "Assign", coreDirectory)
    public static let removeRoleMember = AuditActivity("Remove member from role", "RoleManagement", "Unassign", coreDirectory)
    public static let addApplication = AuditActivity("Add application", "ApplicationManagement", "Add", coreDirectory)
    public static let updateApplication = AuditActivity("Update application", "ApplicationManagement", "Update", coreDirectory)
    public static let deleteApplication = AuditActivity("Delete application", "ApplicationManagement", "Delete", coreDirectory)
    public static let addSecret = AuditActivity(
        "Update application – Certificates and secrets management", "ApplicationManagement", "Update", coreDirectory)
    public static let addServicePrincipal = AuditActivity("Add service principal", "ApplicationManagement", "Add", coreDirectory)
    public static let addAppRoleAssignment = AuditActivity(
        "Add app role assignment to service principal", "ApplicationManagement", "Assign", coreDirectory)
    public static let removeAppRoleAssignment = AuditActivity(
        "Remove app role assignment from service principal", "ApplicationManagement", "Unassign", coreDirectory)
    public static let addPermissionGrant = AuditActivity("Add delegated permission grant", "ApplicationManagement", "Assign", coreDirectory)
    public static let removePermissionGrant = AuditActivity(
        "Remove delegated permission grant", "ApplicationManagement", "Unassign", coreDirectory)
    public static let addGroup = AuditActivity("Add group", "GroupManagement", "Add", coreDirectory)
    public static let updateGroup = AuditActivity("Update group", "GroupManagement", "Update", coreDirectory)
    public static let deleteGroup = AuditActivity("Delete group", "GroupManagement", "Delete", coreDirectory)
    public static let addGroupMember = AuditActivity("Add member to group", "GroupManagement", "Assign", coreDirectory)
    public static let removeGroupMember = AuditActivity("Remove member from group", "GroupManagement", "Unassign", coreDirectory)
    public static let consent = AuditActivity("Consent to application", "ApplicationManagement", "Assign", coreDirectory)
    public static let uploadPolicy = AuditActivity("Create or update policy", "Resource", "Update", b2c)
    public static let deletePolicy = AuditActivity("Delete policy", "Resource", "Delete", b2c)
    public static let saveUserFlow = AuditActivity("Create or update user flow", "Resource", "Update", b2c)
    public static let deleteUserFlow = AuditActivity("Delete user flow", "Resource", "Delete", b2c)
    public static let saveUserAttribute = AuditActivity("Create or update custom user attribute", "Resource", "Update", b2c)
    public static let deleteUserAttribute = AuditActivity("Delete custom user attribute", "Resource", "Delete", b2c)
    public static let saveAPIConnector = AuditActivity("Create or update API connector", "Resource", "Update", b2c)
    public static let deleteAPIConnector = AuditActivity("Delete API connector", "Resource", "Delete", b2c)
    public static let saveAuthenticationExtension = AuditActivity("Create or update custom authentication extension", "Policy", "Update", coreDirectory)
    public static let deleteAuthenticationExtension = AuditActivity("Delete custom authentication extension", "Policy", "Delete", coreDirectory)
    public static let saveIdentityProvider = AuditActivity("Create or update identity provider", "IdentityProvider", "Update", b2c)
    public static let deleteIdentityProvider = AuditActivity("Delete identity provider", "IdentityProvider", "Delete", b2c)
    public static let applyDeclaration = AuditActivity("Apply tenant declaration", "Resource", "Update", b2c)
    public static let createKeySet = AuditActivity("Create key container", "Key", "Add", b2c)
    public static let deleteKeySet = AuditActivity("Delete key container", "Key", "Delete", b2c)
    public static let addKey = AuditActivity("Add key to key container", "Key", "Add", b2c)
    public static let rotateSigningKey = AuditActivity("Rotate token signing key", "Key", "Update", b2c)
    public static let revokeSigningKey = AuditActivity("Revoke token signing key", "Key", "Delete", b2c)

    /// B2C's token-issuance activities, shown from the sign-in log (``DirectoryAudit/init(authentication:tenantName:)``).
    public static let issueCode = AuditActivity("Issue an authorization code to the application", "Authentication", "Issue", b2c)
    public static let issueIDToken = AuditActivity("Issue an id_token to the application", "Authentication", "Issue", b2c)
    public static let issueAccessToken = AuditActivity("Issue an access token to the application", "Authentication", "Issue", b2c)
    public static let validateCredentials = AuditActivity("Validate user credentials", "Authentication", "Issue", b2c)
    /// Every activity a sign-in log record is shown as.
    static let tokenIssuance: [AuditActivity] = [.issueCode, .issueIDToken, .issueAccessToken, .validateCredentials]
}

/// The object an admin change was made to (Graph's `targetResource`). Modified properties are
/// names, with a new value only where it is neither secret nor personal (an account's
/// `accountEnabled`), so the log never holds a password, a secret or an attribute's value.
public struct AuditTarget: Sendable, Equatable, Codable {
    public var type: String
    public var id: String?
    public var displayName: String?
    public var userPrincipalName: String?
    public var modifiedProperties: [ModifiedProperty]

    public struct ModifiedProperty: Sendable, Equatable, Codable {
        public var name: String
        public var newValue: String?

        /// The value printable and at most 256 characters: on a refusal it is what the caller sent.
        public init(name: String, newValue: String?) {
            self.name = AuditTarget.capped(name)
            self.newValue = newValue.map(AuditTarget.capped)
        }
    }

    /// Every text printable and at most 256 characters, at most 32 properties: on a refusal
    /// they are what the caller sent, and a record's size must not be the caller's to choose.
    public init(type: String, id: String?, displayName: String? = nil, userPrincipalName: String? = nil, modified: [ModifiedProperty] = []) {
        self.type = type
        self.id = id.map(Self.capped)
        self.displayName = displayName.map(Self.capped)
        self.userPrincipalName = userPrincipalName.map(Self.capped)
        self.modifiedProperties = Array(modified.prefix(32))
    }

    static func capped(_ text: String) -> String { String(TextRules.printable(text).prefix(256)) }
}

/// One admin change, or one B2C token issuance, as Graph's `auditLogs/directoryAudits` shows it.
public struct DirectoryAudit: Sendable, Equatable {
    public var id: String
    public var tenantID: UUID
    public var at: Date
    public var activity: AuditActivity
    public var initiator: AuditInitiator
    public var target: AuditTarget?
    /// Nil when it succeeded; the refusal's reason (printable, at most 256 characters) otherwise.
    public var failureReason: String?
    /// Graph's `additionalDetails`, in order (`PolicyId`, `ApplicationId` …).
    public var details: [(key: String, value: String)]

    public var succeeded: Bool { failureReason == nil }

    package init(
        tenantID: UUID, at: Date, activity: AuditActivity, initiator: AuditInitiator, target: AuditTarget?, failureReason: String? = nil,
        details: [(key: String, value: String)] = []
    ) {
        self.id = Secrets.randomUUIDString()
        self.tenantID = tenantID
        self.at = at
        self.activity = activity
        self.initiator = initiator
        self.target = target
        self.failureReason = failureReason.map(AuditTarget.capped)
        self.details = details.map { ($0.key, AuditTarget.capped($0.value)) }
    }

    /// A sign-in log record as B2C's audit log shows token issuance: initiated by the app, about
    /// the user, with `TenantId`, `PolicyId`, `ApplicationId` and `ClientIpAddress` in its details.
    package init(authentication event: SignInEvent, tenantName: String) {
        let activity: AuditActivity =
            switch (event.kind, event.grantType) {
            case (.tokenGrant, "password"): .validateCredentials
            case (.tokenGrant, "client_credentials"): .issueAccessToken
            case (.tokenGrant, _): .issueIDToken
            default: .issueCode
            }
        var details: [(key: String, value: String)] = [("TenantId", tenantName)]
        if let policy = event.policy { details.append(("PolicyId", policy)) }
        if let app = event.appID { details.append(("ApplicationId", app)) }
        if let address = event.ipAddress { details.append(("ClientIpAddress", address)) }
        self.init(
            tenantID: event.tenantID, at: event.at, activity: activity,
            initiator: AuditInitiator(
                actor: .application(appID: event.appID ?? "", displayName: event.appName), correlationID: event.correlationID,
                ipAddress: event.ipAddress),
            target: event.userID.map { AuditTarget(type: "User", id: $0.uuidString.lowercased(), displayName: event.userDisplayName) },
            failureReason: event.errorCode == 0 ? nil : (event.failureReason ?? "error \(event.errorCode)"), details: details)
        self.id = event.id
    }

    public static func == (a: DirectoryAudit, b: DirectoryAudit) -> Bool {
        a.id == b.id && a.tenantID == b.tenantID && a.at == b.at && a.activity == b.activity && a.initiator == b.initiator
            && a.target == b.target && a.failureReason == b.failureReason && a.details.map(\.key) == b.details.map(\.key)
            && a.details.map(\.value) == b.details.map(\.value)
    }
}
