import Foundation
import WireCoding

/// An error as the Microsoft identity platform reports it (SPEC §2.9): an OAuth `error`, an
/// `AADSTS` number and its message; ``ProtocolFailure/entra`` says which for each failure.
package struct EntraError: Sendable, Equatable {
    var oauthError: String
    package var code: Int
    package var message: String
    /// What the client should do about it (`basic_action`: ask the user interactively), which
    /// MSAL reads to turn an error into "interaction required".
    var suberror: String?

    /// `"AADSTS<code>: <message>\r\nTrace ID: …\r\nCorrelation ID: …\r\nTimestamp: …"`: Entra
    /// ends the description without a line break, unlike B2C.
    func errorDescription(traceID: String, correlationID: String, at date: Date) -> String {
        "AADSTS\(code): \(message)\r\nTrace ID: \(traceID)\r\nCorrelation ID: \(correlationID)\r\nTimestamp: \(B2CTimestamp.format(date))"
    }

    /// The fields Entra adds to its JSON errors and the redirect form: `error_uri` points at
    /// this service's own error page for the code.
    package func fields(origin: String, correlationID: String, at date: Date) -> [(String, JSONText)] {
        let traceID = UUID().uuidString.lowercased()
        return [
            ("error", .string(oauthError)),
            ("error_description", .string(errorDescription(traceID: traceID, correlationID: correlationID, at: date))),
            ("error_codes", .array([.int(Int64(code))])),
            ("timestamp", .string(B2CTimestamp.format(date))),
            ("trace_id", .string(traceID)),
            ("correlation_id", .string(correlationID)),
            ("error_uri", .string("\(origin)/error?code=\(code)")),
        ] + (suberror.map { [("suberror", .string($0))] } ?? [])
    }
}

extension ProtocolFailure {
    /// The Entra face's rendering: the `AADSTS` code Entra uses for the same condition (codes
    /// and messages from Microsoft's published AADSTS reference,
    /// learn.microsoft.com/entra/identity-platform/reference-error-codes). A condition Entra has
    /// no code of its own for says so here, case by case, and is reported as `AADSTS9002313`
    /// ("Invalid request") with B2C's message.
    package var entra: EntraError {
        func as_(_ number: Int, _ text: String, error: String? = nil, suberror: String? = nil) -> EntraError {
            EntraError(oauthError: error ?? b2c.oauthError, code: number, message: text, suberror: suberror)
        }
        let invalidRequest = { as_(9_002_313, "Invalid request. Request is malformed or invalid. \(b2c.message)") }
        switch self {
        case .redirectNotRegistered:
            return as_(
                50011,
                "The redirect URI specified in the request does not match the redirect URIs configured for the application. \(b2c.message)")
        case .noRedirectURIs: return as_(500113, "No reply address is registered for the application.")
        case .missingClientID: return as_(900144, "The request body must contain the following parameter: 'client_id'.")
        case .missingScope: return as_(900144, "The request body must contain the following parameter: 'scope'.")
        case .missingParameter(let name): return as_(900144, "The request body must contain the following parameter: \(name).")
        case .scopeNotSupported, .scopeNeedsResource, .codeScopeRule:
            return as_(
                70011,
                "The provided request must include a 'scope' input parameter. The provided value for the input parameter 'scope' is not valid. \(b2c.message)",
                error: "invalid_scope")
        case .responseTypeNotSupported:
            return as_(
                70005,
                "unsupported_response_type: The provided value for the input parameter 'response_type' is not allowed for this request. \(b2c.message)"
            )
        case .clientNotRegistered: return as_(700016, "Application with identifier was not found in the directory. \(b2c.message)")
        case .temporarilyUnavailable: return as_(90033, "A transient error has occurred. Please try again.")
        case .implicitNotAllowed: return as_(700054, "response_type 'id_token' or 'token' is not enabled for the application.")
        case .codeChallengeRequired: return as_(9_002_325, "Proof Key for Code Exchange is required for this application.")
        case .connectorFailed, .extensionFailed:
            // A failing custom authentication extension: Entra's answer to the app is generic
            // (learn.microsoft.com/entra/identity-platform/custom-extension-troubleshoot); the
            // connector and reason stay in the message for the developer.
            return as_(1_100_001, "Non-retryable error has occurred. \(b2c.message)")
        case .noSession: return as_(50058, "A silent sign-in request was sent but no user is signed in.", error: "login_required")
        case .secretRequired, .ropcNotEnabled:
            return as_(
                7_000_218, "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
                error: "invalid_client")
        case .grantExpired:
            return as_(
                70008,
                "The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource."
            )
        case .secretMismatch:
            return as_(
                7_000_215,
                "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID."
            )
        case .publicClientSentSecret:
            return as_(700025, "Client is public so neither 'client_assertion' nor 'client_secret' should be presented.")
        case .internalError: return as_(50000, "There was an error issuing a token or an issue with our sign-in service.")
        case .grantTypeNotSupported: return as_(70003, "The app requested an unsupported grant type. \(b2c.message)")
        case .grantNotForThisEndpoint, .malformedGrant, .grantRevoked:
            return as_(70000, "The request was denied because one or more grants are expired or invalid. \(b2c.message)")
        case .userCancelled, .consentDeclined: return as_(65004, "User declined to consent to access the app.", error: "access_denied")
        case .accountDisabled: return as_(50057, "The user account is disabled.")
        case .passwordChangeRequired: return as_(50055, "The password is expired. The user must change it before signing in.")
        case .accountLocked:
            return as_(
                50053, "The account is locked because the user tried to sign in too many times with an incorrect user ID or password.")
        case .accountGone: return as_(50034, "The user account does not exist in the directory.")
        case .multipleResources:
            return as_(
                28000, "Provided value for the input parameter scope is not valid because it contains more than one resource.",
                error: "invalid_scope")
        case .verifierMismatch, .verifierInvalid:
            return as_(501481, "The Code_Verifier does not match the code_challenge supplied in the authorization request.")
        case .insufficientPermissions, .scopeBeyondGrant:
            return as_(
                650057,
                "Invalid resource. The client has requested access to a resource which is not listed in the requested permissions in the client's application registration. \(b2c.message)"
            )
        case .invalidCredentials: return as_(50126, "Error validating credentials due to invalid username or password.")
        case .unknownTenant(let tenant): return as_(90002, "The tenant '\(tenant)' was not found.")
        case .consentRequired(let clientID, let name), .grantNotConsented(let clientID, let name):
            let error = if case .consentRequired = self { "consent_required" } else { "invalid_grant" }
            return as_(
                65001,
                "The user or administrator has not consented to use the application with ID '\(clientID)' named '\(name)'. Send an interactive authorization request for this user and resource.",
                error: error)
        case .multiFactorRequired:
            // MSAL turns the `basic_action` suberror into "interaction required".
            return as_(
                50076,
                "Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access this application.",
                error: "invalid_grant", suberror: "basic_action")
        case .invalidInstance: return as_(50049, "Unknown or invalid instance.", error: "invalid_instance")
        // No code of Entra's own for these.
        case .responseModeNotSupported, .missingPostLogoutRedirect, .unknownPolicy, .resourceNotFound, .invalidPrompt,
            .postLogoutRedirectInvalid, .openIDRequiredForIDToken, .tooManySecondFactorTries, .forgotPassword, .invalidMaxAge,
            .challengeMethodNotSupported, .repeatedParameter, .malformedRequest, .upstreamFailed, .policyNotRunnable, .restfulFailed,
            .policyError, .idTokenHintRefused:
            return invalidRequest()
        }
    }
}
