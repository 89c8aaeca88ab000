import Foundation

/// A code issued at the end of an interactive sign-in: single use, 10 minutes, bound to client,
/// redirect URI, PKCE challenge, policy and nonce (SPEC §2.4; RFC 6749 §4.1.2, RFC 7636).
struct AuthorizationCodeGrant: Sendable, Equatable {
    var tenantID: UUID
    var clientID: String
    var userID: UUID
    var policy: String
    var redirectURI: String
    var scopes: [String]
    var nonce: String?
    var codeChallenge: String?
    var codeChallengeMethod: CodeChallengeMethod?
    var authTime: Date
    var newUser: Bool
    var identityProvider: IdentityProviderKind
    var createdAt: Date
    var expiresAt: Date
    /// The face the code was issued on: it redeems only there, so a code from B2C's authorize
    /// (which asks no consent) cannot buy Entra tokens, nor the reverse.
    var face: ProtocolFace = .b2c
    /// Values the flow's "before sending the token" connector set (account keys → text), used
    /// in every token of this sign-in, refreshes included.
    var claimOverrides: [String: String]? = nil
}

enum CodeRedemption: Sendable {
    case redeemed(AuthorizationCodeGrant)
    case unknown
    case expired(AuthorizationCodeGrant)
    /// Presented a second time; what the first redemption issued has now been revoked
    /// (RFC 6749 §4.1.2: "the authorization server … SHOULD revoke … all tokens previously issued").
    case replayed
    /// Issued to another client or user flow; left unredeemed.
    case wrongBinding(AuthorizationCodeGrant)
}

/// The shared state of a chain of rotated refresh tokens. Rotation creates a new token in the
/// same family; presenting an already-rotated token revokes the family (RFC 9700 §4.14.2).
struct RefreshTokenFamily: Sendable, Equatable {
    var id: String
    var tenantID: UUID
    var clientID: String
    var userID: UUID
    var policy: String
    var scopes: [String]
    var authTime: Date
    var identityProvider: IdentityProviderKind
    var createdAt: Date
    /// `auth_time` + the flow's sliding window; nil when unbounded.
    var slidingExpiresAt: Date?
    var revokedAt: Date?
    /// The app's API permissions when the user signed in: what a refresh may ask for, together
    /// with the app's current permissions (nil for families from before this was recorded).
    var consented: [APIPermission]? = nil
    /// The face the family was started on; it refreshes only there.
    var face: ProtocolFace = .b2c
    /// The sign-in's connector values (``AuthorizationCodeGrant/claimOverrides``).
    var claimOverrides: [String: String]? = nil
}

enum RefreshTokenRedemption: Sendable {
    /// The token was valid: it is now used, and `newToken` (already stored) replaces it.
    case rotated(RefreshTokenFamily, tokenIssuedAt: Date)
    case unknown
    case expired(RefreshTokenFamily, issuedAt: Date, expiresAt: Date)
    case revoked(RefreshTokenFamily)
    /// A rotated token came back within the reuse interval, its successor still unused: that
    /// successor again, nothing revoked.
    case reissued(RefreshTokenFamily, successor: String, tokenIssuedAt: Date)
    /// A rotated token came back: the whole family is now revoked.
    case reused(RefreshTokenFamily)
    /// Issued to another client; left untouched.
    case wrongClient(RefreshTokenFamily)
    /// Issued by another user flow or on the other face (AADB2C90088); left untouched.
    case wrongPolicy(RefreshTokenFamily)
}

/// Who may redeem a refresh token: the client and user flow it was issued to.
struct RefreshTokenBinding: Sendable {
    var tenantID: UUID
    var clientID: String
    var policy: String
    var face: ProtocolFace = .b2c
}
