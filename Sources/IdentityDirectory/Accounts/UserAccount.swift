import Foundation

/// A consumer account: a local (email + password) account or the stub account B2C writes for a
/// social sign-in, which gets its own object id (https://github.com/MicrosoftDocs/azure-docs/issues/48396).
public struct UserAccount: Sendable, Equatable {
    /// The object id, `oid` (and `sub`) in tokens.
    public var id: UUID
    public var tenantID: UUID
    public var identityProvider: IdentityProviderKind
    /// Lowercased email for local accounts; the provider's subject for social ones.
    public var signInName: String
    public var email: String?
    /// The address was proven: a code sent to it came back (sign-up or reset), an operator
    /// added the account, or a federated provider asserted it. Tokens assert only proven
    /// addresses (`emails`), the security issue's M-7.
    public var emailVerified: Bool
    public var displayName: String
    /// Other attributes by ``UserAttribute`` raw value (givenName, surname, city, …), and the
    /// tenant's own as `extension_{name}` (stored as text: "true"/"false" and decimals for the
    /// typed ones, ``CustomAttribute/validate(_:)``).
    public var attributes: [String: String]
    public var passwordHash: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var lockout: LockoutState
    /// Graph's `accountEnabled`: a disabled account cannot sign in (AADB2C90111).
    public var accountEnabled = true
    /// Graph's `passwordProfile.forceChangePasswordNextSignIn`: the next sign-in asks for a new
    /// password before it finishes.
    public var forcePasswordChange = false
    /// Graph's `passwordPolicies` (`DisablePasswordExpiration`, `DisableStrongPassword`), kept as given.
    public var passwordPolicies: String?

    public init(
        id: UUID = UUID(), tenantID: UUID, identityProvider: IdentityProviderKind, signInName: String, email: String?,
        displayName: String, attributes: [String: String] = [:], passwordHash: String? = nil, createdAt: Date,
        lockout: LockoutState = LockoutState(), emailVerified: Bool
    ) {
        self.emailVerified = emailVerified
        self.id = id
        self.tenantID = tenantID
        self.identityProvider = identityProvider
        self.signInName = signInName
        self.email = email
        self.displayName = displayName
        self.attributes = attributes
        self.passwordHash = passwordHash
        self.createdAt = createdAt
        self.updatedAt = createdAt
        self.lockout = lockout
    }

    public var objectID: String { id.uuidString.lowercased() }

    /// The address that may stand for the account where others read it as its own (Entra's
    /// `preferred_username`, Graph's `mail` and `userPrincipalName`): a local account's, which
    /// it signs in with, and a federated one's only when its provider proved it
    /// (`email_verified`). An unproven provider address anyone could claim (the second outside
    /// attack's F-5).
    package var presentableEmail: String? { identityProvider == .local || emailVerified ? email : nil }

    /// The value of a ``UserAttribute`` for this user.
    public func value(of attribute: UserAttribute) -> String? {
        attribute == .displayName ? displayName : attributes[attribute.rawValue]
    }

    /// The value of a built-in or custom attribute (kept under `extension_{name}`).
    package func value(of attribute: FlowAttribute) -> String? {
        switch attribute {
        case .builtIn(let builtIn): value(of: builtIn)
        case .custom: attributes[attribute.rawValue]
        }
    }
}
