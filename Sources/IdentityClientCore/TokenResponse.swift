import Foundation

/// A token endpoint's success response (RFC 6749 §5.1) with B2C's extras. `expires_in` is a
/// number from B2C but a string from some providers (and once from Azure AD), so both decode.
struct TokenResponse: Decodable {
    var accessToken: String?
    var tokenType: String?
    var expiresIn: Int?
    var refreshToken: String?
    var idToken: String?
    var scope: String?
    var clientInfo: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case scope
        case clientInfo = "client_info"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = try container.decodeIfPresent(String.self, forKey: .accessToken)
        tokenType = try container.decodeIfPresent(String.self, forKey: .tokenType)
        if let number = try? container.decodeIfPresent(Int.self, forKey: .expiresIn) {
            expiresIn = number
        } else if let text = try? container.decodeIfPresent(String.self, forKey: .expiresIn) {
            expiresIn = Int(text)
        }
        refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken)
        idToken = try container.decodeIfPresent(String.self, forKey: .idToken)
        scope = try container.decodeIfPresent(String.self, forKey: .scope)
        clientInfo = try container.decodeIfPresent(String.self, forKey: .clientInfo)
    }

    /// Decodes a token endpoint answer, or throws its OAuth error in typed form.
    static func parse(_ response: TransportResponse, requestCorrelationID: String) throws -> TokenResponse {
        let correlation = response.headers["client-request-id"] ?? requestCorrelationID
        guard (200..<300).contains(response.status) else {
            if let error = try? JSONDecoder().decode(OAuthErrorBody.self, from: response.body) {
                throw IdentityError.fromOAuth(
                    error: error.error, description: error.errorDescription, correlationID: error.correlationID ?? correlation)
            }
            throw IdentityError.network("the token endpoint answered HTTP \(response.status) without an OAuth error")
        }
        do {
            return try JSONDecoder().decode(TokenResponse.self, from: response.body)
        } catch {
            throw IdentityError.network("the token endpoint's answer is not a token response")
        }
    }
}

/// Scope lists: what is sent and how cached tokens are keyed.
enum Scopes {
    /// Asked for on every request: an ID token and a refresh token (OpenID Connect Core §11).
    static let reserved: Set<String> = ["openid", "offline_access", "profile"]

    static func request(_ scopes: [String]) -> String {
        var seen = Set<String>()
        return (["openid", "offline_access"] + scopes).filter { seen.insert($0.lowercased()).inserted }.joined(separator: " ")
    }

    /// The cache key: lowercased, sorted, without the OpenID scopes.
    static func key(_ scopes: [String]) -> [String] {
        Array(Set(scopes.map { $0.lowercased() }).subtracting(reserved)).sorted()
    }
}
