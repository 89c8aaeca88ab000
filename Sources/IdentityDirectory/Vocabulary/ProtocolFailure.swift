import Foundation
import HTTPTypes

/// Every way a protocol request of the identity service can fail, as one enum. Each face
/// renders it exhaustively: ``b2c`` in Azure AD B2C's form (an OAuth `error`, an `AADB2C` code
/// and its message; https://learn.microsoft.com/azure/active-directory-b2c/error-codes), ``entra`` in the Microsoft identity
/// platform's (an `AADSTS` number; SPEC §2.9). A new case does not compile until both say what
/// it is. The wire forms (JSON at the token endpoint, the redirect URI's parameters, an HTML
/// page) are written in one place each (``B2CErrorWire``).
package enum ProtocolFailure: Error, Sendable, Equatable {
    case redirectNotRegistered(String, clientID: String)
    case noRedirectURIs(clientID: String)
    case missingClientID
    case missingScope
    case scopeNotSupported(String)
    case responseTypeNotSupported(String)
    case responseModeNotSupported(String)
    case clientNotRegistered(String, tenant: String)
    case temporarilyUnavailable
    case missingPostLogoutRedirect
    case unknownTenant(String)
    case unknownPolicy(String, tenant: String)
    /// A path nothing answers.
    case resourceNotFound
    case invalidPrompt
    case scopeNeedsResource(String)
    case implicitNotAllowed
    case codeChallengeRequired
    case postLogoutRedirectInvalid(String)
    case noSession
    case secretRequired
    case grantExpired(now: Date, issued: Date, expires: Date)
    case secretMismatch
    case missingParameter(String)
    case publicClientSentSecret
    case internalError
    case grantTypeNotSupported(String)
    case grantNotForThisEndpoint(actual: String, expected: String)
    case malformedGrant
    case userCancelled
    case openIDRequiredForIDToken
    /// A disabled account (Graph `accountEnabled: false`).
    case accountDisabled
    /// ROPC for an account whose password must be changed first: B2C's ROPC reports a failed
    /// sign-in; Entra says the password expired.
    case passwordChangeRequired
    case accountLocked
    case codeScopeRule
    /// Too many wrong second-factor codes, in the transaction or for the account
    /// (https://learn.microsoft.com/azure/active-directory-b2c/error-codes).
    case tooManySecondFactorTries
    /// "Forgot your password?" handed back to the app (https://learn.microsoft.com/azure/active-directory-b2c/troubleshoot?pivots=b2c-user-flow#password-reset-error); B2C
    /// appends the `login_hint` to the description.
    case forgotPassword(loginHint: String?)
    case invalidMaxAge(String)
    case accountGone
    case grantRevoked
    /// The app holds no permission for any scope it asked of this API.
    case insufficientPermissions
    /// A refresh asked for more than its original grant (RFC 6749 §6).
    case scopeBeyondGrant(String)
    case multipleResources(String)
    case verifierMismatch
    case verifierInvalid
    case challengeMethodNotSupported(String)
    case ropcNotEnabled
    case invalidCredentials
    /// A request that repeats a parameter (RFC 6749 §3.1).
    case repeatedParameter(String)
    case malformedRequest(String)
    /// An API connector that failed (``ConnectorFailure``).
    case connectorFailed(ConnectorFailure)
    /// A custom authentication extension (External ID, SPEC §2.15) that failed or answered
    /// outside its event's contract. How is logged, never told: the extension's endpoint must not
    /// become a probe of the network behind it.
    case extensionFailed
    /// An upstream identity provider's answer that could not be used.
    case upstreamFailed(String)
    /// A custom policy asks for something this service does not run (named in the text).
    case policyNotRunnable(String)
    /// A custom policy's OAuth2 error technical profile ran: its `errorCode` and `errorMessage`,
    /// sent as `access_denied` with `AAD_Custom_<errorCode>: <errorMessage>` (oauth2-error-technical-profile.md).
    case policyError(code: String, message: String)
    /// A custom policy's REST technical profile that failed (B2C's AADB2C90075 for a claims exchange).
    case restfulFailed(profile: String, step: String, code: String, reason: String)
    /// A custom policy's `id_token_hint` its `GetClaims` step refused (id-token-hint.md): past
    /// its `exp` (AADB2C90208), or not to be believed (AADB2C90233: the signature, the
    /// algorithm, the issuer, the audience, `nbf`, or not a JWT at all), as B2C reports both.
    case idTokenHintRefused(expired: Bool)
    // Conditions only the Entra face has.
    /// Consent was refused on the consent page.
    case consentDeclined
    /// `prompt=none` for scopes the user has not consented to.
    case consentRequired(clientID: String, name: String)
    /// A grant without a page (a refresh, ROPC) for scopes the user has not consented to.
    case grantNotConsented(clientID: String, name: String)
    /// A password grant where the flow requires a second factor, which the grant cannot ask for.
    case multiFactorRequired
    /// Instance discovery for a host this service does not answer for.
    case invalidInstance

}

/// An error as B2C reports it.
struct B2CErrorText: Sendable, Equatable {
    var oauthError: String
    var code: String
    var message: String
    var status: HTTPResponse.Status = .badRequest
}

extension ProtocolFailure {
    /// B2C's rendering. Messages follow azure-docs `error-codes.md`.
    var b2c: B2CErrorText {
        func text(_ error: String, _ code: String, _ message: String, _ status: HTTPResponse.Status = .badRequest) -> B2CErrorText {
            B2CErrorText(oauthError: error, code: "AADB2C\(code)", message: message, status: status)
        }
        func processing(_ detail: String, error: String = "invalid_request", status: HTTPResponse.Status = .badRequest) -> B2CErrorText {
            text(error, "90037", "An error occurred while processing the request. \(detail)", status)
        }
        func entraOnly(_ error: String) -> B2CErrorText {
            let entra = self.entra
            return B2CErrorText(oauthError: error, code: "AADSTS\(entra.code)", message: entra.message)
        }
        switch self {
        case .redirectNotRegistered(let uri, let clientID):
            return text(
                "invalid_request", "90006",
                "The redirect URI '\(uri)' provided in the request is not registered for the client ID '\(clientID)'.")
        case .noRedirectURIs(let clientID):
            return text(
                "invalid_request", "90007", "The application associated with client ID '\(clientID)' has no registered redirect URIs.")
        case .missingClientID: return text("invalid_request", "90008", "The request does not contain a client ID parameter.")
        case .missingScope: return text("invalid_request", "90010", "The request does not contain a scope parameter.")
        case .scopeNotSupported(let scope):
            return text("invalid_scope", "90012", "The scope '\(scope)' provided in request is not supported.")
        case .responseTypeNotSupported(let type):
            return text(
                "unsupported_response_type", "90013", "The requested response type '\(type)' provided in the request is not supported.")
        case .responseModeNotSupported(let mode):
            return text("invalid_request", "90014", "The requested response mode '\(mode)' provided in the request is not supported.")
        case .clientNotRegistered(let clientID, let tenant):
            return text(
                "unauthorized_client", "90018",
                "The client ID '\(clientID)' specified in the request is not registered in tenant '\(tenant)'.")
        case .temporarilyUnavailable:
            return text(
                "temporarily_unavailable", "90035", "The service is temporarily unavailable. Please retry after a few minutes.",
                .serviceUnavailable)
        case .missingPostLogoutRedirect:
            return text(
                "invalid_request", "90036",
                "The request does not contain a URI to redirect the user to post logout. Specify a URI in the post_logout_redirect_uri parameter field."
            )
        case .unknownTenant(let tenant):
            return processing("The tenant '\(tenant)' was not found.", error: "invalid_tenant", status: .notFound)
        case .unknownPolicy(let policy, let tenant):
            return processing("The policy '\(policy)' was not found in tenant '\(tenant)'.", status: .notFound)
        case .resourceNotFound: return processing("The resource was not found.", status: .notFound)
        case .invalidPrompt:
            return text(
                "invalid_request", "90043",
                "The prompt included in the request contains invalid values. Expected 'none', 'login', 'consent', 'select_account' or 'create'."
            )
        case .scopeNeedsResource(let scope):
            return text(
                "invalid_scope", "90055",
                "The scope '\(scope)' provided in request must specify a resource, such as 'https://example.com/calendar.read'.")
        case .implicitNotAllowed:
            return text("unauthorized_client", "90057", "The provided application is not configured to allow the 'OAuth' Implicit flow.")
        case .codeChallengeRequired:
            return B2CErrorText(
                oauthError: "invalid_request", code: "AADB2C99059", message: "The supplied request must present a code_challenge.")
        case .postLogoutRedirectInvalid(let uri):
            return text(
                "invalid_request", "90067",
                "The post logout redirect URI '\(uri)' has an invalid format. Specify an https based URL such as 'https://example.com/return' or for native clients use the IETF native client URI 'urn:ietf:wg:oauth:2.0:oob'."
            )
        case .noSession:
            return text(
                "interaction_required", "90077",
                "User does not have an existing session and request prompt parameter has a value of 'None'.")
        case .secretRequired:
            return text("invalid_request", "90079", "Clients must send a client_secret when redeeming a confidential grant.")
        case .grantExpired(let now, let issued, let expires):
            return text(
                "invalid_grant", "90080",
                "The provided grant has expired. Please re-authenticate and try again. Current time: \(now.epochSeconds), Grant issued time: \(issued.epochSeconds), Grant sliding window expiration time: \(expires.epochSeconds)."
            )
        case .secretMismatch:
            return text(
                "invalid_client", "90081",
                "The specified client_secret does not match the expected value for this client. Please correct the client_secret and try again.",
                .unauthorized)
        case .missingParameter(let name): return text("invalid_request", "90083", "The request is missing required parameter: \(name).")
        case .publicClientSentSecret:
            return text(
                "invalid_request", "90084", "Public clients should not send a client_secret when redeeming a publicly acquired grant.")
        case .internalError:
            return text(
                "server_error", "90085", "The service has encountered an internal error. Please reauthenticate and try again.",
                .internalServerError)
        case .grantTypeNotSupported(let type):
            return text("unsupported_grant_type", "90086", "The supplied grant_type [\(type)] is not supported.")
        case .grantNotForThisEndpoint(let actual, let expected):
            return text(
                "invalid_grant", "90088",
                "The provided grant has not been issued for this endpoint. Actual Value : \(actual) and Expected Value : \(expected)")
        case .malformedGrant: return text("invalid_grant", "90090", "The provided JWE is not a valid 5 segment token.")
        case .userCancelled: return text("access_denied", "90091", "The user has cancelled entering self-asserted information.")
        case .openIDRequiredForIDToken:
            return text(
                "invalid_request", "90110",
                "The scope parameter must include 'openid' when requesting a response_type that includes 'id_token'.")
        case .accountDisabled:
            return text("invalid_grant", "90111", "Your account has been locked. Contact your support person to unlock it, then try again.")
        case .passwordChangeRequired, .invalidCredentials:
            return text("invalid_grant", "90225", "The username or password provided in the request are invalid.")
        case .accountLocked:
            return text("invalid_grant", "90114", "Your account is temporarily locked to prevent unauthorized use. Try again later.")
        case .codeScopeRule:
            return text(
                "invalid_request", "90115",
                "When requesting the 'code' response_type, the scope parameter must include a resource or client ID for access tokens, and 'openid' for ID tokens. Additionally include 'offline_access' for refresh tokens."
            )
        case .tooManySecondFactorTries:
            return text("access_denied", "90151", "User has exceeded the maximum number for retries for multifactor authentication.")
        case .forgotPassword: return text("access_denied", "90118", "The user has forgotten their password.")
        case .invalidMaxAge(let value):
            return text(
                "invalid_request", "90120",
                "The max age parameter '\(value)' specified in the request is invalid. Max age must be an integer between 0 and 2147483647 inclusive."
            )
        case .accountGone:
            return text(
                "invalid_grant", "90128", "The account associated with this grant no longer exists. Please reauthenticate and try again.")
        case .grantRevoked:
            return text("invalid_grant", "90129", "The provided grant has been revoked. Please reauthenticate and try again.")
        case .insufficientPermissions:
            return text(
                "invalid_scope", "90205",
                "This application does not have sufficient permissions against this web resource to perform the operation.")
        case .scopeBeyondGrant(let scope):
            var text = ProtocolFailure.insufficientPermissions.b2c
            text.message += " The scope '\(scope)' was not part of the original grant of this refresh token."
            return text
        case .multipleResources(let scope):
            return text(
                "invalid_scope", "90146",
                "The scope '\(scope)' provided in request specifies more than one resource for an access token, which is not supported.")
        case .verifierMismatch:
            return text("invalid_grant", "90182", "The supplied code_verifier does not match associated code_challenge.")
        case .verifierInvalid: return text("invalid_grant", "90183", "The supplied code_verifier is invalid.")
        case .challengeMethodNotSupported(let method):
            return text(
                "invalid_request", "90184",
                "The supplied code_challenge_method '\(method)' is not supported. Supported values are plain or S256.")
        case .ropcNotEnabled: return text("unauthorized_client", "90224", "Resource owner flow has not been enabled for the application.")
        case .repeatedParameter(let name): return processing("The parameter '\(name)' was provided more than once.")
        case .malformedRequest(let detail): return processing(detail)
        case .connectorFailed(let failure):
            return text(
                "server_error", "90075",
                "The claims exchange '\(failure.connector)' specified in step '\(failure.step.rawValue)' returned HTTP error response with Code '\(failure.code)' and Reason '\(failure.reason)'."
            )
        case .extensionFailed: return text("server_error", "90075", "A custom authentication extension did not answer as its contract requires.")
        case .upstreamFailed(let message): return text("server_error", "90273", "An invalid response was received : '\(message)'")
        case .policyNotRunnable(let detail): return processing(detail, error: "server_error")
        case .policyError(let code, let message): return B2CErrorText(oauthError: "access_denied", code: "AAD_Custom_\(code)", message: message)
        case .restfulFailed(let profile, let step, let code, let reason):
            return text(
                "server_error", "90075",
                "The claims exchange '\(profile)' specified in step '\(step)' returned HTTP error response with Code '\(code)' and Reason '\(reason)'.")
        case .idTokenHintRefused(let expired):
            return expired
                ? text("invalid_request", "90208", "The provided id_token_hint parameter is expired. Please provide another token and try again.")
                : text(
                    "invalid_request", "90233", "The provided id_token_hint parameter failed signature validation. Please provide another token and try again.")
        case .consentDeclined: return entraOnly("access_denied")
        case .consentRequired: return entraOnly("consent_required")
        case .grantNotConsented: return entraOnly("invalid_grant")
        case .multiFactorRequired: return entraOnly("invalid_grant")
        case .invalidInstance: return entraOnly("invalid_instance")
        }
    }

    package var oauthError: String { b2c.oauthError }
    package var code: String { b2c.code }
    package var message: String { b2c.message }
    package var status: HTTPResponse.Status { b2c.status }

    /// B2C appends the `login_hint` to some descriptions (https://github.com/AzureAD/microsoft-authentication-library-for-dotnet/issues/1881).
    var loginHint: String? {
        if case .forgotPassword(let hint) = self { return hint }
        return nil
    }

    /// The error number the sign-in log records on B2C's face: the code's digits (`AADB2C90118`
    /// → 90118). A policy's own error (`AAD_Custom_<anything>`) is one fixed number: never 0,
    /// which the log reads as success, and not the policy's digits, which would make each code
    /// a metric label of its own.
    package var signInLogNumber: Int {
        if case .policyError = self { return Self.policyErrorLogNumber }
        return max(1, SignInEvent.number(ofCode: code))
    }
    package static let policyErrorLogNumber = 90_000

    /// `"<code>: <message>\r\nCorrelation ID: <guid>\r\nTimestamp: <yyyy-MM-dd HH:mm:ssZ>\r\n"`.
    package func errorDescription(correlationID: String, at date: Date) -> String {
        var text = "\(code): \(message)\r\nCorrelation ID: \(correlationID)\r\nTimestamp: \(B2CTimestamp.format(date))\r\n"
        if let loginHint { text += "login_hint: \(loginHint)\r\n" }
        return text
    }
}

package enum B2CTimestamp {
    package static func format(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02dZ", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0, c.minute ?? 0,
            c.second ?? 0)
    }
}
