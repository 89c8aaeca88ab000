import Foundation
import IdentityDirectory
import TodoModels
import WireCoding

/// Who an extension hears from: the envelope's `authenticationContext` (the app, the person's
/// address, the correlation id) and the issuer its bearer token comes from (the tenant's Entra
/// issuer at the request's origin).
package struct ExtensionCaller: Sendable {
    package var client: AppRegistration
    package var issuer: String
    package var correlationID: String
    package var clientAddress: String
    /// `signUp`, `signIn` or `passwordReset`, where the event can come from more than one.
    package var requestType: String?

    package init(client: AppRegistration, issuer: String, correlationID: String, clientAddress: String, requestType: String? = nil) {
        self.client = client
        self.issuer = issuer
        self.correlationID = correlationID
        self.clientAddress = clientAddress
        self.requestType = requestType
    }
}

/// What an OnAttributeCollectionStart extension answered.
package enum AttributeCollectionStart: Sendable, Equatable {
    case proceed
    /// Values to show (or, without a form, to take) where the person gave none, by attribute name.
    case prefill([String: JSONValue])
    case block(message: String)
}

/// What an OnAttributeCollectionSubmit extension answered.
package enum AttributeCollectionSubmit: Sendable, Equatable {
    case proceed
    /// Values that replace what was collected, by attribute name.
    case modify([String: JSONValue])
    case block(message: String)
    /// The values are refused: a message, and one per attribute (`attributeErrors`).
    case invalid(message: String, attributeErrors: [String: String])
}

/// External ID's custom authentication extensions (SPEC §2.15) at each event, for native
/// authentication and the hosted pages alike: the request envelope, the bearer token, and each
/// event's actions read into what the sign-in does with them. Anything outside an event's
/// contract is an ``AuthenticationExtensionFailure`` (External ID's AADSTS1100001): the caller
/// stops, creating nothing.
package struct ExtensionCall: Sendable {
    let issuer: TokenIssuer

    package init(issuer: TokenIssuer) { self.issuer = issuer }

    /// The extension `flow` binds to `event`, if any. A binding to an extension the tenant does
    /// not declare (for that event) fails closed: the event is never skipped.
    package static func bound(_ event: AuthenticationExtension.Event, flow: UserFlow, tenant: Tenant) throws(AuthenticationExtensionFailure)
        -> AuthenticationExtension?
    {
        guard let name = flow.extensions[event] else { return nil }
        guard let ext = tenant.authenticationExtension(event, of: flow) else { throw AuthenticationExtensionFailure(name: name, reason: "not declared") }
        return ext
    }

    /// Calls `ext` with the event's `data` (the `authenticationContext` added), as Entra's
    /// authentication events app with a five-minute token for the extension's `resourceId`.
    package func call(
        _ ext: AuthenticationExtension, tenant: Tenant, flow: UserFlow, caller: ExtensionCaller, user: UserAccount?, data: [(String, JSONText)],
        now: Date
    ) async throws(AuthenticationExtensionFailure) -> AuthenticationExtensionAction {
        let events = AppRegistration(
            clientID: UUID(uuidString: AuthenticationExtension.callerAppID)!, tenantID: tenant.id, displayName: "Azure AD Authentication Events",
            kind: .confidential, redirectURIs: [])
        let bearer: String
        do {
            bearer = try await issuer.appToken(
                client: events, resource: TokenResource(audience: ext.resourceId, scopeNames: []), roles: [], issuer: caller.issuer, lifetime: 300,
                now: now, face: .entra, tenant: tenant, flow: flow)
        } catch {
            throw AuthenticationExtensionFailure(name: ext.name, reason: "no signing key for its token")
        }
        let principal: JSONText = .object([
            ("id", .string(caller.client.clientIDString)), ("appId", .string(caller.client.clientIDString)),
            ("appDisplayName", .string(caller.client.displayName)), ("displayName", .string(caller.client.displayName)),
        ])
        var context: [(String, JSONText)] = [
            ("correlationId", .string(caller.correlationID)),
            ("client", .object([("ip", .string(caller.clientAddress)), ("locale", .string("en-us")), ("market", .string("en-us"))])),
            ("protocol", .string("OAUTH2.0")), ("clientServicePrincipal", principal), ("resourceServicePrincipal", principal),
        ]
        if let requestType = caller.requestType { context.append(("requestType", .string(requestType))) }
        if let user {
            context.append(
                (
                    "user",
                    .object([
                        ("id", .string(user.objectID)), ("displayName", .string(user.displayName)), ("mail", user.email.map(JSONText.string) ?? .null),
                        ("userPrincipalName", .string(user.email ?? user.signInName)), ("userType", .string("Member")),
                        ("createdDateTime", .string(ISO8601DateFormatter().string(from: user.createdAt))),
                    ])
                ))
        }
        return try await ext.call(
            data: [("authenticationContext", .object(context))] + data, tenantID: tenant.id, appID: caller.client.clientIDString, bearer: bearer)
    }

    /// An attribute-collection event, told the sign-up (`userSignUpInfo`); no account exists yet.
    private func signUpEvent(_ ext: AuthenticationExtension, tenant: Tenant, flow: UserFlow, caller: ExtensionCaller, signUp: SignUpInfo, now: Date)
        async throws(AuthenticationExtensionFailure) -> AuthenticationExtensionAction
    {
        try await call(ext, tenant: tenant, flow: flow, caller: caller, user: nil, data: [("userSignUpInfo", signUp.json(tenant))], now: now)
    }

    /// OnAttributeCollectionStart, as a sign-up comes to its attributes.
    package func attributeCollectionStart(
        _ ext: AuthenticationExtension, tenant: Tenant, flow: UserFlow, caller: ExtensionCaller, signUp: SignUpInfo, now: Date
    ) async throws(AuthenticationExtensionFailure) -> AttributeCollectionStart {
        let action = try await signUpEvent(ext, tenant: tenant, flow: flow, caller: caller, signUp: signUp, now: now)
        switch action.kind.lowercased() {
        case "continuewithdefaultbehavior": return .proceed
        case "setprefillvalues": return .prefill(try Self.values(action.members["inputs"], ext))
        case "showblockpage": return .block(message: Self.message(action, default: "Sign-up is not available."))
        default: throw AuthenticationExtensionFailure(name: ext.name, reason: "not an OnAttributeCollectionStart action")
        }
    }

    /// OnAttributeCollectionSubmit, once the attributes are collected and before the account is made.
    package func attributeCollectionSubmit(
        _ ext: AuthenticationExtension, tenant: Tenant, flow: UserFlow, caller: ExtensionCaller, signUp: SignUpInfo, now: Date
    ) async throws(AuthenticationExtensionFailure) -> AttributeCollectionSubmit {
        let action = try await signUpEvent(ext, tenant: tenant, flow: flow, caller: caller, signUp: signUp, now: now)
        switch action.kind.lowercased() {
        case "continuewithdefaultbehavior": return .proceed
        case "modifyattributevalues": return .modify(try Self.values(action.members["attributes"], ext))
        case "showblockpage": return .block(message: Self.message(action, default: "Sign-up is not available."))
        case "showvalidationerror":
            var errors: [String: String] = [:]
            if case .object(let members)? = action.members["attributeErrors"] {
                for name in members.keys.sorted().prefix(64) where SignUpAttributeValues.flowAttribute(named: name) != nil {
                    guard case .string(let text)? = members[name] else {
                        errors[name] = ""
                        continue
                    }
                    errors[name] = TextRules.printable(String(text.prefix(256)))
                }
            }
            return .invalid(message: Self.message(action, default: "The details were refused."), attributeErrors: errors)
        default: throw AuthenticationExtensionFailure(name: ext.name, reason: "not an OnAttributeCollectionSubmit action")
        }
    }

    /// OnTokenIssuanceStart (a custom claims provider): the claims its `provideClaimsForToken`
    /// action gives, as far as the extension declares them (strings or lists of strings, 3 KB in
    /// all, never a claim that says who issued the token or whose it is), as every token's extra
    /// claims are checked.
    package func tokenClaims(_ ext: AuthenticationExtension, tenant: Tenant, flow: UserFlow, caller: ExtensionCaller, user: UserAccount, now: Date)
        async throws(AuthenticationExtensionFailure) -> ExtraClaims
    {
        let action = try await call(ext, tenant: tenant, flow: flow, caller: caller, user: user, data: [], now: now)
        guard action.kind.lowercased() == "provideclaimsfortoken", case .object(let claims)? = action.members["claims"] else {
            throw AuthenticationExtensionFailure(name: ext.name, reason: "OnTokenIssuanceStart answers provideClaimsForToken with claims")
        }
        let allowed = Set((ext.claims ?? []).filter { !AuthenticationExtension.isProtected($0) })
        var kept: [String: JSONValue] = [:]
        for (name, value) in claims where allowed.contains(name) {
            switch value {
            case .string: kept[name] = value
            case .array(let items) where items.allSatisfy({ if case .string = $0 { true } else { false } }): kept[name] = value
            default: throw AuthenticationExtensionFailure(name: ext.name, reason: "a claim is not a string or a list of strings")
            }
        }
        guard ((try? JSONEncoder().encode(kept))?.count ?? 0) <= 3072 else {
            throw AuthenticationExtensionFailure(name: ext.name, reason: "its claims exceed 3 KB")
        }
        do {
            return try ExtraClaims(kept)
        } catch {
            throw AuthenticationExtensionFailure(name: ext.name, reason: error.description)
        }
    }

    /// ``tokenClaims(_:tenant:flow:caller:user:now:)`` of the extension `flow` binds to
    /// OnTokenIssuanceStart; none where it binds none.
    package func tokenClaims(boundIn flow: UserFlow, tenant: Tenant, caller: ExtensionCaller, user: UserAccount, now: Date)
        async throws(AuthenticationExtensionFailure) -> ExtraClaims
    {
        guard let ext = try Self.bound(.onTokenIssuanceStart, flow: flow, tenant: tenant) else { return ExtraClaims() }
        return try await tokenClaims(ext, tenant: tenant, flow: flow, caller: caller, user: user, now: now)
    }

    /// OnOtpSend: the code goes to the extension, which must answer `continueWithDefaultBehavior`.
    package func otpSend(
        _ ext: AuthenticationExtension, tenant: Tenant, flow: UserFlow, caller: ExtensionCaller, user: UserAccount?, recipient: String, code: String,
        now: Date
    ) async throws(AuthenticationExtensionFailure) {
        let action = try await call(
            ext, tenant: tenant, flow: flow, caller: caller, user: user,
            data: [("otpContext", .object([("identifier", .string(recipient)), ("oneTimeCode", .string(code))]))], now: now)
        guard action.kind.lowercased() == "continuewithdefaultbehavior" else {
            throw AuthenticationExtensionFailure(name: ext.name, reason: "OnOtpSend answers continueWithDefaultBehavior only")
        }
    }

    /// An action's `message`, printable and at most 1,024 characters.
    private static func message(_ action: AuthenticationExtensionAction, default fallback: String) -> String {
        TextRules.printable(String((action.text("message") ?? fallback).prefix(1024)))
    }

    /// An answer's attribute values (`inputs`, `attributes`): strings, numbers or booleans only.
    private static func values(_ members: JSONValue?, _ ext: AuthenticationExtension) throws(AuthenticationExtensionFailure) -> [String: JSONValue] {
        guard case .object(let object)? = members else { return [:] }
        for (key, value) in object {
            switch value {
            case .string, .bool, .number: continue
            default:
                throw AuthenticationExtensionFailure(
                    name: ext.name, reason: "the value of '\(TextRules.printable(String(key.prefix(64))))' is not a string, number or boolean")
            }
        }
        return object
    }
}

/// A sign-up as the attribute-collection events see it (`userSignUpInfo`): the attributes with
/// Graph's value types, and the identity.
package struct SignUpInfo: Sendable {
    package var email: String
    package var displayName: String?
    package var attributes: [String: String]
    /// `email` for a local account; for a provider's, its name and the subject it vouches for.
    package var identity: (signInType: String, issuer: String?, subject: String)?

    package init(email: String, displayName: String?, attributes: [String: String], identity: (signInType: String, issuer: String?, subject: String)? = nil) {
        self.email = email
        self.displayName = displayName
        self.attributes = attributes
        self.identity = identity
    }

    func json(_ tenant: Tenant) -> JSONText {
        var values: [(String, JSONText)] = []
        func value(_ text: String, type: String, attributeType: String) -> JSONText {
            let typed: JSONText =
                switch type {
                case "boolean": .bool(text == "true")
                case "int64": Int64(text).map(JSONText.int) ?? .string(text)
                default: .string(text)
                }
            return .object([
                ("@odata.type", .string("microsoft.graph.\(type)DirectoryAttributeValue")), ("value", typed), ("attributeType", .string(attributeType)),
            ])
        }
        if let displayName { values.append(("displayName", value(displayName, type: "string", attributeType: "builtIn"))) }
        for key in attributes.keys.sorted() {
            guard let text = attributes[key] else { continue }
            if let attribute = FlowAttribute(rawValue: key), case .custom(let name) = attribute, let declared = tenant.customAttribute(named: name) {
                let type = declared.type == .boolean ? "boolean" : declared.type == .int ? "int64" : "string"
                values.append((declared.graphName(extensionsAppID: tenant.extensionsAppID), value(text, type: type, attributeType: "directorySchemaExtension")))
            } else {
                values.append((key, value(text, type: "string", attributeType: "builtIn")))
            }
        }
        let (signInType, issuer, subject) = identity ?? ("email", tenant.name, email)
        var identityMembers: [(String, JSONText)] = [("signInType", .string(signInType))]
        if let issuer { identityMembers.append(("issuer", .string(issuer))) }
        identityMembers.append(("issuerAssignedId", .string(subject)))
        return .object([("attributes", .object(values)), ("identities", .array([.object(identityMembers)]))])
    }
}

/// Attribute values from outside (a native sign-up's `attributes`, an extension's answer) read
/// by the flow's rules, as the sign-up page reads its form: only the flow's sign-up attributes
/// (others are ignored, as Microsoft's reference says), each checked by its rule; a multi-valued
/// one is a comma-separated string. Custom attributes are named as Graph names them,
/// `extension_{appIdWithoutDashes}_{name}`, or as the flows do, `extension_{name}`.
package enum SignUpAttributeValues {
    /// The values, keyed as accounts keep them, or the names refused.
    package struct Read: Sendable, Equatable, Codable {
        package var displayName: String?
        package var attributes: [String: String] = [:]
        /// Attributes given empty: what was collected for them goes.
        package var cleared: [String] = []

        /// `attributes` with these values set and the cleared ones removed.
        package func applied(to attributes: [String: String]) -> [String: String] {
            var result = attributes.merging(self.attributes) { _, new in new }
            for name in cleared { result[name] = nil }
            return result
        }
    }

    package struct Refused: Error, Sendable, Equatable {
        package var names: [String]
    }

    package static func read(_ object: [String: JSONValue], flow: UserFlow, tenant: Tenant) -> Result<Read, Refused> {
        var invalid: [String] = []
        var read = Read()
        for (key, raw) in object.sorted(by: { $0.key < $1.key }) {
            guard let attribute = flowAttribute(named: key), flow.signUpAttributes.contains(attribute) else { continue }
            let text: String
            switch raw {
            case .string(let string): text = string
            case .bool(let flag): text = flag ? "true" : "false"
            case .number(let number) where number == number.rounded() && abs(number) < 1e15: text = String(Int64(number))
            default:
                invalid.append(key)
                continue
            }
            switch attribute {
            case .builtIn(let builtIn):
                switch builtIn.validate(text) {
                case .success(let value) where builtIn == .displayName && value.isEmpty: invalid.append(attribute.rawValue)
                case .success(let value) where builtIn == .displayName: read.displayName = value
                case .success(let value) where value.isEmpty: read.cleared.append(attribute.rawValue)
                case .success(let value): read.attributes[attribute.rawValue] = value
                case .failure: invalid.append(attribute.rawValue)
                }
            case .custom(let name):
                guard let declared = tenant.customAttribute(named: name) else { continue }
                switch declared.validate(text) {
                case .success(let value): read.attributes[attribute.rawValue] = value
                case .failure: invalid.append(attribute.rawValue)
                }
            }
        }
        return invalid.isEmpty ? .success(read) : .failure(Refused(names: invalid))
    }

    /// The attribute `name` stands for: a built-in one, `extension_{name}`, or Graph's
    /// `extension_{32 hex digits}_{name}`.
    package static func flowAttribute(named name: String) -> FlowAttribute? {
        let parts = name.split(separator: "_", maxSplits: 2, omittingEmptySubsequences: false)
        if parts.count == 3, parts[0] == "extension", parts[1].count == 32, parts[1].allSatisfy(\.isHexDigit) {
            return FlowAttribute(rawValue: "extension_" + parts[2])
        }
        return FlowAttribute(rawValue: name)
    }
}
