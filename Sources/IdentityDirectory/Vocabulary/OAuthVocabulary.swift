import Foundation

/// The `grant_type` values the token endpoint serves (RFC 6749 §4.1.3, §6, §4.3, §4.4).
package enum GrantType: String, Sendable {
    case authorizationCode = "authorization_code"
    case refreshToken = "refresh_token"
    /// ROPC: only in a flow of type ``UserFlowType/ropc`` (https://learn.microsoft.com/azure/active-directory-b2c/add-ropc-policy).
    case password
    case clientCredentials = "client_credentials"
}

/// One component of `response_type` (OIDC Core §3; OAuth 2.0 Multiple Response Type Encoding
/// Practices). A request names a set of them, `code id_token` for the hybrid flow.
package enum ResponseType: String, Sendable, Codable, Comparable {
    case code
    case idToken = "id_token"
    case token

    package static func < (lhs: ResponseType, rhs: ResponseType) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The components of a `response_type` value's words, or nil when one is not known.
    package static func parse(_ words: Set<String>) -> Set<ResponseType>? {
        let types = Set(words.compactMap(ResponseType.init(rawValue:)))
        return types.count == words.count ? types : nil
    }
}

/// The `prompt` values B2C accepts (https://learn.microsoft.com/azure/active-directory-b2c/error-codes), in the precedence applied
/// when several are given: `none`, `login`, `create`, then the rest.
package enum Prompt: String, Sendable, Codable, CaseIterable {
    /// `prompt=none`: no page may be shown (OIDC Core §3.1.2.1). Not named `none`, which an
    /// optional `Prompt?` would confuse with nil.
    case silent = "none"
    case login
    case create
    case selectAccount = "select_account"
    case consent
}

/// The PKCE transformation (RFC 7636 §4.2). Without `code_challenge_method` a challenge is
/// `plain`; only apps that allow it may use `plain` (SPAs and native apps use `S256`).
package enum CodeChallengeMethod: String, Sendable, Codable {
    case s256 = "S256"
    case plain
}
