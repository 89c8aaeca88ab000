import Foundation
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// The test-control surface of the default tenant (SPEC §2.14), once, for its three views: the
/// HTTP endpoints under `/dev` (``DevelopmentEndpoints``), the Swift calls of `TodoB2CTesting`
/// and the tools of `todo-server mcp` (SPEC §6). Refusals are ``ProtocolFailure``s, which the
/// HTTP view answers in B2C's JSON and the others turn into their own errors.
package struct DevelopmentControl: Sendable {
    let server: IdentityServer
    package let tenant: Tenant
    var service: IdentityService { server.service }

    /// The control of `server`'s default tenant, or nil when it has none.
    package static func forDefaultTenant(of server: IdentityServer) async throws -> DevelopmentControl? {
        try await server.service.tenants.defaultTenant().map { DevelopmentControl(server: server, tenant: $0) }
    }

    // MARK: Users and tokens

    /// A local account (email and password) in the default tenant, made as `todo-server users add` makes it.
    package func createUser(email: String, password: String, displayName: String) async throws -> UserAccount {
        try await server.administration.createLocalUser(tenantID: tenant.id, email: email, displayName: displayName, password: password)
    }

    /// The token response a sign-in would give (``IdentityServer/mintTokens(tenantID:_:origin:)``).
    package func mintTokens(_ request: TokenMintRequest, origin: String) async throws -> JSONText {
        try await server.mint(tenantID: tenant.id, request, origin: origin)
    }

    /// Back to the seeded state; returns how many accounts went.
    package func resetAccounts() async throws -> Int { try await server.resetAccounts(tenantID: tenant.id) }

    // MARK: The outbox

    /// The mails sent, newest first (at most `limit`).
    package func outbox(limit: Int = 50) async throws -> [OutboxMessage] {
        try await service.interactions.outbox(tenantID: tenant.id, limit: limit)
    }

    /// `{"messages": [{id, recipient, subject, body, createdAt, code}]}`: `GET /dev/outbox`'s JSON.
    package static func json(_ messages: [OutboxMessage]) -> JSONText {
        let formatter = ISO8601DateFormatter()
        return .object([
            (
                "messages",
                .array(
                    messages.map { message in
                        .object([
                            ("id", .string(message.id)), ("recipient", .string(message.recipient)), ("subject", .string(message.subject)),
                            ("body", .string(message.body)), ("createdAt", .string(formatter.string(from: message.createdAt))),
                            ("code", code(in: message.body).map(JSONText.string) ?? .null),
                        ])
                    })
            )
        ])
    }

    /// The one-time code a message carries: its first run of exactly six digits (B2C's pages)
    /// or eight (External ID's native authentication).
    package static func code(in body: String) -> String? {
        let characters = Array(body)
        var index = 0
        while index < characters.count {
            guard characters[index].isASCII, characters[index].isNumber else {
                index += 1
                continue
            }
            var end = index
            while end < characters.count, characters[end].isASCII, characters[end].isNumber { end += 1 }
            if end - index == 6 || end - index == 8 { return String(characters[index..<end]) }
            index = end
        }
        return nil
    }

    // MARK: Faults

    /// What can be armed: a documented error or a delay on a user flow's next authorize or token
    /// call, or a documented error on a native-authentication endpoint's next call.
    package enum Fault: Sendable, Equatable {
        case error(policy: String, name: String)
        case delay(policy: String, milliseconds: Int)
        case nativeError(endpoint: String, name: String)
    }

    /// The native-authentication endpoints a fault can be armed on.
    package static let nativeEndpoints: Set<String> = [
        "oauth2/v2.0/initiate", "oauth2/v2.0/challenge", "oauth2/v2.0/introspect", "oauth2/v2.0/token", "signup/v1.0/start",
        "signup/v1.0/challenge", "signup/v1.0/continue", "resetpassword/v1.0/start", "resetpassword/v1.0/challenge",
        "resetpassword/v1.0/continue", "resetpassword/v1.0/submit", "resetpassword/v1.0/poll_completion", "register/v1.0/introspect",
        "register/v1.0/challenge", "register/v1.0/continue",
    ]

    /// Arms `fault` once; an unknown flow, endpoint or error name is refused and nothing is armed.
    package func arm(_ fault: Fault) async throws {
        switch fault {
        case .error(let policy, _), .delay(let policy, _): try await requireFlow(policy)
        case .nativeError(let endpoint, _): try Self.requireNativeEndpoint(endpoint)
        }
        try arm(checked: fault)
    }

    /// Arms a fault whose flow or endpoint is known to exist.
    private func arm(checked fault: Fault) throws {
        switch fault {
        case .nativeError(let endpoint, let name):
            guard NativeAuthError.faultNames.contains(name) else {
                throw ProtocolFailure.malformedRequest(
                    "Unknown native-authentication fault '\(TextRules.printable(name))'; known: \(NativeAuthError.faultNames.joined(separator: ", ")).")
            }
            service.faults.arm(.nativeAuth(name), policy: FaultInjector.nativeKey(endpoint))
        case .error(let policy, let name):
            guard let error = FaultInjector.errors[name] else {
                throw ProtocolFailure.malformedRequest(
                    "Unknown fault '\(TextRules.printable(name))'; known: \(FaultInjector.errors.keys.sorted().joined(separator: ", ")).")
            }
            service.faults.arm(.error(error), policy: policy)
        case .delay(let policy, let milliseconds):
            guard (0...60_000).contains(milliseconds) else { throw ProtocolFailure.malformedRequest("delayMs must be 0 to 60000.") }
            service.faults.arm(.delay(milliseconds: milliseconds), policy: policy)
        }
    }

    /// Arms the fault a request's members name (`/dev/faults`' JSON, the MCP tool's arguments):
    /// what it names is checked first, so an unknown flow (AADB2C90037) or endpoint is told
    /// whatever else is wrong with the request; then the members must make one fault.
    package func arm(policy: String?, endpoint: String?, error: String?, delayMs: Int?) async throws {
        if let endpoint {
            try Self.requireNativeEndpoint(endpoint)
            guard policy == nil, delayMs == nil, let error else {
                throw ProtocolFailure.malformedRequest("A native-authentication fault takes 'endpoint' and 'error' only.")
            }
            try arm(checked: .nativeError(endpoint: endpoint, name: error))
            return
        }
        guard let policy else { throw ProtocolFailure.malformedRequest("Give 'policy' (a user flow) or 'endpoint'.") }
        try await requireFlow(policy)
        switch (error, delayMs) {
        case (let name?, nil): try arm(checked: .error(policy: policy, name: name))
        case (nil, let milliseconds?): try arm(checked: .delay(policy: policy, milliseconds: milliseconds))
        default: throw ProtocolFailure.malformedRequest("Give exactly one of 'error' and 'delayMs'.")
        }
    }

    /// Refuses an endpoint no native-authentication fault can be armed on.
    static func requireNativeEndpoint(_ endpoint: String) throws {
        guard nativeEndpoints.contains(endpoint.lowercased()) else {
            throw ProtocolFailure.malformedRequest(
                "Unknown native-authentication endpoint '\(TextRules.printable(endpoint))'; known: \(nativeEndpoints.sorted().joined(separator: ", ")).")
        }
    }

    /// Refuses a name that is not one of the tenant's user flows (AADB2C90037).
    private func requireFlow(_ policy: String) async throws {
        guard UserFlow.isValidName(policy), try await service.tenants.userFlow(tenantID: tenant.id, name: policy) != nil else {
            throw ProtocolFailure.unknownPolicy(policy, tenant: tenant.name)
        }
    }

    package func disarmFaults() { service.faults.clear() }

    // MARK: The clock

    /// The process's protocol clock, where it can be moved (not when the server was given a clock of its own).
    package func clock() throws -> AdjustableClock {
        guard let clock = server.clock as? AdjustableClock else {
            throw ProtocolFailure.malformedRequest("This server's clock is not adjustable (it was given one of its own).")
        }
        return clock
    }

    /// Moves the clock forward; a move backwards or too far is refused and changes nothing.
    package func advanceClock(seconds: Int64) throws -> AdjustableClock {
        let clock = try clock()
        do {
            try clock.advance(bySeconds: seconds)
        } catch {
            throw ProtocolFailure.malformedRequest(error.description)
        }
        return clock
    }

    /// `{now, epochSeconds, offsetSeconds}`: `/dev/clock`'s JSON.
    package static func json(_ clock: AdjustableClock) -> JSONText {
        let now = clock.now
        return .object([
            ("now", .string(ISO8601DateFormatter().string(from: now))), ("epochSeconds", .int(now.epochSeconds)),
            ("offsetSeconds", .int(clock.offsetSeconds)),
        ])
    }

    // MARK: Journey traces

    /// The sign-ins a request with `correlationID` started, with their traces (SPEC §2.12).
    package func journeys(correlationID: String) async throws -> [(policy: String, startedAt: Date, state: JourneyState)] {
        try await service.interactions.journeys(tenantID: tenant.id, correlationID: correlationID)
    }

    /// `GET /dev/journeys/{id}`'s JSON, or nil when no sign-in was started with that id.
    package func journeyTrace(correlationID: String) async throws -> JSONText? {
        let journeys = try await journeys(correlationID: correlationID)
        return journeys.isEmpty ? nil : Self.traceJSON(correlationID: correlationID, journeys: journeys)
    }

    /// Each orchestration step or technical profile run, its result, the claims it changed, its
    /// time and the error it ended with.
    package static func traceJSON(correlationID: String, journeys: [(policy: String, startedAt: Date, state: JourneyState)]) -> JSONText {
        let formatter = ISO8601DateFormatter()
        return JSONText.object([
            ("correlationId", .string(correlationID.lowercased())),
            (
                "journeys",
                .array(
                    journeys.map { journey in
                        .object([
                            ("policy", .string(journey.policy)), ("startedAt", .string(formatter.string(from: journey.startedAt))),
                            (
                                "steps",
                                .array(
                                    journey.state.trace.map { entry in
                                        .object([
                                            ("step", .string(entry.step)), ("result", .string(entry.result.rawValue)),
                                            ("claims", .array(entry.claims.map(JSONText.string))),
                                            ("values", .object((entry.values ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
                                            ("milliseconds", .int(Int64(entry.milliseconds))),
                                            ("error", entry.error.map(JSONText.string) ?? .null), ("at", .string(formatter.string(from: entry.at))),
                                        ])
                                    })
                            ),
                        ])
                    })
            ),
        ])
    }
}
