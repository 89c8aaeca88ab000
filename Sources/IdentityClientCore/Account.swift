import Foundation

/// A signed-in user as the SDK knows them. Accounts are per user flow in B2C: the home account id
/// includes the policy (`<oid>-<policy>.<tenant id>`), like MSAL's (https://github.com/AzureAD/microsoft-authentication-library-for-dotnet/issues/4057).
public struct Account: Sendable, Hashable, Codable, Identifiable {
    /// `client_info.uid + "." + client_info.utid`, or the `sub` claim when the server sent no
    /// `client_info` (plain OpenID Connect providers).
    public var homeAccountID: String
    /// The identity service's host (and port): accounts of different services never mix.
    public var environment: String
    /// `preferred_username`, else `emails[0]`, else `name`.
    public var username: String?
    public var name: String?
    /// The `oid` claim (the user's object id; what the Task API keys tasks by).
    public var objectID: String?
    public var tenantID: String?
    /// The user flow the tokens came from (B2C), or nil.
    public var policy: String?
    /// The ID token's claims at the last sign-in or refresh.
    public var claims: [String: JSONValue]

    public var id: String { homeAccountID }

    public init(
        homeAccountID: String, environment: String, username: String?, name: String?, objectID: String?, tenantID: String?,
        policy: String?, claims: [String: JSONValue]
    ) {
        self.homeAccountID = homeAccountID
        self.environment = environment
        self.username = username
        self.name = name
        self.objectID = objectID
        self.tenantID = tenantID
        self.policy = policy
        self.claims = claims
    }
}

/// What a successful acquisition returns.
public struct AuthenticationResult: Sendable {
    /// The bearer token for the API (empty when only `openid` was asked for: B2C issues no access
    /// token then).
    public var accessToken: String
    public var expiresOn: Date
    public var idToken: IDToken?
    public var account: Account
    /// The scopes the access token was asked for.
    public var scopes: [String]
    /// The id sent as `client-request-id`, for support requests.
    public var correlationID: String
    /// Whether the token came from the cache without a network request.
    public var fromCache: Bool
}
