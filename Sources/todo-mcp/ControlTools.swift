import Foundation
import MCP
import TodoB2CTesting

/// The tools: each is one call of ``TodoB2CTestServer``; a refusal is a tool error (`isError`)
/// carrying the server's code and message, so an agent reads why.
struct ControlTools: Sendable {
    let system: TodoB2CTestServer

    static func schema(_ properties: [String: (type: String, description: String)], required: [String] = []) -> Value {
        .object([
            "type": "object",
            "properties": .object(properties.mapValues { .object(["type": .string($0.type), "description": .string($0.description)]) }),
            "required": .array(required.map(Value.string)),
            "additionalProperties": false,
        ])
    }

    static let catalog: [Tool] = [
        Tool(name: "system_info", description: "The running system: identity and API URLs, tenant, public client id, authorities of its user flows.",
             inputSchema: schema([:])),
        Tool(name: "create_user", description: "Create a local account (email and password) in the default tenant.",
             inputSchema: schema([
                "email": ("string", "The sign-in address."), "password": ("string", "Its password (default Passw0rd!)."),
                "displayName": ("string", "Its display name."),
             ], required: ["email"])),
        Tool(name: "mint_tokens", description: "Tokens for a user without a browser, from the real issuer (id, access and refresh tokens).",
             inputSchema: schema([
                "user": ("string", "Email or object id."), "client": ("string", "The app's client id (default: the public client)."),
                "policy": ("string", "The user flow (default: the tenant's)."), "scope": ("string", "Space-separated scopes."),
             ], required: ["user"])),
        Tool(name: "read_outbox", description: "The mails sent (verification and reset codes), newest first, each with its code.",
             inputSchema: schema(["recipient": ("string", "Only mails to this address.")])),
        Tool(name: "inject_fault", description: "Make the next call fail once: a user flow's authorize or token call (policy + error, or policy + delayMs), or a native-authentication endpoint (endpoint + error).",
             inputSchema: schema([
                "policy": ("string", "A user flow, such as B2C_1_susi."), "endpoint": ("string", "A native-authentication endpoint, such as signup/v1.0/start."),
                "error": ("string", "AADB2C90118, AADB2C90091, server_error, … (native: user_already_exists, …)."),
                "delayMs": ("integer", "Wait this long first instead (0 to 60000)."),
             ])),
        Tool(name: "clear_faults", description: "Disarm every injected fault.", inputSchema: schema([:])),
        Tool(name: "advance_clock", description: "Move the identity service's and the Task API's time forward: tokens and codes expire without waiting.",
             inputSchema: schema(["seconds": ("integer", "Seconds forward (not negative).")], required: ["seconds"])),
        Tool(name: "reset_clock", description: "Back to the wall clock.", inputSchema: schema([:])),
        Tool(name: "read_journey_trace", description: "The step-by-step trace of the sign-ins a request started, by its client-request-id.",
             inputSchema: schema(["correlationId": ("string", "The client-request-id (correlation id) of the authorize request.")], required: ["correlationId"])),
        Tool(name: "reset_accounts", description: "Back to the seeded tenant: every account, the outbox and the faults gone.", inputSchema: schema([:])),
    ]

    func call(_ name: String, _ arguments: [String: Value]) async -> CallTool.Result {
        do {
            return Self.answer(try await run(name, arguments))
        } catch let refusal as TodoB2CTestError {
            return .init(content: [.text(text: refusal.description, annotations: nil, _meta: nil)], isError: true)
        } catch {
            return .init(content: [.text(text: "\(error)", annotations: nil, _meta: nil)], isError: true)
        }
    }

    private func run(_ name: String, _ arguments: [String: Value]) async throws -> Value {
        func text(_ key: String) -> String? { arguments[key]?.stringValue }
        func required(_ key: String) throws -> String {
            guard let value = text(key), !value.isEmpty else { throw TodoB2CTestError(code: "invalid_request", message: "'\(key)' is required.") }
            return value
        }
        switch name {
        case "system_info":
            let flows = ["B2C_1_susi", "B2C_1_sign_up", "B2C_1_sign_in", "B2C_1_ROPC", "B2C_1_reset", "B2C_1_edit_profile"]
            return .object([
                "identityUrl": .string(system.identityURL.absoluteString), "apiUrl": .string(system.apiURL.absoluteString),
                "tenant": .string(system.tenant), "clientId": .string(system.clientID),
                "authorities": .object(Dictionary(uniqueKeysWithValues: flows.map { ($0, Value.string(system.authority(policy: $0).absoluteString)) })),
                "entraAuthority": .string(system.identityURL.appendingPathComponent(system.tenant).absoluteString),
            ])
        case "create_user":
            let user = try await system.createUser(
                email: try required("email"), password: text("password") ?? "Passw0rd!", displayName: text("displayName") ?? "Test User")
            return .object(["id": .string(user.id.uuidString.lowercased()), "email": .string(user.email)])
        case "mint_tokens":
            let tokens = try await system.tokens(
                for: try required("user"), client: text("client"), policy: text("policy"), scopes: text("scope").map { [$0] })
            return try Value(tokens)
        case "read_outbox":
            return try Self.value(try await system.outboxJSON(recipient: text("recipient")))
        case "inject_fault":
            try await system.arm(policy: text("policy"), endpoint: text("endpoint"), error: text("error"), delayMs: arguments["delayMs"]?.intValue)
            return .object(["armed": true])
        case "clear_faults":
            system.clearFaults()
            return .object(["cleared": true])
        case "advance_clock":
            guard let seconds = arguments["seconds"]?.intValue else {
                throw TodoB2CTestError(code: "invalid_request", message: "'seconds' is required (a whole number).")
            }
            try system.advanceClock(bySeconds: Int64(seconds))
            return try Self.value(try system.clockJSON())
        case "reset_clock":
            try system.resetClock()
            return try Self.value(try system.clockJSON())
        case "read_journey_trace":
            guard let trace = try await system.journeyTrace(correlationID: try required("correlationId")) else {
                throw TodoB2CTestError(code: "not_found", message: "No sign-in was started with that correlation id.")
            }
            return try Self.value(trace)
        case "reset_accounts":
            let removed = try await system.resetAccounts()
            return .object(["accountsRemoved": .int(removed)])
        default:
            throw TodoB2CTestError(code: "unknown_tool", message: "No tool is called '\(name)'.")
        }
    }

    /// JSON text the HTTP surface would answer, as the SDK's value.
    private static func value(_ json: String) throws -> Value { try JSONDecoder().decode(Value.self, from: Data(json.utf8)) }

    /// The result as JSON text (what every client shows) and as structured content.
    private static func answer(_ value: Value) -> CallTool.Result {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let text = (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return CallTool.Result(content: [.text(text: text, annotations: nil, _meta: nil)], structuredContent: Optional<Value>.some(value), isError: false)
    }
}
