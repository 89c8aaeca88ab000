import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import TodoModels
import UserJourneys
import WireCoding

/// One native-authentication request as the tenant's custom authentication extensions see it
/// (SPEC §2.15): the app, the issuer their bearer token comes from, the correlation id and the
/// caller's address. Set for the length of a request by ``NativeAuthAPI/handle(_:_:_:)`` and
/// the token endpoint.
struct NativeAuthCall: Sendable {
    @TaskLocal static var current: NativeAuthCall?
    var client: AppRegistration
    var issuer: String
    var correlationID: String
    var clientAddress: String
}

extension NativeAuthAPI {
    /// The extension `flow` binds to `event`, if any. A binding to an extension the tenant does
    /// not declare (for that event) fails closed: the event is never skipped.
    func authenticationExtension(_ event: AuthenticationExtension.Event, flow: UserFlow, tenant: Tenant) throws -> AuthenticationExtension? {
        guard let name = flow.extensions[event] else { return nil }
        guard let ext = tenant.authenticationExtension(event, of: flow) else { throw NativeAuthError.extensionFailed(name, "not declared") }
        return ext
    }

    /// The flow an app's codes follow for ``AuthenticationExtension/Event/onOtpSend``: the one it
    /// is bound to, else the tenant's default.
    func boundFlow(of client: AppRegistration, tenant: Tenant) async throws -> UserFlow? {
        try await service.tenants.userFlow(tenantID: tenant.id, name: client.userFlow ?? tenant.defaultPolicy)
    }

    /// Calls `ext` with the event's `data` (the `authenticationContext` added), as Entra's
    /// authentication events app with a five-minute token for the extension's `resourceId`.
    /// Its failure ends the request as External ID ends it (AADSTS1100001).
    func callExtension(
        _ ext: AuthenticationExtension, tenant: Tenant, flow: UserFlow, user: UserAccount?, data: [(String, JSONText)], requestType: String? = nil
    ) async throws -> AuthenticationExtensionAction {
        guard let call = NativeAuthCall.current else { throw NativeAuthError.extensionFailed(ext.name, "no request") }
        let caller = AppRegistration(
            clientID: UUID(uuidString: AuthenticationExtension.callerAppID)!, tenantID: tenant.id, displayName: "Azure AD Authentication Events",
            kind: .confidential, redirectURIs: [])
        let bearer = try await service.issuer.appToken(
            client: caller, resource: TokenResource(audience: ext.resourceId, scopeNames: []), roles: [], issuer: call.issuer, lifetime: 300,
            now: now, face: .entra, tenant: tenant, flow: flow)
        let principal: JSONText = .object([
            ("id", .string(call.client.clientIDString)), ("appId", .string(call.client.clientIDString)),
            ("appDisplayName", .string(call.client.displayName)), ("displayName", .string(call.client.displayName)),
        ])
        var context: [(String, JSONText)] = [
            ("correlationId", .string(call.correlationID)),
            ("client", .object([("ip", .string(call.clientAddress)), ("locale", .string("en-us")), ("market", .string("en-us"))])),
            ("protocol", .string("OAUTH2.0")), ("clientServicePrincipal", principal), ("resourceServicePrincipal", principal),
        ]
        if let requestType { context.append(("requestType", .string(requestType))) }
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
        let envelope: [(String, JSONText)] = [("authenticationContext", .object(context))] + data
        let appID = call.client.clientIDString
        do throws(AuthenticationExtensionFailure) {
            return try await ext.call(data: envelope, tenantID: tenant.id, appID: appID, bearer: bearer)
        } catch {
            throw NativeAuthError.extensionFailed(ext.name, error.reason)
        }
    }

    /// Where the event comes from, as the envelope's `requestType` says.
    static func requestType(_ flow: NativeAuthFlow?) -> String {
        switch flow?.step {
        case .signUpChallenge?, .signUpContinue?: "signUp"
        case .resetChallenge?, .resetCode?, .resetSubmit?, .resetPoll?: "passwordReset"
        default: "signIn"
        }
    }

    /// A sign-up's `userSignUpInfo`: the attributes with Graph's value types, and the identity.
    static func signUpInfo(email: String, displayName: String?, attributes: [String: String], tenant: Tenant) -> JSONText {
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
        return .object([
            ("attributes", .object(values)),
            ("identities", .array([.object([("signInType", .string("email")), ("issuer", .string(tenant.name)), ("issuerAssignedId", .string(email))])])),
        ])
    }

    /// An extension's attribute values (`setPrefillValues`' `inputs`, `modifyAttributeValues`'
    /// `attributes`) under the flow's names, each checked by the attribute's rule; values of
    /// attributes the flow does not collect are dropped, as External ID ignores them.
    func attributeValues(_ members: JSONValue?, ext: AuthenticationExtension, flow: UserFlow, tenant: Tenant) throws -> NativeAuthFlowData {
        guard case .object(let object)? = members else { return NativeAuthFlowData() }
        var text: [String: JSONValue] = [:]
        for (key, value) in object {
            switch value {
            case .string, .bool, .number: text[key] = value
            default: throw NativeAuthError.extensionFailed(ext.name, "the value of '\(TextRules.printable(String(key.prefix(64))))' is not a string, number or boolean")
            }
        }
        var data = NativeAuthFlowData()
        do {
            try NativeAuthAttributes.collect(text, into: &data, flow: flow, tenant: tenant, token: nil)
        } catch {
            throw NativeAuthError.extensionFailed(ext.name, "it answered attribute values the flow's rules refuse")
        }
        return data
    }
}

extension NativeAuthError {
    /// Entra's answer when a custom authentication extension fails (AADSTS1100001).
    /// The caller learns only that it failed: how (a status, "unreachable") would make the
    /// extension's endpoint a probe of the network behind it. The reason is logged.
    static func extensionFailed(_ name: String, _ reason: String) -> NativeAuthError {
        Logger(label: "native-auth").warning("custom authentication extension failed", metadata: ["extension": "\(name)", "reason": "\(reason)"])
        return NativeAuthError(error: "server_error", code: 1_100_001, message: "A custom authentication extension did not answer as its contract requires.")
    }

    /// An extension's `showBlockPage`: the person may not go on (its message, printable).
    static func blockedByExtension(_ message: String) -> NativeAuthError {
        NativeAuthError(error: "access_denied", code: 1_100_002, message: TextRules.printable(String(message.prefix(1024))))
    }
}
