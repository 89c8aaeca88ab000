import Foundation
import HTTPTypes

/// An error in Azure AD B2C's form: an OAuth `error`, an `AADB2C` code and its message
/// (research/b2c-protocol.md §4.3). The wire forms — JSON at the token endpoint, query/fragment/
/// form_post at the redirect URI, an HTML page — are produced in one place each
/// (``B2CErrorWire``).
struct B2CError: Error, Sendable, Equatable {
    public var oauthError: String
    public var code: String
    public var message: String
    public var status: HTTPResponse.Status
    /// B2C appends the `login_hint` to some descriptions (research/b2c-protocol.md §4.1).
    public var loginHint: String?
    /// Set for the conditions only the Entra face reports (``EntraError``); the others map.
    var entraCode: Int?
    /// Entra's message for ``entraCode`` when it differs from B2C's.
    var entraMessage: String?
    /// Entra's `suberror` for ``entraCode``, where it has one.
    var entraSuberror: String?

    public init(_ oauthError: String, _ code: String, _ message: String, status: HTTPResponse.Status = .badRequest) {
        self.oauthError = oauthError
        self.code = code
        self.message = message
        self.status = status
    }

    /// `"<code>: <message>\r\nCorrelation ID: <guid>\r\nTimestamp: <yyyy-MM-dd HH:mm:ssZ>\r\n"`.
    public func errorDescription(correlationID: String, at date: Date) -> String {
        var text = "\(code): \(message)\r\nCorrelation ID: \(correlationID)\r\nTimestamp: \(B2CTimestamp.format(date))\r\n"
        if let loginHint { text += "login_hint: \(loginHint)\r\n" }
        return text
    }
}

enum B2CTimestamp {
    static func format(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02dZ", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0, c.minute ?? 0,
            c.second ?? 0)
    }
}

// The catalogue. Messages follow azure-docs `error-codes.md` (research/b2c-protocol.md §4.3).
extension B2CError {
    static func redirectNotRegistered(_ uri: String, clientID: String) -> B2CError {
        B2CError(
            "invalid_request", "AADB2C90006",
            "The redirect URI '\(uri)' provided in the request is not registered for the client ID '\(clientID)'.")
    }
    static func noRedirectURIs(clientID: String) -> B2CError {
        B2CError(
            "invalid_request", "AADB2C90007", "The application associated with client ID '\(clientID)' has no registered redirect URIs.")
    }
    static let missingClientID = B2CError("invalid_request", "AADB2C90008", "The request does not contain a client ID parameter.")
    static let missingScope = B2CError("invalid_request", "AADB2C90010", "The request does not contain a scope parameter.")
    static func scopeNotSupported(_ scope: String) -> B2CError {
        B2CError("invalid_scope", "AADB2C90012", "The scope '\(scope)' provided in request is not supported.")
    }
    static func responseTypeNotSupported(_ type: String) -> B2CError {
        B2CError(
            "unsupported_response_type", "AADB2C90013", "The requested response type '\(type)' provided in the request is not supported.")
    }
    static func responseModeNotSupported(_ mode: String) -> B2CError {
        B2CError("invalid_request", "AADB2C90014", "The requested response mode '\(mode)' provided in the request is not supported.")
    }
    static func clientNotRegistered(_ clientID: String, tenant: String) -> B2CError {
        B2CError(
            "unauthorized_client", "AADB2C90018",
            "The client ID '\(clientID)' specified in the request is not registered in tenant '\(tenant)'.")
    }
    static let temporarilyUnavailable = B2CError(
        "temporarily_unavailable", "AADB2C90035", "The service is temporarily unavailable. Please retry after a few minutes.",
        status: .serviceUnavailable)
    static let missingPostLogoutRedirect = B2CError(
        "invalid_request", "AADB2C90036",
        "The request does not contain a URI to redirect the user to post logout. Specify a URI in the post_logout_redirect_uri parameter field."
    )
    static func processingError(_ detail: String) -> B2CError {
        B2CError("invalid_request", "AADB2C90037", "An error occurred while processing the request. \(detail)")
    }
    static func unknownTenant(_ tenant: String) -> B2CError {
        var error = processingError("The tenant '\(tenant)' was not found.")
        error.status = .notFound
        error.oauthError = "invalid_tenant"
        return error
    }
    static func unknownPolicy(_ policy: String, tenant: String) -> B2CError {
        var error = processingError("The policy '\(policy)' was not found in tenant '\(tenant)'.")
        error.status = .notFound
        error.oauthError = "invalid_request"
        return error
    }
    static let invalidPrompt = B2CError(
        "invalid_request", "AADB2C90043",
        "The prompt included in the request contains invalid values. Expected 'none', 'login', 'consent', 'select_account' or 'create'.")
    static func scopeNeedsResource(_ scope: String) -> B2CError {
        B2CError(
            "invalid_scope", "AADB2C90055",
            "The scope '\(scope)' provided in request must specify a resource, such as 'https://example.com/calendar.read'.")
    }
    static let implicitNotAllowed = B2CError(
        "unauthorized_client", "AADB2C90057", "The provided application is not configured to allow the 'OAuth' Implicit flow.")
    static let codeChallengeRequired = B2CError(
        "invalid_request", "AADB2C99059", "The supplied request must present a code_challenge.")
    static func postLogoutRedirectInvalid(_ uri: String) -> B2CError {
        B2CError(
            "invalid_request", "AADB2C90067",
            "The post logout redirect URI '\(uri)' has an invalid format. Specify an https based URL such as 'https://example.com/return' or for native clients use the IETF native client URI 'urn:ietf:wg:oauth:2.0:oob'."
        )
    }
    static let noSession = B2CError(
        "interaction_required", "AADB2C90077", "User does not have an existing session and request prompt parameter has a value of 'None'.")
    static let secretRequired = B2CError(
        "invalid_request", "AADB2C90079", "Clients must send a client_secret when redeeming a confidential grant.")
    static func grantExpired(now: Date, issued: Date, expires: Date) -> B2CError {
        B2CError(
            "invalid_grant", "AADB2C90080",
            "The provided grant has expired. Please re-authenticate and try again. Current time: \(now.epochSeconds), Grant issued time: \(issued.epochSeconds), Grant sliding window expiration time: \(expires.epochSeconds)."
        )
    }
    static let secretMismatch = B2CError(
        "invalid_client", "AADB2C90081",
        "The specified client_secret does not match the expected value for this client. Please correct the client_secret and try again.",
        status: .unauthorized)
    static func missingParameter(_ name: String) -> B2CError {
        B2CError("invalid_request", "AADB2C90083", "The request is missing required parameter: \(name).")
    }
    static let publicClientSentSecret = B2CError(
        "invalid_request", "AADB2C90084", "Public clients should not send a client_secret when redeeming a publicly acquired grant.")
    static let internalError = B2CError(
        "server_error", "AADB2C90085", "The service has encountered an internal error. Please reauthenticate and try again.",
        status: .internalServerError)
    static func grantTypeNotSupported(_ type: String) -> B2CError {
        B2CError("unsupported_grant_type", "AADB2C90086", "The supplied grant_type [\(type)] is not supported.")
    }
    static func grantNotForThisEndpoint(actual: String, expected: String) -> B2CError {
        B2CError(
            "invalid_grant", "AADB2C90088",
            "The provided grant has not been issued for this endpoint. Actual Value : \(actual) and Expected Value : \(expected)")
    }
    static let malformedGrant = B2CError("invalid_grant", "AADB2C90090", "The provided JWE is not a valid 5 segment token.")
    static let userCancelled = B2CError(
        "access_denied", "AADB2C90091", "The user has cancelled entering self-asserted information.")
    static let openIDRequiredForIDToken = B2CError(
        "invalid_request", "AADB2C90110",
        "The scope parameter must include 'openid' when requesting a response_type that includes 'id_token'.")
    /// A disabled account (Graph `accountEnabled: false`); Entra's AADSTS50057.
    static let accountDisabled: B2CError = {
        var error = B2CError(
            "invalid_grant", "AADB2C90111", "Your account has been locked. Contact your support person to unlock it, then try again.")
        error.entraCode = 50057
        error.entraMessage = "The user account is disabled."
        return error
    }()
    /// ROPC for an account whose password must be changed first: B2C's ROPC reports it as a
    /// failed sign-in (AADB2C90225); Entra says AADSTS50055, password expired.
    static let passwordChangeRequired: B2CError = {
        var error = invalidCredentials
        error.entraCode = 50055
        error.entraMessage = "The password is expired. The user must change it before signing in."
        return error
    }()
    static let accountLocked = B2CError(
        "invalid_grant", "AADB2C90114", "Your account is temporarily locked to prevent unauthorized use. Try again later.")
    static let codeScopeRule = B2CError(
        "invalid_request", "AADB2C90115",
        "When requesting the 'code' response_type, the scope parameter must include a resource or client ID for access tokens, and 'openid' for ID tokens. Additionally include 'offline_access' for refresh tokens."
    )
    /// Too many wrong second-factor codes, in the transaction or for the account
    /// (research/b2c-protocol.md §5.6). Entra's "too many MFA attempts" is AADSTS50074-family;
    /// no exact equivalent, so the default mapping applies.
    static let tooManySecondFactorTries = B2CError(
        "access_denied", "AADB2C90151", "User has exceeded the maximum number for retries for multifactor authentication.")
    static let forgotPassword = B2CError("access_denied", "AADB2C90118", "The user has forgotten their password.")
    static func invalidMaxAge(_ value: String) -> B2CError {
        B2CError(
            "invalid_request", "AADB2C90120",
            "The max age parameter '\(value)' specified in the request is invalid. Max age must be an integer between 0 and 2147483647 inclusive."
        )
    }
    static let accountGone = B2CError(
        "invalid_grant", "AADB2C90128", "The account associated with this grant no longer exists. Please reauthenticate and try again.")
    static let grantRevoked = B2CError(
        "invalid_grant", "AADB2C90129", "The provided grant has been revoked. Please reauthenticate and try again.")
    /// The app holds no permission for any scope it asked of this API (research/b2c-protocol.md §4).
    static let insufficientPermissions = B2CError(
        "invalid_scope", "AADB2C90205",
        "This application does not have sufficient permissions against this web resource to perform the operation.")
    /// A refresh asked for more than its original grant (RFC 6749 §6).
    static func scopeBeyondGrant(_ scope: String) -> B2CError {
        var error = insufficientPermissions
        error.message += " The scope '\(scope)' was not part of the original grant of this refresh token."
        return error
    }
    static func multipleResources(_ scope: String) -> B2CError {
        B2CError(
            "invalid_scope", "AADB2C90146",
            "The scope '\(scope)' provided in request specifies more than one resource for an access token, which is not supported.")
    }
    static let verifierMismatch = B2CError(
        "invalid_grant", "AADB2C90182", "The supplied code_verifier does not match associated code_challenge.")
    static let verifierInvalid = B2CError("invalid_grant", "AADB2C90183", "The supplied code_verifier is invalid.")
    static func challengeMethodNotSupported(_ method: String) -> B2CError {
        B2CError(
            "invalid_request", "AADB2C90184",
            "The supplied code_challenge_method '\(method)' is not supported. Supported values are plain or S256.")
    }
    static let ropcNotEnabled = B2CError(
        "unauthorized_client", "AADB2C90224", "Resource owner flow has not been enabled for the application.")
    static let invalidCredentials = B2CError(
        "invalid_grant", "AADB2C90225", "The username or password provided in the request are invalid.")
    /// For a request that repeats a parameter (RFC 6749 §3.1).
    static func repeatedParameter(_ name: String) -> B2CError {
        processingError("The parameter '\(name)' was provided more than once.")
    }
    static func malformedRequest(_ detail: String) -> B2CError { processingError(detail) }
}
