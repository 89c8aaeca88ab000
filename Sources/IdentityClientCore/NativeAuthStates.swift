import Foundation

/// Where a native-authentication flow stands: what the app must ask the person for next, or
/// the end. Each state answers its own question and returns the next state; a wrong answer
/// throws and leaves the state usable.
public enum NativeAuthState: Sendable {
    /// A code was mailed: ask for it (sign-in, sign-up, reset, the second factor, registration).
    case codeRequired(CodeRequired)
    /// Ask for the password (sign-in), or choose one (sign-up).
    case passwordRequired(PasswordRequired)
    /// The sign-up needs these details.
    case attributesRequired(AttributesRequired)
    /// A password reset's code was right: ask for the new password.
    case newPasswordRequired(PasswordRequired)
    /// The sign-in needs its second factor: pick a method to send a code to.
    case secondFactorRequired(SecondFactorRequired)
    /// The second factor's address must be registered first.
    case registrationRequired(RegistrationRequired)
    /// Signed in; the tokens are stored.
    case signedIn(AuthenticationResult)
}

/// What the flows share: the client, the account's name and the scopes the sign-in ends with.
struct NativeFlow: Sendable {
    let client: NativeAuthClient
    let username: String
    let scopes: [String]

    /// Signs in with the continuation token a sign-up, reset or registration ended with.
    func signIn(_ token: String) async throws -> NativeAuthState {
        try await client.tokens([("continuation_token", token), ("grant_type", "continuation_token"), ("username", username)], flow: self)
    }
}

/// A code was sent; ``submit(code:)`` proves it, ``resendCode()`` sends another.
public struct CodeRequired: Sendable {
    enum Purpose: Sendable { case signIn, signUp, passwordReset, secondFactor, registration }

    public struct Delivery: Sendable, Equatable {
        /// Where the code went, masked as the service shows it.
        public var to: String?
        public var channel: String?
        public var codeLength: Int?
    }

    let flow: NativeFlow
    let token: String
    let purpose: Purpose
    public let sent: Delivery

    init(flow: NativeFlow, token: String, purpose: Purpose, sent: Delivery) {
        self.flow = flow
        self.token = token
        self.purpose = purpose
        self.sent = sent
    }

    public func submit(code: String) async throws -> NativeAuthState {
        let client = flow.client
        switch purpose {
        case .signIn:
            return try await client.tokens([("continuation_token", token), ("grant_type", "oob"), ("oob", code)], flow: flow)
        case .secondFactor:
            return try await client.tokens([("continuation_token", token), ("grant_type", "mfa_oob"), ("oob", code)], flow: flow)
        case .signUp:
            return try await SignUpProgress.next(
                try await client.call("signup/v1.0/continue", [("continuation_token", token), ("grant_type", "oob"), ("oob", code)]), flow: flow)
        case .passwordReset:
            let answer = try await client.call("resetpassword/v1.0/continue", [("continuation_token", token), ("grant_type", "oob"), ("oob", code)])
            return .newPasswordRequired(PasswordRequired(flow: flow, token: try answer.token(), purpose: .passwordReset))
        case .registration:
            let answer = try await client.call("register/v1.0/continue", [("continuation_token", token), ("grant_type", "oob"), ("oob", code)])
            return try await flow.signIn(try answer.token())
        }
    }

    /// Sends a new code (the one before it stops working).
    public func resendCode() async throws -> CodeRequired {
        let endpoint: String
        var fields = [("continuation_token", token), ("challenge_type", "oob redirect")]
        switch purpose {
        case .signIn: endpoint = "oauth2/v2.0/challenge"
        case .signUp: endpoint = "signup/v1.0/challenge"
        case .passwordReset: endpoint = "resetpassword/v1.0/challenge"
        case .secondFactor, .registration:
            // A second factor's code is re-sent by choosing the method again.
            throw NativeAuthFailure.server(error: "resend_not_offered", code: nil, description: "Choose the method again to get a new code.", correlationID: nil)
        }
        if purpose == .signIn { fields[1].1 = "oob password redirect" }
        let answer = try await flow.client.call(endpoint, fields)
        return CodeRequired(flow: flow, token: try answer.token(), purpose: purpose, sent: answer.sent)
    }
}

/// A password to give: the account's (sign-in), a new one (sign-up, reset).
public struct PasswordRequired: Sendable {
    enum Purpose: Sendable { case signIn, signUp, passwordReset }
    let flow: NativeFlow
    let token: String
    let purpose: Purpose

    public func submit(password: String) async throws -> NativeAuthState {
        let client = flow.client
        switch purpose {
        case .signIn:
            return try await client.tokens([("continuation_token", token), ("grant_type", "password"), ("password", password)], flow: flow)
        case .signUp:
            return try await SignUpProgress.next(
                try await client.call("signup/v1.0/continue", [("continuation_token", token), ("grant_type", "password"), ("password", password)]),
                flow: flow)
        case .passwordReset:
            let submitted = try await client.call("resetpassword/v1.0/submit", [("continuation_token", token), ("new_password", password)])
            var pollToken = try submitted.token()
            var interval: Double = 1
            if case .number(let seconds)? = submitted.body["poll_interval"] { interval = min(max(seconds, 0.2), 10) }
            // The reference's poll: until `succeeded` (or `failed`), a bounded number of times.
            for _ in 0..<30 {
                let polled = try await client.call("resetpassword/v1.0/poll_completion", [("continuation_token", pollToken)])
                switch polled.string("status") {
                case "succeeded": return try await flow.signIn(try polled.token())
                case "failed":
                    throw NativeAuthFailure.server(error: "password_reset_failed", code: nil, description: "The new password was not set.", correlationID: nil)
                default:
                    pollToken = (try? polled.token()) ?? pollToken
                    try await Task.sleep(for: .seconds(interval))
                }
            }
            throw NativeAuthFailure.flowExpired
        }
    }
}

/// The details a sign-up still needs.
public struct AttributesRequired: Sendable {
    public struct Attribute: Sendable, Equatable {
        public var name: String
        public var type: String
        public var required: Bool
    }

    let flow: NativeFlow
    let token: String
    public let attributes: [Attribute]

    /// `values` by attribute name (`displayName`, `extension_…`).
    public func submit(_ values: [String: String]) async throws -> NativeAuthState {
        try await SignUpProgress.next(
            try await flow.client.call(
                "signup/v1.0/continue", [("continuation_token", token), ("grant_type", "attributes"), ("attributes", NativeAuthClient.json(values))]),
            flow: flow)
    }
}

/// The second factor's methods; ``sendCode(to:)`` mails a code by one of them.
public struct SecondFactorRequired: Sendable {
    public struct Method: Sendable, Equatable {
        public var id: String
        public var channel: String
        /// The address, masked.
        public var hint: String?
    }

    let flow: NativeFlow
    let token: String

    /// The account's methods (`introspect`), each with a code-sending step.
    public func methods() async throws -> (methods: [Method], send: @Sendable (Method) async throws -> CodeRequired) {
        let flow = self.flow
        let answer = try await flow.client.call("oauth2/v2.0/introspect", [("continuation_token", token)])
        let next = try answer.token()
        var methods: [Method] = []
        if case .array(let items)? = answer.body["methods"] {
            for case .object(let item) in items {
                guard case .string(let id)? = item["id"] else { continue }
                var channel = "email"
                if case .string(let value)? = item["challenge_channel"] { channel = value }
                var hint: String?
                if case .string(let value)? = item["login_hint"] { hint = value }
                methods.append(Method(id: id, channel: channel, hint: hint))
            }
        }
        return (methods, { method in
            let sent = try await flow.client.call(
                "oauth2/v2.0/challenge", [("continuation_token", next), ("id", method.id), ("challenge_type", "oob redirect")])
            return CodeRequired(flow: flow, token: try sent.token(), purpose: .secondFactor, sent: sent.sent)
        })
    }
}

/// The second factor's address to register (this service registers the account's own).
public struct RegistrationRequired: Sendable {
    let flow: NativeFlow
    let token: String

    /// Mails a code to `address` to register it.
    public func register(email address: String) async throws -> CodeRequired {
        let introspected = try await flow.client.call("register/v1.0/introspect", [("continuation_token", token)])
        let sent = try await flow.client.call(
            "register/v1.0/challenge",
            [("continuation_token", try introspected.token()), ("challenge_type", "oob"), ("challenge_target", address), ("challenge_channel", "email")])
        return CodeRequired(flow: flow, token: try sent.token(), purpose: .registration, sent: sent.sent)
    }
}

/// A sign-up's `continue` answers: the next thing it needs, or done (then signed in).
enum SignUpProgress {
    static func next(_ answer: NativeAnswer, flow: NativeFlow) async throws -> NativeAuthState {
        switch answer.continuation {
        case "credential_required"?:
            let challenged = try await flow.client.call(
                "signup/v1.0/challenge", [("continuation_token", try answer.token()), ("challenge_type", "oob password redirect")])
            return .passwordRequired(PasswordRequired(flow: flow, token: try challenged.token(), purpose: .signUp))
        case "attribute_validation_failed"?:
            let refused = answer.names("invalid_attributes").map { AttributesRequired.Attribute(name: $0, type: "string", required: true) }
            return .attributesRequired(AttributesRequired(flow: flow, token: try answer.token(), attributes: refused))
        case "attributes_required"?:
            var attributes: [AttributesRequired.Attribute] = []
            if case .array(let items)? = answer.body["required_attributes"] {
                for case .object(let item) in items {
                    guard case .string(let name)? = item["name"] else { continue }
                    var type = "string"
                    if case .string(let value)? = item["type"] { type = value }
                    var required = false
                    if case .bool(let value)? = item["required"] { required = value }
                    attributes.append(.init(name: name, type: type, required: required))
                }
            }
            return .attributesRequired(AttributesRequired(flow: flow, token: try answer.token(), attributes: attributes))
        default:
            return try await flow.signIn(try answer.token())
        }
    }
}
