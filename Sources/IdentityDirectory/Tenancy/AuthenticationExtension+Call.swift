import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import ServerSupport
import WireCoding

/// Why an authentication extension gave no usable answer: unreachable, too slow, or an answer
/// outside its event's contract. External ID ends the sign-in then (AADSTS1100001).
package struct AuthenticationExtensionFailure: Error, Sendable, Equatable {
    package var name: String
    package var reason: String

    package init(name: String, reason: String) {
        self.name = name
        self.reason = reason
    }

    /// Writes why to `logger`: the caller is told only that the extension failed.
    package func log(to logger: Logger) {
        logger.warning("custom authentication extension failed", metadata: ["extension": "\(name)", "reason": "\(reason)"])
    }
}

/// An extension's answer: its first action's `@odata.type` (the part after the event's
/// namespace, e.g. `provideClaimsForToken`) and the action's other members.
package struct AuthenticationExtensionAction: Sendable, Equatable {
    package var kind: String
    package var members: [String: JSONValue]

    /// A text member (`message`).
    package func text(_ name: String) -> String? {
        if case .string(let value)? = members[name] { return value }
        return nil
    }
}

extension AuthenticationExtension {
    /// Microsoft's names for the event in the request envelope and the answer.
    var eventType: String {
        switch event {
        case .onTokenIssuanceStart: "microsoft.graph.authenticationEvent.tokenIssuanceStart"
        case .onAttributeCollectionStart: "microsoft.graph.authenticationEvent.attributeCollectionStart"
        case .onAttributeCollectionSubmit: "microsoft.graph.authenticationEvent.attributeCollectionSubmit"
        case .onOtpSend: "microsoft.graph.authenticationEvent.emailOtpSend"
        }
    }

    package var calloutDataType: String {
        switch event {
        case .onTokenIssuanceStart: "microsoft.graph.onTokenIssuanceStartCalloutData"
        case .onAttributeCollectionStart: "microsoft.graph.onAttributeCollectionStartCalloutData"
        case .onAttributeCollectionSubmit: "microsoft.graph.onAttributeCollectionSubmitCalloutData"
        case .onOtpSend: "microsoft.graph.onOtpSendCalloutData"
        }
    }

    /// The answer's `data.@odata.type`, and the namespace of its actions (compared without case:
    /// Microsoft's own examples spell the OTP ones `OnOtpSendResponseData`, `OtpSend.…`).
    var responseContract: (dataType: String, actionPrefix: String) {
        switch event {
        case .onTokenIssuanceStart: ("microsoft.graph.onTokenIssuanceStartResponseData", "microsoft.graph.tokenIssuanceStart.")
        case .onAttributeCollectionStart: ("microsoft.graph.onAttributeCollectionStartResponseData", "microsoft.graph.attributeCollectionStart.")
        case .onAttributeCollectionSubmit: ("microsoft.graph.onAttributeCollectionSubmitResponseData", "microsoft.graph.attributeCollectionSubmit.")
        case .onOtpSend: ("microsoft.graph.onOtpSendResponseData", "microsoft.graph.otpSend.")
        }
    }

    /// A stable id for the extension and its listener, as Graph gives each one.
    package func identifier(tenantID: UUID, _ role: String) -> String {
        UUID(nameBased: "todo-authentication-extension:\(tenantID.uuidString.lowercased()):\(name):\(role)").uuidString.lowercased()
    }

    static let maximumResponseBytes = 64 * 1024

    /// Sends the request envelope with `data` (its `@odata.type` and ids first) and `bearer`, and
    /// reads the answer's first action. No retry: a sign-in waits for one answer only.
    package func call(data: [(String, JSONText)], tenantID: UUID, appID: String, bearer: String) async throws(AuthenticationExtensionFailure)
        -> AuthenticationExtensionAction
    {
        func failure(_ reason: String) -> AuthenticationExtensionFailure { AuthenticationExtensionFailure(name: name, reason: reason) }
        let body = JSONText.object([
            ("type", .string(eventType)), ("source", .string("/tenants/\(tenantID.uuidString.lowercased())/applications/\(appID)")),
            (
                "data",
                .object(
                    [
                        ("@odata.type", .string(calloutDataType)), ("tenantId", .string(tenantID.uuidString.lowercased())),
                        ("authenticationEventListenerId", .string(identifier(tenantID: tenantID, "listener"))),
                        ("customAuthenticationExtensionId", .string(identifier(tenantID: tenantID, "extension"))),
                    ] + data)
            ),
        ])
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        request.body = .bytes(ByteBuffer(string: body.serialized))
        let seconds = timeoutSeconds ?? Self.defaultTimeoutSeconds
        let answer: (status: Int, body: ByteBuffer)
        do {
            let outgoing = request
            answer = try await OutboundURL.withDeadline(seconds: seconds) {
                try await OutboundURL.execute(outgoing, timeout: .seconds(Int64(seconds)), maximumBytes: Self.maximumResponseBytes)
            }
        } catch is OutboundURL.DeadlineExceeded {
            throw failure("no answer within \(seconds) seconds")
        } catch {
            throw failure("unreachable")
        }
        guard answer.status == 200 else { throw failure("it answered HTTP \(answer.status)") }
        guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(buffer: answer.body)),
            case .object(let data)? = object["data"]
        else { throw failure("the answer has no data object") }
        let contract = responseContract
        guard case .string(let dataType)? = data["@odata.type"], dataType.lowercased() == contract.dataType.lowercased() else {
            throw failure("the answer's data is not \(contract.dataType)")
        }
        guard case .array(let actions)? = data["actions"], actions.count == 1, case .object(var action) = actions[0],
            case .string(let type)? = action["@odata.type"], type.lowercased().hasPrefix(contract.actionPrefix.lowercased())
        else { throw failure("the answer needs exactly one \(contract.actionPrefix)… action") }
        action["@odata.type"] = nil
        return AuthenticationExtensionAction(kind: String(type.dropFirst(contract.actionPrefix.count)), members: action)
    }
}
