import Foundation

/// Everything the SDK throws. Server errors keep B2C's `AADB2C` code and the correlation id, so
/// a support request can quote both.
public enum IdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No usable refresh token (none cached, expired, revoked, or issued for another user flow):
    /// the user has to sign in interactively.
    case interactionRequired(reason: String, code: String?, correlationID: String?)
    /// The user closed the browser or pressed Cancel (`access_denied` + AADB2C90091).
    case userCanceled
    /// The user clicked "Forgot your password?" (`access_denied` + AADB2C90118): run the
    /// password-reset flow, then sign in again.
    case passwordResetRequested
    /// The authorization server answered with an OAuth error.
    case server(error: String, description: String?, code: String?, correlationID: String?)
    /// The server could not be reached, or answered with something that is not OAuth.
    case network(String)
    /// The configuration (authority, client id, redirect URI) cannot work.
    case invalidConfiguration(String)
    /// The redirect carried another `state` than the request (a forged or stale response).
    case stateMismatch
    /// The ID token's `nonce` is not the one sent (a replayed token).
    case nonceMismatch
    /// The ID token failed a check (issuer, audience, expiry).
    case invalidIDToken(String)
    /// No account with that id is cached.
    case accountNotFound(String)
    /// The interactive sign-in did not finish in time.
    case timedOut
    /// The token cache could not be read or written.
    case storage(String)

    public var description: String {
        switch self {
        case .interactionRequired(let reason, let code, _):
            "please sign in again (\(code.map { reason.hasPrefix($0) ? "" : "\($0): " } ?? "")\(reason))"
        case .userCanceled: "sign-in cancelled"
        case .passwordResetRequested: "the user asked to reset the password"
        case .server(let error, let description, _, let correlationID):
            (Self.firstLine(description) ?? error) + (correlationID.map { " (correlation id \($0))" } ?? "")
        case .network(let message): "cannot reach the identity service: \(message)"
        case .invalidConfiguration(let message): "invalid configuration: \(message)"
        case .stateMismatch: "the sign-in response does not belong to this request (state mismatch)"
        case .nonceMismatch: "the ID token does not belong to this sign-in (nonce mismatch)"
        case .invalidIDToken(let reason): "the ID token was refused: \(reason)"
        case .accountNotFound(let id): "no signed-in account '\(id)'"
        case .timedOut: "the sign-in timed out"
        case .storage(let message): "the token cache failed: \(message)"
        }
    }

    /// The AADB2C code, when the server sent one.
    public var b2cCode: String? {
        switch self {
        case .interactionRequired(_, let code, _), .server(_, _, let code, _): code
        case .userCanceled: "AADB2C90091"
        case .passwordResetRequested: "AADB2C90118"
        default: nil
        }
    }

    static func firstLine(_ text: String?) -> String? {
        text?.split(whereSeparator: \.isNewline).first.map(String.init)
    }

    /// An OAuth error (`error`, `error_description`) as B2C words it:
    /// `"AADB2C90118: The user has forgotten their password.\r\nCorrelation ID: …\r\nTimestamp: …"`
    /// (https://learn.microsoft.com/azure/active-directory-b2c/openid-connect#send-authentication-requests). `invalid_grant` means the refresh token cannot be used.
    static func fromOAuth(error: String, description: String?, correlationID: String? = nil) -> IdentityError {
        let code = description.flatMap(b2cCode(in:))
        let correlation = description.flatMap(correlationID(in:)) ?? correlationID
        if error == "access_denied" && code == "AADB2C90091" { return .userCanceled }
        if error == "access_denied" && code == "AADB2C90118" { return .passwordResetRequested }
        if error == "invalid_grant" || error == "interaction_required" || error == "login_required" {
            return .interactionRequired(reason: firstLine(description) ?? error, code: code, correlationID: correlation)
        }
        return .server(error: error, description: description, code: code, correlationID: correlation)
    }

    static func b2cCode(in text: String) -> String? {
        guard let range = text.range(of: #"AADB2C\d{5}"#, options: .regularExpression) else { return nil }
        return String(text[range])
    }

    static func correlationID(in text: String) -> String? {
        guard let range = text.range(of: #"Correlation ID: [0-9a-fA-F-]{36}"#, options: .regularExpression) else { return nil }
        return String(text[range].dropFirst("Correlation ID: ".count))
    }
}
