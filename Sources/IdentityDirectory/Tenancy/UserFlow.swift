import Foundation
import TodoModels
import TrustFramework

/// The kinds of user flow B2C offers (https://learn.microsoft.com/azure/active-directory-b2c/user-flow-versions).
public enum UserFlowType: String, Sendable, Codable, CaseIterable {
    case signUpOrSignIn
    case signUp
    case signIn
    case profileEdit
    case passwordReset
    case ropc

    /// Flows whose sign-in page offers "Forgot your password?", which answers AADB2C90118
    /// to the app instead of resetting in place (https://learn.microsoft.com/azure/active-directory-b2c/troubleshoot?pivots=b2c-user-flow#password-reset-error).
    package var offersForgotPassword: Bool { self == .signUpOrSignIn || self == .signIn }
}

/// Where a user's identity comes from: local accounts, the simulated Facebook, or an upstream
/// OpenID Connect provider named by its issuer (the `idp` claim B2C writes for it).
public struct IdentityProviderKind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    /// Any name of 1 to 512 printable ASCII characters: `local`, `facebook.com`, an issuer URL,
    /// or (in a declaration) a declared provider's name.
    public init?(rawValue: String) {
        guard (1...512).contains(rawValue.count), rawValue.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0.asciiValue! >= 0x21 })
        else { return nil }
        self.rawValue = rawValue
    }

    private init(known: String) { rawValue = known }

    /// Email + password accounts stored here.
    public static let local = IdentityProviderKind(known: "local")
    /// The simulated Facebook provider (`idp: facebook.com`).
    public static let facebook = IdentityProviderKind(known: "facebook.com")

    /// An upstream OpenID Connect provider, by its issuer.
    static func upstream(issuer: String) -> IdentityProviderKind { IdentityProviderKind(known: issuer) }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let kind = IdentityProviderKind(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(raw)' is not an identity provider name")
        }
        self = kind
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// User attributes a flow can collect at sign-up or edit in the profile page, with the claim
/// each becomes.
public enum UserAttribute: String, Sendable, Codable, CaseIterable {
    case displayName
    case givenName
    case surname
    case city
    case country
    case postalCode
    case jobTitle
    case streetAddress
    case state

    public var claimName: String {
        switch self {
        case .displayName: "name"
        case .givenName: "given_name"
        case .surname: "family_name"
        default: rawValue
        }
    }

    var label: String {
        switch self {
        case .displayName: "Display name"
        case .givenName: "Given name"
        case .surname: "Surname"
        case .city: "City"
        case .country: "Country/Region"
        case .postalCode: "Postal code"
        case .jobTitle: "Job title"
        case .streetAddress: "Street address"
        case .state: "State/Province"
        }
    }

    /// The HTML `autocomplete` token, so browsers and password managers fill the right field.
    package var autocomplete: String {
        switch self {
        case .displayName: "nickname"
        case .givenName: "given-name"
        case .surname: "family-name"
        case .city: "address-level2"
        case .country: "country-name"
        case .postalCode: "postal-code"
        case .jobTitle: "organization-title"
        case .streetAddress: "street-address"
        case .state: "address-level1"
        }
    }

    static let maximumLength = 256

    /// A value for this attribute as stored (``TextRules/name(_:maximumLength:)``), or the
    /// message a page shows. An empty value is `.success("")`: whether it is required is the
    /// caller's rule.
    package func validate(_ raw: String) -> Result<String, AttributeProblem> {
        if raw.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { return .success("") }
        switch TextRules.name(raw, maximumLength: Self.maximumLength) {
        case .success(let value): return .success(value)
        case .failure(.empty): return .success("")
        case .failure(.tooLong(let maximum)): return .failure(AttributeProblem(message: "\(label) must be at most \(maximum) characters."))
        case .failure(.forbiddenCharacter):
            return .failure(
                AttributeProblem(message: "\(label) contains characters that cannot be used (controls or invisible characters)."))
        }
    }
}

/// Why an attribute value was refused, in words for the page.
package struct AttributeProblem: Error, Equatable {
    package let message: String

    package init(message: String) {
        self.message = message
    }
}

/// Token lifetimes of a flow (https://learn.microsoft.com/azure/active-directory-b2c/tokens-overview#configuration: 60 min tokens, 14 days refresh,
/// 90 days sliding window by default).
public struct TokenLifetimes: Sendable, Codable, Equatable {
    public var accessTokenSeconds: Int
    public var idTokenSeconds: Int
    public var refreshTokenSeconds: Int
    /// nil means "Unbounded".
    public var slidingWindowSeconds: Int?

    public static let `default` = TokenLifetimes(
        accessTokenSeconds: 3600, idTokenSeconds: 3600, refreshTokenSeconds: 14 * 86_400,
        slidingWindowSeconds: 90 * 86_400)

    public init(accessTokenSeconds: Int, idTokenSeconds: Int, refreshTokenSeconds: Int, slidingWindowSeconds: Int?) {
        self.accessTokenSeconds = accessTokenSeconds
        self.idTokenSeconds = idTokenSeconds
        self.refreshTokenSeconds = refreshTokenSeconds
        self.slidingWindowSeconds = slidingWindowSeconds
    }
}

/// A user flow (policy) such as `B2C_1_susi`.
public struct UserFlow: Sendable, Equatable {
    public var tenantID: UUID
    /// The name as configured; `tfp` carries it with this case.
    public var name: String
    public var type: UserFlowType
    public var identityProviders: [IdentityProviderKind]
    /// Built-in attributes and the tenant's own (`extension_{name}`).
    public var signUpAttributes: [FlowAttribute]
    public var applicationClaims: [String]
    public var lifetimes: TokenLifetimes
    /// Sign-up proves the email address with a code before the account is made: B2C's default
    /// for local accounts (SPEC §2.11). Without it the address is stored unverified and tokens
    /// do not assert it (the security issue's M-7).
    public var emailVerification: Bool
    /// Multi-factor authentication (SPEC §2.11); off unless declared.
    public var mfa: MFAPolicy = .off
    /// The tenant's API connectors this flow calls, by step (SPEC §2.11).
    public var connectors = FlowConnectors()
    /// The tenant's custom authentication extensions this flow calls, by event (SPEC §2.15).
    public var extensions = FlowExtensions()
    /// How the flow's local accounts sign in through native authentication (External ID's two
    /// local methods, SPEC §2.15): with a password, or with a one-time code mailed each time
    /// (accounts made without a password). The hosted pages always use passwords.
    public var emailSignIn: EmailSignInMethod = .password
    /// The compiled custom policy, when this "flow" is one (`B2C_1A_…`, SPEC §2.12): its journey
    /// and token claims come from the policy, not from the fields above.
    package var customPolicy: CustomPolicyProgram?

    public init(
        tenantID: UUID, name: String, type: UserFlowType, identityProviders: [IdentityProviderKind] = [.local],
        signUpAttributes: [FlowAttribute] = [.displayName], applicationClaims: [String] = UserFlow.defaultClaims,
        lifetimes: TokenLifetimes = .default, emailVerification: Bool = true
    ) {
        self.emailVerification = emailVerification
        self.tenantID = tenantID
        self.name = name
        self.type = type
        self.identityProviders = identityProviders
        self.signUpAttributes = signUpAttributes
        self.applicationClaims = applicationClaims
        self.lifetimes = lifetimes
    }

    /// The claims every dev-tenant flow returns (SPEC §2.1).
    public static let defaultClaims = ["name", "oid", "emails", "given_name", "family_name", "idp", "newUser"]

    /// The policy-name rule passport-azure-ad enforces (https://github.com/AzureAD/passport-azure-ad/blob/dev/lib/constants.js#L30).
    public static func isValidName(_ name: String) -> Bool {
        let lower = name.lowercased()
        guard lower.hasPrefix("b2c_1_") || lower.hasPrefix("b2c_1a_") else { return false }
        let rest = lower.hasPrefix("b2c_1a_") ? lower.dropFirst(7) : lower.dropFirst(6)
        return !rest.isEmpty && rest.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
    }

    package var offersLocalAccounts: Bool { identityProviders.contains(.local) }
    package var offersFacebook: Bool { identityProviders.contains(.facebook) }

    /// The claims advertised in discovery: the flow's application claims plus protocol claims.
    package var claimsSupported: [String] {
        var claims = applicationClaims
        for claim in ["sub", "tfp", "iss", "iat", "exp", "aud", "acr", "nonce", "auth_time"] where !claims.contains(claim) {
            claims.append(claim)
        }
        return claims
    }
}

/// External ID's local account methods: "Email with password" and "Email one-time passcode".
public enum EmailSignInMethod: String, Sendable, Codable, CaseIterable {
    case password
    case oneTimePasscode
}

/// The stored form of a flow's settings (the `definition` column, JSON).
struct UserFlowDefinition: Codable {
    var type: UserFlowType
    var identityProviders: [IdentityProviderKind]
    var signUpAttributes: [FlowAttribute]
    var applicationClaims: [String]
    var lifetimes: TokenLifetimes
    /// Absent in flows stored before it existed: on, as in B2C.
    var emailVerification: Bool?
    var mfa: MFAPolicy?
    var apiConnectors: FlowConnectors?
    var authenticationExtensions: FlowExtensions?
    var emailSignIn: EmailSignInMethod?
}
