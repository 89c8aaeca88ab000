import Foundation

/// A consumer account: a local (email + password) account or the stub account B2C writes for a
/// social sign-in, which gets its own object id (research/b2c-protocol.md §5.3).
public struct UserAccount: Sendable, Equatable {
    /// The object id, `oid` (and `sub`) in tokens.
    public var id: UUID
    public var tenantID: UUID
    public var identityProvider: IdentityProviderKind
    /// Lowercased email for local accounts; the provider's subject for social ones.
    public var signInName: String
    public var email: String?
    public var displayName: String
    /// Other attributes by ``UserAttribute`` raw value (givenName, surname, city, …).
    public var attributes: [String: String]
    public var passwordHash: String?
    public var createdAt: Date
    public var updatedAt: Date
    public var lockout: LockoutState

    public init(
        id: UUID = UUID(), tenantID: UUID, identityProvider: IdentityProviderKind, signInName: String, email: String?,
        displayName: String, attributes: [String: String] = [:], passwordHash: String? = nil, createdAt: Date,
        lockout: LockoutState = LockoutState()
    ) {
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

    /// The value of a ``UserAttribute`` for this user.
    public func value(of attribute: UserAttribute) -> String? {
        attribute == .displayName ? displayName : attributes[attribute.rawValue]
    }
}

/// Normalises an email for uniqueness: trimmed and lowercased, so `Alice@Example.com` and
/// `alice@example.com` are one account (SPEC §2.7).
enum EmailAddress {
    static func normalized(_ email: String) -> String {
        email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }

    /// A deliberately simple check: one `@`, a non-empty local part, a dotted domain, no spaces,
    /// at most 254 characters (RFC 5321 §4.5.3.1.3).
    static func isValid(_ email: String) -> Bool {
        let trimmed = email.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.count <= 254, !trimmed.contains(where: { $0.isWhitespace || $0.isNewline }) else { return false }
        let parts = trimmed.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."),
            !parts[1].hasSuffix(".")
        else { return false }
        return true
    }
}
