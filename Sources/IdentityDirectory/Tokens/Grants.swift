import Foundation
import WireCoding

/// A code issued at the end of an interactive sign-in: single use, 10 minutes, bound to client,
/// redirect URI, PKCE challenge, policy and nonce (SPEC §2.4; RFC 6749 §4.1.2, RFC 7636).
package struct AuthorizationCodeGrant: Sendable, Equatable {
    package var tenantID: UUID
    package var clientID: String
    package var userID: UUID
    package var policy: String
    package var redirectURI: String
    package var scopes: [String]
    package var nonce: String?
    package var codeChallenge: String?
    package var codeChallengeMethod: CodeChallengeMethod?
    package var authTime: Date
    package var newUser: Bool
    package var identityProvider: IdentityProviderKind
    package var createdAt: Date
    package var expiresAt: Date
    /// The face the code was issued on: it redeems only there, so a code from B2C's authorize
    /// (which asks no consent) cannot buy Entra tokens, nor the reverse.
    package var face: ProtocolFace = .b2c
    /// Values the flow's "before sending the token" connector set (account keys → text), used
    /// in every token of this sign-in, refreshes included.
    package var claimOverrides: [String: String]? = nil
    /// Claims the flow's OnTokenIssuanceStart extension provided at the sign-in (SPEC §2.15),
    /// for the tokens the code buys; a refresh asks the extension again.
    package var extraClaims: [String: JSONValue]? = nil

    package init(
        tenantID: UUID,
        clientID: String,
        userID: UUID,
        policy: String,
        redirectURI: String,
        scopes: [String],
        nonce: String? = nil,
        codeChallenge: String? = nil,
        codeChallengeMethod: CodeChallengeMethod? = nil,
        authTime: Date,
        newUser: Bool,
        identityProvider: IdentityProviderKind,
        createdAt: Date,
        expiresAt: Date,
        face: ProtocolFace = .b2c,
        claimOverrides: [String: String]? = nil,
        extraClaims: [String: JSONValue]? = nil
    ) {
        self.tenantID = tenantID
        self.clientID = clientID
        self.userID = userID
        self.policy = policy
        self.redirectURI = redirectURI
        self.scopes = scopes
        self.nonce = nonce
        self.codeChallenge = codeChallenge
        self.codeChallengeMethod = codeChallengeMethod
        self.authTime = authTime
        self.newUser = newUser
        self.identityProvider = identityProvider
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.face = face
        self.claimOverrides = claimOverrides
        self.extraClaims = extraClaims
    }
}

package enum CodeRedemption: Sendable {
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
package struct RefreshTokenFamily: Sendable, Equatable {
    var id: String
    var tenantID: UUID
    package var clientID: String
    package var userID: UUID
    package var policy: String
    package var scopes: [String]
    package var authTime: Date
    package var identityProvider: IdentityProviderKind
    var createdAt: Date
    /// `auth_time` + the flow's sliding window; nil when unbounded.
    package var slidingExpiresAt: Date?
    var revokedAt: Date?
    /// The app's API permissions when the user signed in: what a refresh may ask for, together
    /// with the app's current permissions (nil for families from before this was recorded).
    var consented: [APIPermission]? = nil
    /// The face the family was started on; it refreshes only there.
    package var face: ProtocolFace = .b2c
    /// The sign-in's connector values (``AuthorizationCodeGrant/claimOverrides``).
    package var claimOverrides: [String: String]? = nil

    package init(
        id: String,
        tenantID: UUID,
        clientID: String,
        userID: UUID,
        policy: String,
        scopes: [String],
        authTime: Date,
        identityProvider: IdentityProviderKind,
        createdAt: Date,
        slidingExpiresAt: Date? = nil,
        revokedAt: Date? = nil,
        consented: [APIPermission]? = nil,
        face: ProtocolFace = .b2c,
        claimOverrides: [String: String]? = nil
    ) {
        self.id = id
        self.tenantID = tenantID
        self.clientID = clientID
        self.userID = userID
        self.policy = policy
        self.scopes = scopes
        self.authTime = authTime
        self.identityProvider = identityProvider
        self.createdAt = createdAt
        self.slidingExpiresAt = slidingExpiresAt
        self.revokedAt = revokedAt
        self.consented = consented
        self.face = face
        self.claimOverrides = claimOverrides
    }
}

package enum RefreshTokenRedemption: Sendable {
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
package struct RefreshTokenBinding: Sendable {
    var tenantID: UUID
    var clientID: String
    var policy: String
    var face: ProtocolFace = .b2c

    package init(tenantID: UUID, clientID: String, policy: String, face: ProtocolFace = .b2c) {
        self.tenantID = tenantID
        self.clientID = clientID
        self.policy = policy
        self.face = face
    }
}
