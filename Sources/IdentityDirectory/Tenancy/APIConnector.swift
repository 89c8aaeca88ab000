import AsyncHTTPClient
import Foundation
import ServerSupport
import Hummingbird
import Logging
import NIOCore
import Storage
import TodoModels
import WireCoding

/// A tenant's API connector (SPEC §2.11; B2C's "API connectors"): a REST endpoint a flow calls
/// at a step of sign-up with the user's attributes, and whose answer lets the flow continue
/// (with attribute overrides), blocks it with a page, or sends the person back to the form.
/// Unlike the cloud, a connector may be plain `http://` on loopback.
public struct APIConnector: Sendable, Codable, Equatable {
    public enum Authentication: String, Sendable, Codable, CaseIterable {
        case none, basic, bearer
    }

    public var name: String
    public var url: String
    public var auth: Authentication
    public var username: String?
    /// Basic authentication's password, sealed with the data key at rest.
    public var password: String?
    /// A bearer token, sealed with the data key at rest.
    public var token: String?
    /// B2C waits 20 seconds and then tries once more; a test may ask for less.
    public var timeoutSeconds: Int?

    public init(
        name: String, url: String, auth: Authentication = .none, username: String? = nil, password: String? = nil, token: String? = nil,
        timeoutSeconds: Int? = nil
    ) {
        self.name = name
        self.url = url
        self.auth = auth
        self.username = username
        self.password = password
        self.token = token
        self.timeoutSeconds = timeoutSeconds
    }

    static let defaultTimeoutSeconds = 20

    /// The sealing context of a secret of this connector, bound to its tenant and name.
    static func sealingContext(tenantID: UUID, name: String, field: String) -> String {
        "tenants.settings.apiConnectors:\(tenantID.uuidString.lowercased()):\(name):\(field)"
    }

    /// What is wrong with it, for the declaration's one-line errors.
    func problems() -> [String] {
        var problems: [String] = []
        if (try? TextRules.name(name, maximumLength: 128).get()) != name {
            problems.append("API connector name '\(TextRules.printable(name))' is not valid")
        }
        if !OutboundURL.isAllowed(url) {
            problems.append("API connector '\(name)': url must be https (or http on loopback) without credentials")
        }
        switch auth {
        case .none: break
        case .basic:
            if username == nil || password == nil { problems.append("API connector '\(name)': basic auth needs username and password") }
        case .bearer: if token == nil { problems.append("API connector '\(name)': bearer auth needs a token") }
        }
        if let seconds = timeoutSeconds, !(1...60).contains(seconds) {
            problems.append("API connector '\(name)': timeoutSeconds must be 1 to 60")
        }
        return problems
    }
}

/// Which connector a flow calls at each of B2C's three steps (by name).
public struct FlowConnectors: Sendable, Codable, Equatable {
    public var afterFederatingIdentityProvider: String?
    public var beforeCreatingUser: String?
    public var beforeSendingToken: String?

    public init(afterFederatingIdentityProvider: String? = nil, beforeCreatingUser: String? = nil, beforeSendingToken: String? = nil) {
        self.afterFederatingIdentityProvider = afterFederatingIdentityProvider
        self.beforeCreatingUser = beforeCreatingUser
        self.beforeSendingToken = beforeSendingToken
    }

    var names: [String] { [afterFederatingIdentityProvider, beforeCreatingUser, beforeSendingToken].compactMap { $0 } }
    var isEmpty: Bool { names.isEmpty }
}

/// The `step` values B2C sends.
package enum ConnectorStep: String, Sendable {
    case postFederationSignup = "PostFederationSignup"
    case postAttributeCollection = "PostAttributeCollection"
    /// "Before sending the token (preview)" in B2C's list of step values.
    case preTokenIssuance = "PreTokenIssuance"
}

/// What a connector answered.
package enum ConnectorOutcome: Sendable, Equatable {
    /// `Continue`, with the attributes it sets (account keys: `givenName`, `extension_{name}`, …,
    /// and `displayName`), already checked by each attribute's rule.
    case proceed(overrides: [String: String])
    /// `ShowBlockPage`: the flow stops on a page showing the message.
    case block(userMessage: String)
    /// `ValidationError` (HTTP 400): the form again, with the message.
    case validationError(userMessage: String)
}

/// A connector that failed: no answer in time (after one retry), or an answer that is none of
/// B2C's three. The flow ends with AADB2C90075, naming the connector, the step, and why.
package struct ConnectorFailure: Error, Sendable, Equatable {
    var connector: String
    var step: ConnectorStep
    var code: String
    package var reason: String

    package var b2cError: ProtocolFailure { .connectorFailed(self) }

    package init(
        connector: String,
        step: ConnectorStep,
        code: String,
        reason: String
    ) {
        self.connector = connector
        self.step = step
        self.code = code
        self.reason = reason
    }
}

/// The user a connector is told about: B2C's body, Graph-style names.
package struct ConnectorSubject: Sendable {
    var email: String?
    /// `signInType`, `issuer`, `issuerAssignedId`.
    var identities: [(signInType: String, issuer: String, issuerAssignedId: String)]
    var displayName: String?
    var objectID: String?
    /// Account keys: built-in attribute names and `extension_{name}`.
    var attributes: [String: String]

    package init(
        email: String? = nil,
        identities: [(signInType: String, issuer: String, issuerAssignedId: String)],
        displayName: String? = nil,
        objectID: String? = nil,
        attributes: [String: String]
    ) {
        self.email = email
        self.identities = identities
        self.displayName = displayName
        self.objectID = objectID
        self.attributes = attributes
    }
}

/// Calls connectors over HTTP (AsyncHTTPClient, redirects not followed).
package struct ConnectorCaller: Sendable {
    /// The flow's "before sending the token" connector (step `PreTokenIssuance`), wherever a
    /// sign-in ends in tokens (the hosted pages, and password sign-in on the Entra face): its
    /// `Continue` values, or the failure that ends the sign-in (a block page or a validation
    /// error is no answer at this step).
    package func tokenClaimOverrides(
        flow: UserFlow, user: UserAccount, tenant: Tenant, clientID: String, uiLocales: String?, logger: Logger
    ) async -> Result<[String: String], ConnectorFailure> {
        guard let name = flow.connectors.beforeSendingToken else { return .success([:]) }
        guard let connector = tenant.apiConnectors.first(where: { $0.name == name }) else {
            return .failure(
                ConnectorFailure(connector: name, step: .preTokenIssuance, code: "Configuration", reason: "no API connector of that name"))
        }
        var identities = [(signInType: String, issuer: String, issuerAssignedId: String)]()
        if user.identityProvider == .local {
            identities.append(("emailAddress", tenant.name, user.email ?? user.signInName))
        } else {
            identities.append(("federated", user.identityProvider.rawValue, user.signInName))
        }
        let subject = ConnectorSubject(
            email: user.email, identities: identities, displayName: user.displayName, objectID: user.objectID, attributes: user.attributes)
        do {
            switch try await call(
                connector, step: .preTokenIssuance, subject: subject, tenant: tenant, clientID: clientID, uiLocales: uiLocales)
            {
            case .proceed(let overrides):
                logger.info("API connector answered", metadata: ["connector": "\(name)", "step": "PreTokenIssuance"])
                return .success(overrides)
            case .block, .validationError:
                return .failure(
                    ConnectorFailure(
                        connector: name, step: .preTokenIssuance, code: "200", reason: "only Continue is an answer at this step"))
            }
        } catch {
            logger.warning("API connector failed", metadata: ["connector": "\(name)", "reason": "\(error.reason)"])
            return .failure(error)
        }
    }

    let dataKey: DataKey

    static let maximumResponseBytes = 64 * 1024

    package func call(
        _ connector: APIConnector, step: ConnectorStep, subject: ConnectorSubject, tenant: Tenant, clientID: String, uiLocales: String?
    ) async throws(ConnectorFailure) -> ConnectorOutcome {
        func failure(_ code: String, _ reason: String) -> ConnectorFailure {
            ConnectorFailure(connector: connector.name, step: step, code: code, reason: reason)
        }
        var request = HTTPClientRequest(url: connector.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        do {
            switch connector.auth {
            case .none: break
            case .basic:
                let password = try connector.password.map {
                    try dataKey.open($0, context: APIConnector.sealingContext(tenantID: tenant.id, name: connector.name, field: "password"))
                        .value
                }
                let pair = "\(connector.username ?? ""):\(password ?? "")"
                request.headers.add(name: "Authorization", value: "Basic \(Data(pair.utf8).base64EncodedString())")
            case .bearer:
                let token = try connector.token.map {
                    try dataKey.open($0, context: APIConnector.sealingContext(tenantID: tenant.id, name: connector.name, field: "token"))
                        .value
                }
                request.headers.add(name: "Authorization", value: "Bearer \(token ?? "")")
            }
        } catch {
            throw failure("Configuration", "its credentials cannot be opened with this data key")
        }
        let body = Self.body(step: step, subject: subject, tenant: tenant, clientID: clientID, uiLocales: uiLocales)
        let timeout = TimeAmount.seconds(Int64(connector.timeoutSeconds ?? APIConnector.defaultTimeoutSeconds))
        // As B2C does: when no answer comes, one more attempt.
        var lastError = "no answer"
        for _ in 0..<2 {
            request.body = .bytes(ByteBuffer(string: body.serialized))
            let answer: (status: Int, body: ByteBuffer)
            do {
                answer = try await OutboundTrace.call("POST api-connector", host: URL(string: connector.url)?.host) { trace in
                    var outgoing = request
                    outgoing.headers.add(contentsOf: trace)
                    return try await OutboundURL.withDeadline(seconds: connector.timeoutSeconds ?? APIConnector.defaultTimeoutSeconds) {
                        [outgoing] in
                        try await OutboundURL.execute(outgoing, timeout: timeout, maximumBytes: Self.maximumResponseBytes)
                    }
                }
            } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
                lastError = "timed out after \(connector.timeoutSeconds ?? APIConnector.defaultTimeoutSeconds) seconds"
                continue
            } catch is OutboundURL.DeadlineExceeded {
                lastError = "timed out after \(connector.timeoutSeconds ?? APIConnector.defaultTimeoutSeconds) seconds"
                continue
            } catch {
                lastError = "unreachable"
                continue
            }
            return try Self.outcome(status: answer.status, body: Data(buffer: answer.body), tenant: tenant, failure: failure)
        }
        throw failure("RequestTimeout", lastError)
    }

    /// B2C's request body: `email`, `identities`, `displayName`, `objectId`, the attributes
    /// under their Graph names, `step`, `client_id`, `ui_locales`; a claim without a value is
    /// left out.
    static func body(step: ConnectorStep, subject: ConnectorSubject, tenant: Tenant, clientID: String, uiLocales: String?) -> JSONText {
        var members: [(String, JSONText)] = []
        if let email = subject.email { members.append(("email", .string(email))) }
        members.append(
            (
                "identities",
                .array(
                    subject.identities.map {
                        .object([
                            ("signInType", .string($0.signInType)), ("issuer", .string($0.issuer)),
                            ("issuerAssignedId", .string($0.issuerAssignedId)),
                        ])
                    })
            ))
        if let name = subject.displayName { members.append(("displayName", .string(name))) }
        if let id = subject.objectID { members.append(("objectId", .string(id))) }
        for attribute in UserAttribute.allCases where attribute != .displayName {
            if let value = subject.attributes[attribute.rawValue] { members.append((attribute.rawValue, .string(value))) }
        }
        for attribute in tenant.userAttributes {
            if let value = subject.attributes[attribute.claimName].flatMap(attribute.json) {
                members.append((attribute.graphName(extensionsAppID: tenant.extensionsAppID), value))
            }
        }
        members.append(("step", .string(step.rawValue)))
        members.append(("client_id", .string(clientID)))
        members.append(("ui_locales", .string(uiLocales ?? "en-US")))
        return .object(members)
    }

    /// Reads one of B2C's three answers; anything else is a failure.
    static func outcome(status: Int, body: Data, tenant: Tenant, failure: (String, String) -> ConnectorFailure) throws(ConnectorFailure)
        -> ConnectorOutcome
    {
        guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: body) else {
            throw failure(String(status), "the response is not a JSON object")
        }
        func text(_ key: String) -> String? { if case .string(let value)? = object[key] { value } else { nil } }
        let action = text("action") ?? ""
        switch (status, action) {
        case (200, "Continue"):
            var overrides: [String: String] = [:]
            for (key, value) in object where !["version", "action", "email"].contains(key) {
                guard let (accountKey, stored) = try attribute(key, value, tenant: tenant, failure: { failure(String(status), $0) }) else {
                    continue
                }
                overrides[accountKey] = stored
            }
            return .proceed(overrides: overrides)
        case (200, "ShowBlockPage"):
            guard let message = text("userMessage"), !message.isEmpty else { throw failure("200", "ShowBlockPage without a userMessage") }
            return .block(userMessage: String(message.prefix(1024)))
        case (400, "ValidationError"):
            let declared: Bool
            switch object["status"] {
            case .number(400)?: declared = true
            case .string("400")?: declared = true
            default: declared = false
            }
            guard declared, let message = text("userMessage"), !message.isEmpty else {
                throw failure("400", "a ValidationError needs status 400 and a userMessage")
            }
            return .validationError(userMessage: String(message.prefix(1024)))
        default:
            throw failure(
                String(status), action.isEmpty ? "the response has no action" : "unexpected action '\(TextRules.printable(action))'")
        }
    }

    /// A returned claim as an account value: a built-in attribute (or `displayName`) as text, or
    /// a custom attribute under `extension_{appId}_{name}` or `extension_{name}` with its type.
    /// Claims that are no user attribute are ignored, as B2C ignores them; a value that breaks
    /// the attribute's rule fails the connector.
    private static func attribute(
        _ key: String, _ value: JSONValue, tenant: Tenant, failure: (String) -> ConnectorFailure
    ) throws(ConnectorFailure) -> (String, String)? {
        if key == "displayName" || UserAttribute(rawValue: key) != nil {
            let attribute = UserAttribute(rawValue: key) ?? .displayName
            guard case .string(let text) = value, case .success(let valid) = attribute.validate(text), !valid.isEmpty else {
                throw failure("returned an invalid value for '\(key)'")
            }
            return (attribute.rawValue, valid)
        }
        let appID = tenant.extensionsAppID.uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        for custom in tenant.userAttributes {
            guard
                key.lowercased() == custom.graphName(extensionsAppID: tenant.extensionsAppID).lowercased()
                    || key.lowercased() == custom.claimName.lowercased()
                    || key.lowercased() == "extension_\(appID)_\(custom.name)".lowercased()
            else { continue }
            switch custom.storedValue(fromJSON: value) {
            case .success(let stored?): return (custom.claimName, stored)
            case .success(nil): return nil
            case .failure: throw failure("returned an invalid value for '\(key)'")
            }
        }
        return nil
    }

    package init(dataKey: DataKey) {
        self.dataKey = dataKey
    }
}
