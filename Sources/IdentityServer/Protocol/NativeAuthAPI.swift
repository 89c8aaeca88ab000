import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import UserJourneys
import WireCoding

/// What every native-authentication endpoint shares (SPEC §2.15; Microsoft's native-authentication
/// API reference): the app, which must be the tenant's and have opted in; the continuation token,
/// which must be this app's, this tenant's and at the step the endpoint serves; the
/// `challenge_type` list, which must offer `redirect`; the one-time codes, sent through the
/// outbox within the per-address limits; and the answers in the API's own JSON.
struct NativeAuthAPI: Sendable {
    let service: IdentityService
    let flows: NativeAuthFlows

    var now: Date { service.clock.now }

    /// The `challenge_type` list: space-separated, and it must offer `redirect` (the client's
    /// way out when the API cannot go on).
    static func challengeTypes(_ form: RequestParameters) throws(NativeAuthError) -> Set<String> {
        guard let text = form.nonEmpty("challenge_type") else { throw .missing("challenge_type") }
        let types = Set(text.split(separator: " ").map { $0.lowercased() })
        guard types.contains("redirect") else { throw .missingRedirect }
        return types
    }

    /// What the client handles itself: `capabilities`, space-separated (the reference before
    /// 2026 spelled it `capability`, comma-separated; both are read). Unknown values are dropped.
    static func capabilities(_ form: RequestParameters) -> [String] {
        let text = form["capabilities"] ?? form["capability"] ?? ""
        let known: Set<String> = ["mfa_required", "registration_required"]
        return Array(Set(text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)).intersection(known)).sorted()
    }

    static let redirect = Response.json(.object([("challenge_type", .string("redirect"))]), noStore: true)

    /// The browser it is, and why (the token endpoint's `redirect_reason`).
    static func redirect(because reason: String) -> Response {
        .json(.object([("challenge_type", .string("redirect")), ("redirect_reason", .string(reason))]), noStore: true)
    }

    static func answer(_ members: [(String, JSONText)]) -> Response { .json(.object(members), noStore: true) }

    static func continuation(_ token: String) -> Response { answer([("continuation_token", .string(token))]) }

    /// The app, which must be this tenant's, a public client (it has no secret to prove, as
    /// External ID requires of native apps) and have opted in.
    func client(_ form: RequestParameters, tenant: Tenant) async throws -> AppRegistration {
        guard let id = form.nonEmpty("client_id") else { throw NativeAuthError.missing("client_id") }
        guard let app = try await service.tenants.application(tenantID: tenant.id, clientID: id) else { throw NativeAuthError.unknownClient(id) }
        guard app.nativeAuthentication else { throw NativeAuthError.disabledForApp }
        guard app.kind == .public else {
            throw NativeAuthError(error: "unauthorized_client", code: 7_000_218, message: "A confidential client cannot use the native authentication API.")
        }
        return app
    }

    /// What a native call does for the person, each allowed by the flow as its pages allow it.
    enum Purpose {
        case signIn, signUp, passwordReset
    }

    /// The browser is needed: the API answers `challenge_type: redirect` (with a reason on the
    /// token endpoint).
    struct BrowserNeeded: Error {
        var reason: String
    }

    /// The user flow whose rules the app's sign-ins follow: the one it is bound to, else the
    /// tenant's default; never the request's `p`. The flow must offer local accounts and allow
    /// `purpose`, as the hosted pages do (a sign-up only in a flow with sign-up); a custom
    /// policy's journey runs only on its pages. Otherwise the browser.
    func rules(for client: AppRegistration, tenant: Tenant, _ purpose: Purpose) async throws -> UserFlow {
        guard let flow = try await boundFlow(of: client, tenant: tenant).map(service.offered) else {
            throw BrowserNeeded(reason: "The app's user flow is not available.")
        }
        guard flow.customPolicy == nil else { throw BrowserNeeded(reason: "A custom policy runs on its pages.") }
        guard flow.offersLocalAccounts else { throw BrowserNeeded(reason: "The user flow offers no local accounts.") }
        let allowed: Bool =
            switch purpose {
            case .signIn: [.signUpOrSignIn, .signIn, .ropc].contains(flow.type)
            case .signUp: [.signUpOrSignIn, .signUp].contains(flow.type)
            case .passwordReset: [.signUpOrSignIn, .signIn, .passwordReset].contains(flow.type)
            }
        guard allowed else { throw BrowserNeeded(reason: "The user flow does not offer this.") }
        return flow
    }

    /// Runs `body`, answering a ``NativeAuthError`` in the API's own form, and
    /// ``BrowserNeeded`` as `redirect`.
    func answering(_ context: PolicyRequestContext, _ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch let error as NativeAuthError {
            return error.response(correlationID: context.correlationID, at: now)
        } catch let browser as BrowserNeeded {
            context.logger.info("native authentication: the browser is needed", metadata: ["reason": "\(browser.reason)"])
            return Self.redirect
        }
    }

    /// The request's form and app, then `body`, its refusals in the API's form.
    func handle(
        _ request: Request, _ context: PolicyRequestContext,
        _ body: @Sendable (RequestParameters, AppRegistration) async throws -> Response
    ) async throws -> Response {
        let form = try await FormBody.read(request, context: context)
        return try await answering(context) {
            if let armed = try armedFault(request) { return armed }
            let client = try await client(form, tenant: context.tenant)
            return try await NativeAuthCall.$current.withValue(call(request, context, client: client)) { try await body(form, client) }
        }
    }

    /// Counts a new flow against the client address's hourly limit, before any lookup or hash:
    /// ``NativeAuthError/tooManyFlows`` past it.
    func admitNewFlow(_ context: PolicyRequestContext) async throws {
        guard
            try await flows.admit(
                clientAddress: context.clientAddress, limitPerHour: service.configuration.transactionsPerAddressPerHour, now: now)
        else { throw NativeAuthError.tooManyFlows }
    }

    /// This request as the tenant's authentication extensions see it.
    func call(_ request: Request, _ context: PolicyRequestContext, client: AppRegistration) -> NativeAuthCall {
        NativeAuthCall(
            client: client, issuer: HostPolicy.issuer(origin: service.hosts.origin(of: request), tenant: context.tenant, face: .entra),
            correlationID: context.correlationID, clientAddress: context.clientAddress)
    }

    /// The fault `/dev/faults` armed on this endpoint (``FaultInjector/nativeKey(_:)``): its
    /// error thrown, `redirect` answered. Armed only where the test-control surface is on.
    func armedFault(_ request: Request) throws -> Response? {
        // `/{tenant}/signup/v1.0/start` → `signup/v1.0/start`.
        let endpoint = request.uri.path.split(separator: "/").dropFirst().joined(separator: "/")
        guard case .nativeAuth(let name) = service.faults.take(policy: FaultInjector.nativeKey(endpoint)) else { return nil }
        if name == "redirect" { return Self.redirect }
        throw NativeAuthError.faults[name] ?? NativeAuthError(error: "server_error", code: 90_033, message: "An armed fault.")
    }

    /// The live flow a request's continuation token continues, at one of `steps`, for this app.
    func flow(_ form: RequestParameters, client: AppRegistration, tenant: Tenant, at steps: Set<NativeAuthFlow.Step>) async throws
        -> NativeAuthFlow
    {
        guard let token = form.nonEmpty("continuation_token") else { throw NativeAuthError.missing("continuation_token") }
        switch try await flows.find(token, now: now) {
        case .expired: throw NativeAuthError.expiredToken
        case .unknown: throw NativeAuthError.invalidToken
        case .found(let flow):
            // Another app's, another tenant's, or another step's token continues nothing here.
            guard flow.clientID == client.clientIDString, flow.tenantID == tenant.id, steps.contains(flow.step) else {
                throw NativeAuthError.invalidToken
            }
            return flow
        }
    }

    /// Moves `flow` on, or refuses when its token was spent by a request racing with this one.
    func advance(
        _ flow: NativeAuthFlow, to step: NativeAuthFlow.Step, method: String? = nil, data: NativeAuthFlowData? = nil, userID: UUID? = nil
    ) async throws -> String {
        try await advanced(flow, to: step, method: method, data: data, userID: userID).token
    }

    /// ``advance(_:to:method:data:userID:)``, with the flow as it now is.
    func advanced(
        _ flow: NativeAuthFlow, to step: NativeAuthFlow.Step, method: String? = nil, data: NativeAuthFlowData? = nil, userID: UUID? = nil
    ) async throws -> (token: String, flow: NativeAuthFlow) {
        guard let moved = try await flows.advance(flow, to: step, method: method, data: data, userID: userID) else {
            throw NativeAuthError.invalidToken
        }
        return moved
    }

    /// Whether the flow's second factor for `user` is an authenticator app, as the hosted step
    /// chooses: an enrolled one whenever the flow offers it, and always when mail is not offered.
    func usesAuthenticator(_ user: UserAccount, flow: UserFlow) async throws -> Bool {
        let methods = flow.mfa.methods
        guard methods.contains(.totp) else { return false }
        if !methods.contains(.email) || user.presentableEmail == nil { return true }
        return try await service.secondFactors.hasAuthenticator(userID: user.id)
    }

    // MARK: One-time codes

    /// External ID's codes are eight digits (the reference's `code_length`).
    static let codeLength = 8

    /// The key a code's per-address limits count under: a second factor's codes have their own,
    /// so resets asked for by anyone who knows the address cannot use up the account's
    /// second-factor codes (they are the hosted pages' separate store there).
    static func limitKey(_ email: String, for flow: NativeAuthFlow) -> String {
        [.secondFactor, .secondFactorToken, .registration, .registrationCode].contains(flow.step) ? "mfa:" + email : email
    }

    /// Sends a new code for `flow` to `recipient` (the canonical address `email`), replacing the
    /// flow's earlier one; `userID` binds it to an account (nil in a sign-up). Throws
    /// ``NativeAuthError/tooManyCodes`` when the address was sent its share lately.
    func sendCode(for flow: NativeAuthFlow, to recipient: String, email: String, userID: UUID?, tenant: Tenant, logger: Logger) async throws {
        let code = String(format: "%08d", Int.random(in: 0..<100_000_000))
        // With the flow's OnOtpSend extension the code goes to it (after it is saved, within the
        // limits), and the outbox gets nothing.
        var otpSend: (AuthenticationExtension, UserFlow)?
        if let client = NativeAuthCall.current?.client, let flow = try await boundFlow(of: client, tenant: tenant),
            let ext = try authenticationExtension(.onOtpSend, flow: flow, tenant: tenant)
        {
            otpSend = (ext, flow)
        }
        let mail = OutboxMessage(
            id: OutboxMessage.newID(), tenantID: tenant.id, recipient: recipient, subject: "\(tenant.displayName) account verification code",
            body: "Your code is: \(code)\nIt expires in 10 minutes.", createdAt: now)
        guard
            try await service.interactions.saveVerificationCode(
                interactionID: Self.codeBinding(flow), tenantID: tenant.id, email: Self.limitKey(email, for: flow), userID: userID, code: code,
                expiresAt: now.addingTimeInterval(NativeAuthFlows.lifetime), mail: otpSend == nil ? mail : nil,
                limits: service.configuration.codeLimits, now: now)
        else {
            logger.warning("native authentication: codes throttled for an address")
            throw NativeAuthError.tooManyCodes
        }
        if let (ext, rules) = otpSend {
            var user: UserAccount?
            if let userID { user = try await service.users.user(id: userID) }
            let caller = try extensionCaller(requestType: Self.requestType(flow))
            try await extensionEvent { calls throws(AuthenticationExtensionFailure) in
                try await calls.otpSend(ext, tenant: tenant, flow: rules, caller: caller, user: user, recipient: recipient, code: code, now: now)
            }
        }
        logger.info("native authentication: code sent", metadata: ["flow_step": "\(flow.step.rawValue)"])
    }

    /// Whether `code` is the one last sent in `flow` for `email`: a wrong one is
    /// `invalid_oob_value` (five per code, ten per address an hour, as the hosted pages count).
    func checkCode(_ form: RequestParameters, for flow: NativeAuthFlow, email: String, tenant: Tenant) async throws {
        guard let code = form.nonEmpty("oob") else { throw NativeAuthError.missing("oob") }
        switch try await service.interactions.checkVerificationCode(
            interactionID: Self.codeBinding(flow), tenantID: tenant.id, email: Self.limitKey(email, for: flow), code: code,
            limits: service.configuration.codeLimits,
            now: now)
        {
        case .proves(let account) where account == flow.userID: return
        case .throttled: throw NativeAuthError.tooManyCodes
        case .proves, .refused: throw NativeAuthError.invalidCode
        }
    }

    /// ``checkCode(_:for:email:tenant:)``, a wrong code also counted against the flow (which
    /// ends after ``NativeAuthFlows/maximumAttempts``).
    func checkCodeCounting(_ form: RequestParameters, for flow: NativeAuthFlow, email: String, tenant: Tenant) async throws {
        do {
            try await checkCode(form, for: flow, email: email, tenant: tenant)
        } catch let error as NativeAuthError where error.suberror == "invalid_oob_value" {
            _ = try await flows.failed(flow)
            throw error
        }
    }

    /// The code's binding: the flow's stable id, which its rotating tokens keep.
    private static func codeBinding(_ flow: NativeAuthFlow) -> String { "native:" + flow.id }

    /// The answer to a challenge that sent a code (the reference's `oob` challenge).
    static func codeSent(_ token: String, to email: String) -> Response {
        answer([
            ("continuation_token", .string(token)), ("challenge_type", .string("oob")), ("binding_method", .string("prompt")),
            ("challenge_channel", .string("email")), ("challenge_target_label", .string(masked(email))),
            ("code_length", .int(Int64(codeLength))), ("interval", .int(300)),
        ])
    }

    /// An address shown without giving it away, as Entra masks it: `c***r@co**o.com`.
    static func masked(_ email: String) -> String {
        let parts = email.split(separator: "@", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return "***" }
        func mask(_ text: Substring, keep: Int) -> String {
            guard text.count > keep + 1 else { return String(text.prefix(1)) + "***" }
            return String(text.prefix(keep)) + "***" + String(text.suffix(1))
        }
        let domain = parts[1].split(separator: ".")
        let maskedDomain = domain.dropLast().map { mask($0, keep: 2) } + domain.suffix(1).map(String.init)
        return mask(Substring(parts[0]), keep: 1) + "@" + maskedDomain.joined(separator: ".")
    }

    // MARK: Passwords

    /// The password rules' refusal in the API's suberrors (B2C's "strong" complexity).
    static func passwordProblem(_ password: String) -> NativeAuthError? {
        guard let problem = PasswordPolicy.problem(with: password) else { return nil }
        if password.count < 8 { return .password("password_too_short", problem) }
        if password.count > 64 || password.utf8.count > 72 { return .password("password_too_long", problem) }
        if password.utf8.contains(0) { return .password("password_is_invalid", problem) }
        return .password("password_too_weak", problem)
    }
}
