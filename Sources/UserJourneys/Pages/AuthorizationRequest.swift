import Foundation
import IdentityDirectory
import WireCoding

/// What the app asked for at `/authorize`, kept server-side while the user walks through the
/// hosted pages (B2C does the same with its `tx` state). Pages carry only the opaque id.
package struct AuthorizationRequest: Sendable, Codable, Equatable {
    var tenantID: UUID
    var tenantSegment: String
    var policy: String
    var clientID: String
    var redirectURI: String
    var responseTypes: [ResponseType]
    var responseMode: ResponseMode
    var scopes: [String]
    var state: String?
    var nonce: String?
    var codeChallenge: String?
    var codeChallengeMethod: CodeChallengeMethod?
    var prompt: Prompt?
    var loginHint: String?
    var domainHint: String?
    var maxAge: Int?
    /// `scheme://host[:port]` the request came in on; page and issuer URLs are built from it.
    var origin: String
    /// B2C or Entra (SPEC §2.9): decides the tokens' shape, the errors' form and whether consent
    /// is asked. Absent in transactions stored before the Entra face, which were all B2C's.
    var face: ProtocolFace?
    /// `ui_locales` as the app sent it (checked tags), for the pages' language and connectors.
    var uiLocales: String? = nil
    /// The request's other query parameters (`campaignId=…`), for a custom policy's
    /// `{OAUTH-KV:name}` resolver; bounded by ``ExtraParameters``. Absent in older transactions.
    package var extraParameters: [String: String]? = nil
    /// `id_token_hint` as the app sent it, sealed with the data key (``idTokenHintContext``), for a
    /// custom policy's `GetClaims` step to check and read (id-token-hint.md); kept for custom
    /// policies only, at most ``maximumIDTokenHintBytes``.
    package var idTokenHint: String? = nil
    package static let maximumIDTokenHintBytes = 16 * 1024
    package static let idTokenHintContext = "authorization_requests.id_token_hint"

    var protocolFace: ProtocolFace { face ?? .b2c }
    var wantsCode: Bool { responseTypes.contains(.code) }
    var wantsIDToken: Bool { responseTypes.contains(.idToken) }
    var wantsAccessToken: Bool { responseTypes.contains(.token) }

    package init(
        tenantID: UUID,
        tenantSegment: String,
        policy: String,
        clientID: String,
        redirectURI: String,
        responseTypes: [ResponseType],
        responseMode: ResponseMode,
        scopes: [String],
        state: String? = nil,
        nonce: String? = nil,
        codeChallenge: String? = nil,
        codeChallengeMethod: CodeChallengeMethod? = nil,
        prompt: Prompt? = nil,
        loginHint: String? = nil,
        domainHint: String? = nil,
        maxAge: Int? = nil,
        origin: String,
        face: ProtocolFace? = nil,
        uiLocales: String? = nil
    ) {
        self.tenantID = tenantID
        self.tenantSegment = tenantSegment
        self.policy = policy
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.responseTypes = responseTypes
        self.responseMode = responseMode
        self.scopes = scopes
        self.state = state
        self.nonce = nonce
        self.codeChallenge = codeChallenge
        self.codeChallengeMethod = codeChallengeMethod
        self.prompt = prompt
        self.loginHint = loginHint
        self.domainHint = domainHint
        self.maxAge = maxAge
        self.origin = origin
        self.face = face
        self.uiLocales = uiLocales
    }
}

/// How the result goes back to the app (OAuth 2.0 Multiple Response Type Encoding Practices;
/// OAuth 2.0 Form Post Response Mode).
package enum ResponseMode: String, Sendable, Codable {
    case query
    case fragment
    case formPost = "form_post"
}

/// One stored interactive transaction: what the app asked for, the browser it is bound to, and
/// its journey's state.
package struct InteractionRecord: Sendable {
    var id: String
    var request: AuthorizationRequest
    var csrfHash: String
    var expiresAt: Date
    var completedAt: Date?
    package var journey = JourneyState()
    /// Counts the journey's saves: a save names the revision it read, so two requests racing
    /// on one journey cannot both move it (``InteractionStore/saveJourney(id:state:revision:)``).
    var journeyRevision: Int64 = 0

    package init(
        id: String,
        request: AuthorizationRequest,
        csrfHash: String,
        expiresAt: Date,
        completedAt: Date? = nil,
        journey: JourneyState = JourneyState(),
        journeyRevision: Int64 = 0
    ) {
        self.id = id
        self.request = request
        self.csrfHash = csrfHash
        self.expiresAt = expiresAt
        self.completedAt = completedAt
        self.journey = journey
        self.journeyRevision = journeyRevision
    }
}

/// A federated identity met for the first time in a sign-up flow: what the provider (and the
/// "after federating" connector) said, shown prefilled on the attribute page before the
/// account is made.
struct FederatedSignUp: Sendable, Codable, Equatable {
    var provider: IdentityProviderKind
    var subject: String
    var email: String?
    var displayName: String
    /// Prefilled values by account key (`givenName`, `extension_{name}`, …).
    var attributes: [String: String]
    /// Whether the flow's "after federating" connector has answered.
    var connectorCalled: Bool?
    /// Whether the provider vouched for `email` (absent: yes, as before it was recorded).
    var emailVerified: Bool?
}

/// A single-sign-on session at the identity service (the cookie holds a random id; the store
/// holds its hash).
package struct SSOSession: Sendable, Equatable {
    var tenantID: UUID
    package var userID: UUID
    var identityProvider: IdentityProviderKind
    var authTime: Date
    var expiresAt: Date
    /// The sign-in that started it passed a second factor (SPEC §2.11).
    var secondFactor = false
}

extension OutboxMessage {
    /// How long the outbox keeps a message: a day, then the sweep deletes it.
    static let retentionSeconds: Int64 = 86_400

    /// A new message id: wall-clock microseconds in 16 hex digits, then randomness.
    package static func newID() -> String {
        let micros = UInt64(Date().timeIntervalSince1970 * 1_000_000)
        let hex = String(micros, radix: 16)
        return String(repeating: "0", count: max(0, 16 - hex.count)) + hex + "-" + Secrets.randomToken(byteCount: 6)
    }
}

/// What the simulated upstream provider asserted about a user.
package struct FederatedIdentity: Sendable, Equatable {
    var provider: IdentityProviderKind
    var subject: String
    var email: String?
    var displayName: String
    var givenName: String?
    var surname: String?
    /// The provider vouches for `email` (the simulated Facebook always does; an OpenID Connect
    /// provider through `email_verified`).
    var emailVerified: Bool = true
    /// The ID token's claims that are text, numbers or booleans, as text: what a custom policy's
    /// identity provider profile maps onto its claims by `PartnerClaimType` (SPEC §2.12).
    var claims: [String: String] = [:]
    /// The provider (a declared provider's name, a policy profile's id) whose request this is the
    /// answer to, as the one-time state recorded it; nil for the simulated Facebook.
    var via: String? = nil
}

/// The authorization request's parameters beyond OAuth's and OpenID Connect's own, as B2C's
/// `{OAUTH-KV:…}` resolver reads them (claim-resolver-overview.md: "any OAuth2 or OpenID
/// Connect query string parameter"). They are stored with the transaction, so they are bounded:
/// at most ``maximumCount`` names of letters, digits, `_`, `-` and `.` up to 64 characters, each
/// value at most ``maximumValueBytes``; others are not kept (B2C leaves an unknown one empty).
package enum ExtraParameters {
    static let maximumCount = 20
    static let maximumValueBytes = 512
    /// Names the request's typed members hold, or that are secrets or tokens.
    static let standard: Set<String> = [
        "client_id", "redirect_uri", "response_type", "response_mode", "scope", "state", "nonce", "code_challenge",
        "code_challenge_method", "prompt", "login_hint", "domain_hint", "max_age", "ui_locales", "p", "id_token_hint",
        "client_secret", "client_assertion", "client_assertion_type", "claims", "request", "request_uri", "code", "password",
    ]

    package static func kept(from pairs: [(String, String)]) -> [String: String]? {
        var kept: [String: String] = [:]
        for (name, value) in pairs where kept.count < maximumCount && kept[name] == nil && !standard.contains(name.lowercased()) {
            guard (1...64).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_-.".contains($0)) }),
                value.utf8.count <= maximumValueBytes
            else { continue }
            kept[name] = value
        }
        return kept.isEmpty ? nil : kept
    }
}
