import Foundation
import WireCoding

/// An error as the Microsoft identity platform reports it (SPEC §2.9): an OAuth `error`, an
/// `AADSTS` number and its message. The service throws ``B2CError`` everywhere; on the Entra
/// face each is reported under the `AADSTS` code Entra uses for the same condition (codes and
/// messages from Microsoft's published AADSTS reference,
/// learn.microsoft.com/entra/identity-platform/reference-error-codes). A condition Entra has no
/// code of its own for is reported as `AADSTS9002313` ("Invalid request"), its message kept.
struct EntraError: Sendable, Equatable {
    var oauthError: String
    var code: Int
    var message: String
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
    func fields(origin: String, correlationID: String, at date: Date) -> [(String, JSONText)] {
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

extension B2CError {
    /// This error on the Entra face.
    var entra: EntraError {
        if let entraCode {
            return EntraError(oauthError: oauthError, code: entraCode, message: entraMessage ?? message, suberror: entraSuberror)
        }
        func as_(_ number: Int, _ text: String, error: String? = nil) -> EntraError {
            EntraError(oauthError: error ?? oauthError, code: number, message: text)
        }
        switch code {
        case "AADB2C90006":
            return as_(
                50011,
                "The redirect URI specified in the request does not match the redirect URIs configured for the application. \(message)")
        case "AADB2C90007": return as_(500113, "No reply address is registered for the application.")
        case "AADB2C90008": return as_(900144, "The request body must contain the following parameter: 'client_id'.")
        case "AADB2C90010": return as_(900144, "The request body must contain the following parameter: 'scope'.")
        case "AADB2C90083":
            return as_(
                900144,
                message.replacingOccurrences(
                    of: "The request is missing required parameter: ", with: "The request body must contain the following parameter: "))
        case "AADB2C90012", "AADB2C90055", "AADB2C90115":
            return as_(
                70011,
                "The provided request must include a 'scope' input parameter. The provided value for the input parameter 'scope' is not valid. \(message)",
                error: "invalid_scope")
        case "AADB2C90013":
            return as_(
                70005,
                "unsupported_response_type: The provided value for the input parameter 'response_type' is not allowed for this request. \(message)"
            )
        case "AADB2C90018":
            return as_(700016, "Application with identifier was not found in the directory. \(message)")
        case "AADB2C90035": return as_(90033, "A transient error has occurred. Please try again.")
        case "AADB2C90057": return as_(700054, "response_type 'id_token' or 'token' is not enabled for the application.")
        case "AADB2C99059": return as_(9_002_325, "Proof Key for Code Exchange is required for this application.")
        case "AADB2C90075":
            // A failing custom authentication extension: Entra's answer to the app is generic
            // (learn.microsoft.com/entra/identity-platform/custom-extension-troubleshoot); the
            // connector and reason stay in the message for the developer.
            return as_(1_100_001, "Non-retryable error has occurred. \(message)")
        case "AADB2C90077":
            return as_(50058, "A silent sign-in request was sent but no user is signed in.", error: "login_required")
        case "AADB2C90079":
            return as_(
                7_000_218, "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
                error: "invalid_client")
        case "AADB2C90080":
            return as_(
                70008,
                "The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource."
            )
        case "AADB2C90081":
            return as_(
                7_000_215,
                "Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID."
            )
        case "AADB2C90084":
            return as_(700025, "Client is public so neither 'client_assertion' nor 'client_secret' should be presented.")
        case "AADB2C90085": return as_(50000, "There was an error issuing a token or an issue with our sign-in service.")
        case "AADB2C90086": return as_(70003, "The app requested an unsupported grant type. \(message)")
        case "AADB2C90088", "AADB2C90090", "AADB2C90129":
            return as_(70000, "The request was denied because one or more grants are expired or invalid. \(message)")
        case "AADB2C90091": return as_(65004, "User declined to consent to access the app.")
        case "AADB2C90114":
            return as_(
                50053, "The account is locked because the user tried to sign in too many times with an incorrect user ID or password.")
        case "AADB2C90128": return as_(50034, "The user account does not exist in the directory.")
        case "AADB2C90146":
            return as_(
                28000, "Provided value for the input parameter scope is not valid because it contains more than one resource.",
                error: "invalid_scope")
        case "AADB2C90182", "AADB2C90183":
            return as_(501481, "The Code_Verifier does not match the code_challenge supplied in the authorization request.")
        case "AADB2C90205":
            return as_(
                650057,
                "Invalid resource. The client has requested access to a resource which is not listed in the requested permissions in the client's application registration. \(message)"
            )
        case "AADB2C90224":
            return as_(
                7_000_218, "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
                error: "invalid_client")
        case "AADB2C90225": return as_(50126, "Error validating credentials due to invalid username or password.")
        default:
            if message.hasPrefix("An error occurred while processing the request. The tenant ") {
                return as_(90002, message.replacingOccurrences(of: "An error occurred while processing the request. ", with: ""))
            }
            return as_(9_002_313, "Invalid request. Request is malformed or invalid. \(message)")
        }
    }

    // Conditions only the Entra face has.

    /// Consent was refused on the consent page (SPEC §2.9).
    static let consentDeclined = B2CError.entraOnly("access_denied", 65004, "User declined to consent to access the app.")

    /// `prompt=none` for scopes the user has not consented to.
    static func consentRequired(clientID: String, name: String) -> B2CError {
        .entraOnly(
            "consent_required", 65001,
            "The user or administrator has not consented to use the application with ID '\(clientID)' named '\(name)'. Send an interactive authorization request for this user and resource."
        )
    }

    /// A password grant where the flow requires a second factor, which the grant cannot ask for:
    /// Entra's AADSTS50076 with the suberror MSAL turns into "interaction required".
    static let multiFactorRequired: B2CError = {
        var error = B2CError.entraOnly(
            "invalid_grant", 50076,
            "Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access this application."
        )
        error.entraSuberror = "basic_action"
        return error
    }()

    /// Instance discovery for a host this service does not answer for.
    static let invalidInstance = B2CError.entraOnly("invalid_instance", 50049, "Unknown or invalid instance.")

    static func entraOnly(_ error: String, _ number: Int, _ text: String) -> B2CError {
        var value = B2CError(error, "AADSTS\(number)", text)
        value.entraCode = number
        return value
    }
}
