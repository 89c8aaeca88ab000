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
    /// The extension `flow` binds to `event`, if any (``ExtensionCall/bound(_:flow:tenant:)``).
    func authenticationExtension(_ event: AuthenticationExtension.Event, flow: UserFlow, tenant: Tenant) throws -> AuthenticationExtension? {
        do throws(AuthenticationExtensionFailure) {
            return try ExtensionCall.bound(event, flow: flow, tenant: tenant)
        } catch {
            throw NativeAuthError.extensionFailed(error.name, error.reason)
        }
    }

    /// The flow an app's codes follow for ``AuthenticationExtension/Event/onOtpSend``: the one it
    /// is bound to, else the tenant's default.
    func boundFlow(of client: AppRegistration, tenant: Tenant) async throws -> UserFlow? {
        try await service.tenants.userFlow(tenantID: tenant.id, name: client.userFlow ?? tenant.defaultPolicy)
    }

    /// This request as an extension hears of it.
    func extensionCaller(requestType: String? = nil) throws -> ExtensionCaller {
        guard let call = NativeAuthCall.current else { throw NativeAuthError.extensionFailed("", "no request") }
        return ExtensionCaller(
            client: call.client, issuer: call.issuer, correlationID: call.correlationID, clientAddress: call.clientAddress, requestType: requestType)
    }

    /// Runs one extension event; its failure ends the request as External ID ends it (AADSTS1100001).
    func extensionEvent<T>(_ body: (ExtensionCall) async throws(AuthenticationExtensionFailure) -> T) async throws -> T {
        do throws(AuthenticationExtensionFailure) {
            return try await body(service.extensions)
        } catch {
            throw NativeAuthError.extensionFailed(error.name, error.reason)
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

    /// An extension's attribute values (`setPrefillValues`' `inputs`, `modifyAttributeValues`'
    /// `attributes`) under the flow's rules; values of attributes the flow does not collect are
    /// dropped, as External ID ignores them. A value the rules refuse is the extension's failure.
    func attributeValues(_ values: [String: JSONValue], ext: AuthenticationExtension, flow: UserFlow, tenant: Tenant) throws -> SignUpAttributeValues.Read {
        switch SignUpAttributeValues.read(values, flow: flow, tenant: tenant) {
        case .success(let read): return read
        case .failure: throw NativeAuthError.extensionFailed(ext.name, "it answered attribute values the flow's rules refuse")
        }
    }
}

extension NativeAuthError {
    /// Entra's answer when a custom authentication extension fails (AADSTS1100001).
    /// The caller learns only that it failed: how (a status, "unreachable") would make the
    /// extension's endpoint a probe of the network behind it. The reason is logged.
    static func extensionFailed(_ name: String, _ reason: String) -> NativeAuthError {
        AuthenticationExtensionFailure(name: name, reason: reason).log(to: Logger(label: "native-auth"))
        return extensionFailure
    }

    /// ``extensionFailed(_:_:)`` where the reason is already logged.
    static let extensionFailure = NativeAuthError(
        error: "server_error", code: 1_100_001, message: "A custom authentication extension did not answer as its contract requires.")

    /// An extension's `showBlockPage`: the person may not go on (its message, printable).
    static func blockedByExtension(_ message: String) -> NativeAuthError {
        NativeAuthError(error: "access_denied", code: 1_100_002, message: TextRules.printable(String(message.prefix(1024))))
    }
}
