import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// Native authentication's sign-up (SPEC §2.15; Microsoft's reference, `signup/v1.0/*`):
/// `start` names the address (and may bring the password and attributes), `challenge` mails
/// the code that proves the address, and `continue` takes, in turn, the code, the password (when
/// the client offered `password` and gave none yet: `credential_required`) and the attributes the
/// flow requires (`attributes_required`). The account is made only at the end, in one insert,
/// after the flow's "before creating the user" API connector agreed; the last answer's
/// continuation token signs in at the token endpoint (`grant_type=continuation_token`).
/// The flow must offer local accounts and sign-up; the client must take a code, and a password
/// unless the flow's accounts sign in with one-time codes (`emailSignIn: oneTimePasscode`), or it
/// is sent to the browser.
struct NativeAuthSignUp: Sendable {
    let api: NativeAuthAPI

    /// `POST …/signup/v1.0/start` (`client_id`, `username`, `challenge_type`, optional `password`,
    /// `attributes`, `capabilities`).
    @Sendable func start(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let types = try NativeAuthAPI.challengeTypes(form)
            try await api.admitNewFlow(context)
            guard let username = form.nonEmpty("username"), let email = EmailAddress(username) else { throw NativeAuthError.invalidUsername }
            let tenant = context.tenant
            let flow = try await api.rules(for: client, tenant: tenant, .signUp)
            // The address is proven by a code, and a password flow's accounts have passwords: a
            // client that cannot take what the flow needs goes to the browser (the reference: a
            // method the tenant needs that the client did not list).
            let withPassword = flow.emailSignIn == .password
            guard types.contains("oob"), types.contains("password") || !withPassword else { return NativeAuthAPI.redirect }
            // A one-time-passcode flow's accounts have no password: one given would be lost.
            if !withPassword, form["password"]?.isEmpty == false {
                throw NativeAuthError(error: "invalid_request", code: 90_100, message: "This flow's accounts sign in with one-time codes, without a password.")
            }
            if try await api.service.users.user(tenantID: tenant.id, provider: .local, signInName: email.canonical) != nil {
                throw NativeAuthError.userAlreadyExists
            }
            var data = NativeAuthFlowData()
            data.displayEmail = email.display
            data.capabilities = NativeAuthAPI.capabilities(form)
            data.awaiting = withPassword ? "password" : nil
            if let password = form["password"], !password.isEmpty {
                if let problem = NativeAuthAPI.passwordProblem(password) { throw problem }
                data.passwordHash = try await api.service.hasher.hash(password)
            }
            if let text = form["attributes"] {
                try NativeAuthAttributes.collect(text, into: &data, flow: flow, tenant: tenant, token: nil)
            }
            let token = try await api.flows.start(
                tenantID: tenant.id, clientID: client.clientIDString, userID: nil, email: email.canonical, step: .signUpChallenge, data: data,
                now: api.now)
            return NativeAuthAPI.continuation(token)
        }
    }

    /// `POST …/signup/v1.0/challenge`: mails a code (again, for a re-send) until the address is
    /// proven; after `credential_required`, answers `password`.
    @Sendable func challenge(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let flow = try await api.flow(form, client: client, tenant: context.tenant, at: [.signUpChallenge, .signUpContinue])
            guard let email = flow.email, let display = flow.data.displayEmail else { throw NativeAuthError.invalidToken }
            let types = form.nonEmpty("challenge_type").map { Set($0.split(separator: " ").map { $0.lowercased() }) }
            if flow.data.emailVerified {
                // Proven; what is left is the password, which the client must be able to give.
                guard flow.data.passwordHash == nil, flow.data.awaiting == "password", types?.contains("password") ?? true else {
                    return NativeAuthAPI.redirect
                }
                let next = try await api.advance(flow, to: .signUpContinue)
                return NativeAuthAPI.answer([("continuation_token", .string(next)), ("challenge_type", .string("password"))])
            }
            if let types, !types.contains("oob") { return NativeAuthAPI.redirect }
            try await api.sendCode(for: flow, to: display, email: email, userID: nil, tenant: context.tenant, logger: context.logger)
            let next = try await api.advance(flow, to: .signUpContinue)
            return NativeAuthAPI.codeSent(next, to: display)
        }
    }

    /// `POST …/signup/v1.0/continue` with `grant_type` `oob`, `password` or `attributes`.
    @Sendable func `continue`(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        try await api.handle(request, context) { form, client in
            let tenant = context.tenant
            var flow = try await api.flow(form, client: client, tenant: tenant, at: [.signUpContinue])
            guard let email = flow.email else { throw NativeAuthError.invalidToken }
            let rules = try await api.rules(for: client, tenant: tenant, .signUp)
            guard let grantType = form.nonEmpty("grant_type") else { throw NativeAuthError.missing("grant_type") }
            switch grantType {
            case "oob" where !flow.data.emailVerified:
                try await api.checkCodeCounting(form, for: flow, email: email, tenant: tenant)
                flow.data.emailVerified = true
            case "password" where flow.data.emailVerified && flow.data.passwordHash == nil && flow.data.awaiting == "password":
                guard let password = form["password"], !password.isEmpty else { throw NativeAuthError.missing("password") }
                if let problem = NativeAuthAPI.passwordProblem(password) { throw problem }
                flow.data.passwordHash = try await api.service.hasher.hash(password)
            case "attributes" where flow.data.emailVerified:
                guard let text = form["attributes"] else { throw NativeAuthError.missing("attributes") }
                try NativeAuthAttributes.collect(text, into: &flow.data, flow: rules, tenant: tenant, token: form["continuation_token"])
            case "oob", "password", "attributes":
                throw NativeAuthError(error: "invalid_request", code: 55_200, message: "The continuation_token is not valid for this grant_type.")
            default:
                throw NativeAuthError.unsupportedGrant(grantType)
            }
            // What is still missing, in the reference's order: the password, then the attributes.
            // The progress is kept first (a spent code cannot be taken again), so every answer
            // below carries the flow's next token.
            let needsPassword = flow.data.passwordHash == nil && flow.data.awaiting == "password"
            var (next, saved): (String, NativeAuthFlow)
            if grantType == "attributes", let current = form["continuation_token"] {
                // Nothing was spent: the same token goes on, so a refusal below leaves the
                // client's step usable.
                guard try await api.flows.update(flow) else { throw NativeAuthError.invalidToken }
                (next, saved) = (current, flow)
            } else {
                (next, saved) = try await api.advanced(flow, to: needsPassword ? .signUpChallenge : .signUpContinue, data: flow.data)
            }
            if needsPassword { throw NativeAuthError.credentialRequired.continuing(next) }
            if !saved.data.attributeCollectionStarted, let ext = try api.authenticationExtension(.onAttributeCollectionStart, flow: rules, tenant: tenant) {
                do {
                    (next, saved) = try await api.advanced(saved, to: .signUpContinue, data: try await attributeCollectionStart(ext, saved, rules, tenant))
                } catch let error as NativeAuthError {
                    throw error.continuing(next)
                }
            }
            let missing = NativeAuthAttributes.missing(saved.data, flow: rules, tenant: tenant)
            if !missing.isEmpty { throw NativeAuthError.attributesRequired.continuing(next).with("required_attributes", .array(missing)) }
            let user: UserAccount
            do {
                user = try await createAccount(saved, rules: rules, client: client, tenant: tenant, context: context)
            } catch let error as NativeAuthError {
                throw error.continuing(next)
            }
            var data = saved.data
            data.newUser = true
            data.passwordHash = nil
            return NativeAuthAPI.continuation(try await api.advance(saved, to: .signedIn, data: data, userID: user.id))
        }
    }

    /// External ID's OnAttributeCollectionStart, once, as the sign-up comes to its attributes: go
    /// on, fill in values the person has not given (there is no form here to prefill), or block.
    private func attributeCollectionStart(_ ext: AuthenticationExtension, _ flow: NativeAuthFlow, _ rules: UserFlow, _ tenant: Tenant) async throws
        -> NativeAuthFlowData
    {
        var data = flow.data
        data.attributeCollectionStarted = true
        let info = SignUpInfo(email: data.displayEmail ?? flow.email ?? "", displayName: data.displayName, attributes: data.attributes)
        let caller = try api.extensionCaller(requestType: "signUp")
        let now = api.now
        switch try await api.extensionEvent({ calls throws(AuthenticationExtensionFailure) in
            try await calls.attributeCollectionStart(ext, tenant: tenant, flow: rules, caller: caller, signUp: info, now: now)
        }) {
        case .proceed: break
        case .prefill(let values):
            let prefill = try api.attributeValues(values, ext: ext, flow: rules, tenant: tenant)
            if data.displayName == nil { data.displayName = prefill.displayName }
            data.attributes.merge(prefill.attributes) { given, _ in given }
        case .block(let message): throw NativeAuthError.blockedByExtension(message)
        }
        return data
    }

    /// External ID's OnAttributeCollectionSubmit, before the account is made: go on, change the
    /// values, block, or refuse them with a message (`attribute_validation_failed`).
    private func attributeCollectionSubmit(
        _ ext: AuthenticationExtension, email: String, displayName: inout String, attributes: inout [String: String], rules: UserFlow, tenant: Tenant
    ) async throws {
        let info = SignUpInfo(email: email, displayName: displayName, attributes: attributes)
        let caller = try api.extensionCaller(requestType: "signUp")
        let now = api.now
        switch try await api.extensionEvent({ calls throws(AuthenticationExtensionFailure) in
            try await calls.attributeCollectionSubmit(ext, tenant: tenant, flow: rules, caller: caller, signUp: info, now: now)
        }) {
        case .proceed: break
        case .modify(let values):
            let changed = try api.attributeValues(values, ext: ext, flow: rules, tenant: tenant)
            if let name = changed.displayName { displayName = name }
            attributes = changed.applied(to: attributes)
        case .block(let message): throw NativeAuthError.blockedByExtension(message)
        case .invalid(let message, let attributeErrors):
            var error = NativeAuthError.attributeValidationFailed
            error.message = message
            let names = attributeErrors.keys.sorted()
            throw error.with("invalid_attributes", .array((names.isEmpty ? [UserAttribute.displayName.rawValue] : names).map { .object([("name", .string($0))]) }))
        }
    }

    /// Makes the account from what the flow gathered, after the flow's OnAttributeCollectionSubmit
    /// extension and "before creating the user" connector agreed (their values set, their
    /// refusal the answer).
    private func createAccount(_ flow: NativeAuthFlow, rules: UserFlow, client: AppRegistration, tenant: Tenant, context: PolicyRequestContext)
        async throws -> UserAccount
    {
        guard let email = flow.email, let display = flow.data.displayEmail else { throw NativeAuthError.invalidToken }
        var attributes = flow.data.attributes
        var displayName = flow.data.displayName ?? String(display.split(separator: "@").first ?? "")
        if let ext = try api.authenticationExtension(.onAttributeCollectionSubmit, flow: rules, tenant: tenant) {
            try await attributeCollectionSubmit(ext, email: display, displayName: &displayName, attributes: &attributes, rules: rules, tenant: tenant)
        }
        if let name = rules.connectors.beforeCreatingUser {
            guard let connector = tenant.apiConnectors.first(where: { $0.name == name }) else {
                throw NativeAuthError(error: "server_error", code: 90_075, message: "The sign-up's API connector is not configured.")
            }
            let subject = ConnectorSubject(
                email: display, identities: [("emailAddress", tenant.name, display)], displayName: displayName, objectID: nil,
                attributes: attributes)
            let outcome: ConnectorOutcome
            do {
                outcome = try await api.service.connectors.call(
                    connector, step: .postAttributeCollection, subject: subject, tenant: tenant, clientID: client.clientIDString, uiLocales: nil)
            } catch {
                context.logger.warning("API connector failed", metadata: ["connector": "\(name)", "reason": "\(error.reason)"])
                throw NativeAuthError(error: "server_error", code: 90_075, message: "The sign-up's API connector failed: \(error.reason).")
            }
            switch outcome {
            case .proceed(let overrides):
                for (key, value) in overrides {
                    if key == UserAttribute.displayName.rawValue { displayName = value } else { attributes[key] = value }
                }
            case .validationError(let message):
                // Not about one attribute: every one collected is named.
                let names = [UserAttribute.displayName.rawValue] + attributes.keys.sorted()
                var error = NativeAuthError.attributeValidationFailed
                error.message = message
                throw error.with("invalid_attributes", .array(names.map { .object([("name", .string($0))]) }))
            case .block(let message):
                throw NativeAuthError(error: "access_denied", code: 90_075, message: message)
            }
        }
        let user = UserAccount(
            tenantID: tenant.id, identityProvider: .local, signInName: email, email: display, displayName: displayName, attributes: attributes,
            passwordHash: flow.data.passwordHash, createdAt: api.now, emailVerified: true)
        do {
            try await api.service.users.create(user)
        } catch UserDirectoryError.duplicate {
            throw NativeAuthError.userAlreadyExists
        }
        context.logger.info("account created", metadata: ["oid": "\(user.objectID)", "via": "native authentication"])
        return user
    }
}
