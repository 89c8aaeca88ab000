import Foundation
import IdentityDirectory
import Hummingbird
import UserJourneys
import WireCoding

/// An error of External ID's native authentication API (SPEC §2.15): Entra's JSON error with its
/// `AADSTS` number, a `suberror` where Microsoft defines one, and what the client needs to go
/// on (a `continuation_token`, the attributes still required or refused). Status 400, as every
/// error in Microsoft's native-authentication API reference; throttling is 429, which the
/// reference's register challenge names. Numbers the reference shows are used as shown; for the
/// few it does not (noted at each), Entra's own number for the condition.
struct NativeAuthError: Error {
    var error: String
    var code: Int
    var message: String
    var suberror: String?
    var status: HTTPResponse.Status = .badRequest
    /// Members after the standard ones: `continuation_token`, `required_attributes`, ….
    var extra: [(String, JSONText)] = []

    init(error: String, code: Int, message: String, suberror: String? = nil) {
        self.error = error
        self.code = code
        self.message = message
        self.suberror = suberror
    }

    /// This error carrying the flow's next continuation token.
    func continuing(_ token: String) -> NativeAuthError {
        var copy = self
        copy.extra.insert(("continuation_token", .string(token)), at: 0)
        return copy
    }

    func with(_ name: String, _ value: JSONText) -> NativeAuthError {
        var copy = self
        copy.extra.append((name, value))
        return copy
    }

    static let missingRedirect = NativeAuthError(
        error: "invalid_request", code: 901_007, message: "The challenge_type list parameter does not include the 'redirect' type.")
    static let invalidUsername = NativeAuthError(error: "invalid_request", code: 90_100, message: "The username parameter is empty or not valid.")
    static let invalidToken = NativeAuthError(error: "invalid_request", code: 55_200, message: "The continuation_token is invalid.")
    static let expiredToken = NativeAuthError(error: "expired_token", code: 552_003, message: "The continuation_token has expired.")
    static let userNotFound = NativeAuthError(error: "user_not_found", code: 50_034, message: "The user account does not exist in the directory.")
    static let wrongPassword = NativeAuthError(error: "invalid_grant", code: 50_126, message: "Error validating credentials due to invalid username or password.")
    static let locked = NativeAuthError(error: "invalid_grant", code: 50_053, message: "The account is locked: too many sign-in attempts.")
    static let disabled = NativeAuthError(error: "invalid_grant", code: 50_057, message: "The user account is disabled.")
    static let disabledForApp = NativeAuthError(
        error: "invalid_client", code: 500_208, message: "The native authentication API is not enabled for this app.", suberror: "nativeauthapi_disabled")
    /// A wrong, expired or spent one-time code (the reference's email-OTP page: 50181).
    static let invalidCode = NativeAuthError(error: "invalid_grant", code: 50_181, message: "Unable to validate the otp.", suberror: "invalid_oob_value")
    static let userAlreadyExists = NativeAuthError(
        error: "user_already_exists", code: 1_003_037, message: "It looks like you may already have an account with this email address.")
    static let credentialRequired = NativeAuthError(error: "credential_required", code: 55_103, message: "Credential required: a password must be set.")
    static let attributesRequired = NativeAuthError(error: "attributes_required", code: 55_106, message: "User attributes required.")
    /// The reference shows no number; 55_107 follows its attribute errors' numbering.
    static let attributeValidationFailed = NativeAuthError(
        error: "invalid_grant", code: 55_107, message: "One or more attributes are not valid.", suberror: "attribute_validation_failed")
    /// Entra's 50076 ("strong authentication is required"); the reference shows no number.
    static let secondFactorRequired = NativeAuthError(
        error: "invalid_grant", code: 50_076, message: "Due to a configuration change or a new location, you must use multi-factor authentication.",
        suberror: "mfa_required")
    /// Entra's 50079 (the user must register for multi-factor authentication).
    static let registrationRequired = NativeAuthError(
        error: "invalid_grant", code: 50_079, message: "The user is required to register a strong authentication method.",
        suberror: "registration_required")
    /// A reset for an account that has no password (one from a provider, or passwordless).
    static let noPassword = NativeAuthError(error: "invalid_request", code: 500_222, message: "The user does not have a password.")
    /// Entra's 90055 (too many requests), as 429: the address was sent its share of codes.
    /// Too many new flows from one address within the hour (the hosted pages' limit).
    static var tooManyFlows: NativeAuthError {
        var error = NativeAuthError(error: "invalid_request", code: 90_055, message: "Too many requests from this address. Try again later.")
        error.status = .tooManyRequests
        return error
    }

    static var tooManyCodes: NativeAuthError {
        var error = NativeAuthError(error: "invalid_request", code: 90_055, message: "Too many one-time codes were requested. Try again later.")
        error.status = .tooManyRequests
        return error
    }
    static func password(_ suberror: String, _ message: String) -> NativeAuthError {
        // 399246 is the reference's number for a weak password; the others share it.
        NativeAuthError(error: "invalid_grant", code: 399_246, message: message, suberror: suberror)
    }
    static func unknownClient(_ id: String) -> NativeAuthError {
        NativeAuthError(error: "unauthorized_client", code: 700_016, message: "Application with identifier '\(id.prefix(64))' was not found in the directory.")
    }
    static func missing(_ name: String) -> NativeAuthError {
        NativeAuthError(error: "invalid_request", code: 900_144, message: "The request body must contain the following parameter: '\(name)'.")
    }
    static func unsupportedGrant(_ grant: String) -> NativeAuthError {
        NativeAuthError(error: "unsupported_grant_type", code: 70_003, message: "The app requested an unsupported grant type '\(grant.prefix(40))'.")
    }

    /// What `/dev/faults` arms on a native-authentication endpoint (`{"endpoint", "error"}`), by
    /// the name the reference gives each (the suberror where there is one); `redirect` is the
    /// browser answer. Errors that carry the flow's next token are not armed: a made-up token
    /// would only fail the call after.
    static var faults: [String: NativeAuthError] {
        var catalog: [String: NativeAuthError] = [
            "user_already_exists": .userAlreadyExists, "user_not_found": .userNotFound, "expired_token": .expiredToken,
            "invalid_oob_value": .invalidCode, "invalid_password": .wrongPassword, "nativeauthapi_disabled": .disabledForApp,
            "unsupported_challenge_type": .missingRedirect, "invalid_continuation_token": .invalidToken, "too_many_codes": .tooManyCodes,
            "user_has_no_password": .noPassword, "account_locked": .locked,
            "server_error": NativeAuthError(error: "server_error", code: 90_033, message: "A transient error has occurred. Please try again."),
        ]
        for suberror in ["password_too_weak", "password_too_short", "password_too_long", "password_recently_used", "password_banned", "password_is_invalid"] {
            catalog[suberror] = .password(suberror, "The new password does not meet the tenant's rules (\(suberror)).")
        }
        return catalog
    }

    static let faultNames: [String] = (Array(faults.keys) + ["redirect"]).sorted()

    func response(correlationID: String, at date: Date) -> Response {
        let traceID = UUID().uuidString.lowercased()
        let stamp = B2CTimestamp.format(date)
        var members: [(String, JSONText)] = [
            ("error", .string(error)),
            ("error_description", .string("AADSTS\(code): \(message)\r\nTrace ID: \(traceID)\r\nCorrelation ID: \(correlationID)\r\nTimestamp: \(stamp)")),
            ("error_codes", .array([.int(Int64(code))])), ("timestamp", .string(stamp)), ("trace_id", .string(traceID)),
            ("correlation_id", .string(correlationID)),
        ]
        if let suberror { members.append(("suberror", .string(suberror))) }
        members += extra
        return .json(.object(members), status: status, noStore: true)
    }
}
