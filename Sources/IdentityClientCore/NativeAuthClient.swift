import Foundation
import Logging
import WireCoding

/// What a native-authentication app handles itself instead of sending the person to the
/// browser (External ID's `capabilities`).
public enum NativeAuthCapability: String, Sendable, CaseIterable {
    /// The second factor: a code the app asks for.
    case mfaRequired = "mfa_required"
    /// Registering the second factor's address on first use.
    case registrationRequired = "registration_required"
}

/// Why a native-authentication call failed, typed (External ID's errors and suberrors, SPEC
/// §2.15). A wrong code or password leaves the state it was submitted to usable: submit again.
public enum NativeAuthFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The one-time code is wrong or spent (`invalid_oob_value`).
    case invalidCode
    /// The password is wrong (AADSTS50126).
    case invalidPassword
    case userNotFound
    case userAlreadyExists
    /// The new password breaks the tenant's rules: `password_too_weak`, `password_too_short`, ….
    case passwordRejected(reason: String, message: String)
    /// These attributes were refused (`attribute_validation_failed`).
    case attributesInvalid([String])
    /// The API cannot go on: open the browser sign-in instead (`challenge_type: redirect`).
    case browserRequired(reason: String?)
    /// The flow took too long (`expired_token`), or its step was used already: start again.
    case flowExpired
    /// Too many codes were asked for lately.
    case tooManyCodes
    /// The app is not registered for native authentication (`nativeauthapi_disabled`).
    case notEnabled
    /// Any other answer: the OAuth error, its AADSTS number, the description.
    case server(error: String, code: Int?, description: String?, correlationID: String?)

    public var description: String {
        switch self {
        case .invalidCode: "the code is not valid"
        case .invalidPassword: "the user name or password is not valid"
        case .userNotFound: "no account has that user name"
        case .userAlreadyExists: "an account with that email address exists already"
        case .passwordRejected(_, let message): "the password was refused: \(message)"
        case .attributesInvalid(let names): "these details were refused: \(names.joined(separator: ", "))"
        case .browserRequired(let reason): "this sign-in needs the browser" + (reason.map { " (\($0))" } ?? "")
        case .flowExpired: "the sign-in took too long; start again"
        case .tooManyCodes: "too many codes were requested; try again later"
        case .notEnabled: "the app is not enabled for native authentication"
        case .server(let error, let code, let description, let correlationID):
            (description?.split(separator: "\r\n").first.map(String.init) ?? error + (code.map { " (AADSTS\($0))" } ?? ""))
                + (correlationID.map { " (correlation id \($0))" } ?? "")
        }
    }
}

/// External ID's native authentication (SPEC §2.15; MSAL's `MSALNativeAuthPublicClientApplication`):
/// sign-up, sign-in and password reset without a browser, each a chain of typed states the app
/// answers (a code, a password, attributes), ending signed in with the tokens stored in the same
/// cache as ``PublicClientApplication`` (whose silent calls then refresh them).
///
/// ```swift
/// let native = NativeAuthClient(configuration: configuration)
/// var state = try await native.signIn(username: "ada@example.com", password: "…", scopes: [])
/// while true {
///     switch state {
///     case .signedIn(let result): return result
///     case .codeRequired(let step): state = try await step.submit(code: readCode())
///     …
///     }
/// }
/// ```
public struct NativeAuthClient: Sendable {
    public let configuration: ClientConfiguration
    public let capabilities: Set<NativeAuthCapability>
    let broker: TokenBroker

    public init(configuration: ClientConfiguration, capabilities: Set<NativeAuthCapability> = Set(NativeAuthCapability.allCases)) {
        self.configuration = configuration
        self.capabilities = capabilities
        broker = TokenBroker(configuration: configuration, clientSecret: nil)
    }

    /// The tenant's URLs, without a user flow.
    var authority: Authority { configuration.authority.tenantOnly }

    var capabilityList: String { capabilities.map(\.rawValue).sorted().joined(separator: " ") }

    /// Starts a sign-in. With a `password` the account's password is checked; without one the
    /// account's method decides (a password to ask for, or a code mailed to it).
    public func signIn(username: String, password: String? = nil, scopes: [String]) async throws -> NativeAuthState {
        let started = try await call(
            "oauth2/v2.0/initiate", [("username", username), ("challenge_type", "password oob redirect"), ("capabilities", capabilityList)])
        let challenged = try await call(
            "oauth2/v2.0/challenge", [("continuation_token", try started.token()), ("challenge_type", "password oob redirect")])
        let flow = NativeFlow(client: self, username: username, scopes: scopes)
        switch challenged.string("challenge_type") {
        case "password":
            let step = PasswordRequired(flow: flow, token: try challenged.token(), purpose: .signIn)
            guard let password else { return .passwordRequired(step) }
            return try await step.submit(password: password)
        case "oob": return .codeRequired(CodeRequired(flow: flow, token: try challenged.token(), purpose: .signIn, sent: challenged.sent))
        default: throw NativeAuthFailure.browserRequired(reason: nil)
        }
    }

    /// Starts a sign-up. Without a `password` one is asked for (``NativeAuthState/passwordRequired(_:)``)
    /// once the address is proven.
    public func signUp(username: String, password: String? = nil, attributes: [String: String] = [:], scopes: [String]) async throws
        -> NativeAuthState
    {
        var fields = [
            ("username", username), ("challenge_type", "oob password redirect"),
            ("capabilities", capabilityList),
        ]
        if let password { fields.append(("password", password)) }
        if !attributes.isEmpty { fields.append(("attributes", Self.json(attributes))) }
        let started = try await call("signup/v1.0/start", fields)
        let challenged = try await call("signup/v1.0/challenge", [("continuation_token", try started.token()), ("challenge_type", "oob password redirect")])
        let flow = NativeFlow(client: self, username: username, scopes: scopes)
        return .codeRequired(CodeRequired(flow: flow, token: try challenged.token(), purpose: .signUp, sent: challenged.sent))
    }

    /// Starts a password reset: a code is mailed to the account.
    public func resetPassword(username: String, scopes: [String]) async throws -> NativeAuthState {
        let started = try await call(
            "resetpassword/v1.0/start", [("username", username), ("challenge_type", "oob redirect"), ("capabilities", capabilityList)])
        let challenged = try await call("resetpassword/v1.0/challenge", [("continuation_token", try started.token()), ("challenge_type", "oob redirect")])
        let flow = NativeFlow(client: self, username: username, scopes: scopes)
        return .codeRequired(CodeRequired(flow: flow, token: try challenged.token(), purpose: .passwordReset, sent: challenged.sent))
    }

    static func json(_ attributes: [String: String]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(attributes)) ?? Data("{}".utf8), as: UTF8.self)
    }

    // MARK: The wire

    /// One POST to a native-authentication endpoint: its JSON on success. A `redirect` answer
    /// is ``NativeAuthFailure/browserRequired(reason:)``; an error the flow can go on from
    /// (`credential_required`, `attributes_required`, `mfa_required`, `registration_required`)
    /// is returned as ``NativeAnswer/continuing``; any other error is thrown, typed.
    func call(_ endpoint: String, _ fields: [(String, String)]) async throws -> NativeAnswer {
        guard case .b2c(let tenant, _) = authority.kind, let url = URL(string: "\(authority.origin)/\(tenant)/\(endpoint)") else {
            throw IdentityError.invalidConfiguration("native authentication needs a tenant authority, not \(configuration.authority.url)")
        }
        let correlationID = UUID().uuidString.lowercased()
        var form = [("client_id", configuration.clientID)] + fields
        if endpoint == "oauth2/v2.0/token" { form.append(("client_info", "1")) }
        let request = TransportRequest.form(url, form, headers: ["Accept": "application/json", "client-request-id": correlationID])
        configuration.logger.debug("native authentication", metadata: ["endpoint": "\(endpoint)", "correlation_id": "\(correlationID)"])
        let response = try await configuration.transport.send(request)
        let body = (try? JSONDecoder().decode([String: JSONValue].self, from: response.body)) ?? [:]
        let answer = NativeAnswer(body: body, response: response, correlationID: correlationID)
        if (200..<300).contains(response.status) {
            if answer.string("challenge_type") == "redirect" { throw NativeAuthFailure.browserRequired(reason: answer.string("redirect_reason")) }
            return answer
        }
        let error = answer.string("error") ?? "HTTP \(response.status)"
        let suberror = answer.string("suberror")
        if ["credential_required", "attributes_required"].contains(error) || ["mfa_required", "registration_required"].contains(suberror ?? "") {
            return answer.continuing(suberror ?? error)
        }
        // Details refused after the step that proved the code or password: the flow went on
        // (a new token), so the answer is a new state that asks for them again, not a failure
        // of the state that was answered.
        let sent = fields.first { $0.0 == "continuation_token" }?.1
        if suberror == "attribute_validation_failed", let next = answer.string("continuation_token"), next != sent {
            return answer.continuing("attribute_validation_failed")
        }
        throw Self.failure(answer, error: error, suberror: suberror)
    }

    static func failure(_ answer: NativeAnswer, error: String, suberror: String?) -> NativeAuthFailure {
        let code = answer.code
        switch (error, suberror) {
        case (_, "invalid_oob_value"?): return .invalidCode
        case ("invalid_grant", _) where code == 50_126: return .invalidPassword
        case ("user_not_found", _): return .userNotFound
        case ("user_already_exists", _): return .userAlreadyExists
        case (_, let reason?) where reason.hasPrefix("password_"):
            return .passwordRejected(reason: reason, message: answer.description ?? reason)
        case (_, "attribute_validation_failed"?): return .attributesInvalid(answer.names("invalid_attributes"))
        case ("expired_token", _): return .flowExpired
        case ("invalid_request", _) where code == 55_200: return .flowExpired
        case (_, "nativeauthapi_disabled"?): return .notEnabled
        case _ where code == 90_055: return .tooManyCodes
        default:
            return .server(error: error, code: code, description: answer.description, correlationID: answer.string("correlation_id"))
        }
    }

    /// The token request that ends a flow; the tokens stored, the account current.
    func tokens(_ fields: [(String, String)], flow: NativeFlow) async throws -> NativeAuthState {
        let answer = try await call("oauth2/v2.0/token", fields + [("scope", Scopes.request(flow.scopes))])
        switch answer.continuation {
        case "mfa_required"?: return .secondFactorRequired(SecondFactorRequired(flow: flow, token: try answer.token()))
        case "registration_required"?: return .registrationRequired(RegistrationRequired(flow: flow, token: try answer.token()))
        case let other?: throw NativeAuthFailure.server(error: other, code: answer.code, description: answer.description, correlationID: nil)
        case nil: break
        }
        let configuration = try await broker.configuration(authority)
        let result = try await broker.accept(
            answer.response, authority: authority, configuration: configuration, scopes: flow.scopes, nonce: nil,
            correlationID: answer.correlationID, makeCurrent: true)
        return .signedIn(result)
    }
}

/// One answer of the API, read leniently.
struct NativeAnswer: Sendable {
    var body: [String: JSONValue]
    var response: TransportResponse
    var correlationID: String
    /// The error the flow goes on from, when it is one.
    var continuation: String?

    func string(_ name: String) -> String? {
        if case .string(let value)? = body[name] { return value }
        return nil
    }

    func token() throws -> String {
        guard let token = string("continuation_token"), !token.isEmpty else {
            throw NativeAuthFailure.server(error: "continuation_token_missing", code: nil, description: nil, correlationID: correlationID)
        }
        return token
    }

    var code: Int? {
        if case .array(let codes)? = body["error_codes"], case .number(let first)? = codes.first { return Int(first) }
        return nil
    }

    /// The description's first line, without its `AADSTSnnnn: ` prefix (the number is ``code``).
    var description: String? {
        guard let line = string("error_description")?.split(separator: "\r\n").first.map(String.init) else { return nil }
        guard line.hasPrefix("AADSTS"), let colon = line.range(of: ": ") else { return line }
        return String(line[colon.upperBound...])
    }

    /// The `name`s of a list of objects (`invalid_attributes`, `required_attributes`).
    func names(_ list: String) -> [String] {
        guard case .array(let items)? = body[list] else { return [] }
        return items.compactMap { item in
            if case .object(let fields) = item, case .string(let name)? = fields["name"] { return name }
            return nil
        }
    }

    /// Where the code went (masked), from a challenge answer.
    var sent: CodeRequired.Delivery {
        var length: Int?
        if case .number(let number)? = body["code_length"] { length = Int(number) }
        return CodeRequired.Delivery(to: string("challenge_target_label") ?? string("challenge_target"), channel: string("challenge_channel"), codeLength: length)
    }

    func continuing(_ reason: String) -> NativeAnswer {
        var copy = self
        copy.continuation = reason
        return copy
    }
}
