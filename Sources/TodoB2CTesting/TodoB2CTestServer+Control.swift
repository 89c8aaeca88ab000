import Foundation
import IdentityDirectory
import IdentityServer
import WireCoding

/// A local account made by ``TodoB2CTestServer/createUser(email:password:displayName:)``.
public struct TestUser: Sendable, Equatable {
    /// The object id: the tokens' `oid` and `sub`.
    public let id: UUID
    public let email: String
    public let password: String
    public let displayName: String
}

/// A token response from the real issuer, as a sign-in gives it.
public struct TestTokens: Sendable, Codable, Equatable {
    public let accessToken: String?
    public let idToken: String?
    public let refreshToken: String?
    public let expiresIn: Int?
    public let scope: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token", idToken = "id_token", refreshToken = "refresh_token", expiresIn = "expires_in", scope
    }
}

/// One mail of the development outbox.
public struct TestMail: Sendable, Equatable {
    public let recipient: String
    public let subject: String
    public let body: String
    /// The one-time code it carries (six digits, or eight for native authentication), if any.
    public let code: String?
    public let sentAt: Date
}

extension TodoB2CTestServer {
    // MARK: Users and tokens

    /// A local account (email and password) in the default tenant.
    @discardableResult
    public func createUser(email: String, password: String = "Passw0rd!", displayName: String = "Test User") async throws -> TestUser {
        let account = try await refusals { try await control.createUser(email: email, password: password, displayName: displayName) }
        return TestUser(id: account.id, email: email, password: password, displayName: displayName)
    }

    /// Tokens for `user` (an email or object id) without a browser, from the real issuer: the
    /// keys, claims and refresh-token family of a sign-in through `policy` (else the tenant's
    /// default flow). `scopes` default to `openid offline_access {client}`; `claims` are added
    /// to both tokens (not `iss`, `aud` or the times).
    public func tokens(
        for user: String, client: String? = nil, policy: String? = nil, scopes: [String]? = nil, claims: [String: String] = [:]
    ) async throws -> TestTokens {
        let request = TokenMintRequest(
            user: user, client: client ?? clientID, policy: policy, scope: scopes?.joined(separator: " "),
            claims: claims.isEmpty ? nil : claims.mapValues(JSONValue.string))
        let response = try await refusals { try await control.mintTokens(request, origin: identityURL.absoluteString) }
        return try JSONDecoder().decode(TestTokens.self, from: Data(response.utf8))
    }

    /// Every account and what hangs off it, the outbox and the armed faults gone; the tenant,
    /// its flows, apps and keys stay. Returns how many accounts went.
    @discardableResult
    public func resetAccounts() async throws -> Int { try await refusals { try await control.resetAccounts() } }

    // MARK: The outbox

    /// The mails sent (verification and reset codes), newest first.
    public func outbox() async throws -> [TestMail] {
        try await control.outbox().map {
            TestMail(recipient: $0.recipient, subject: $0.subject, body: $0.body, code: DevelopmentControl.code(in: $0.body), sentAt: $0.createdAt)
        }
    }

    /// The code of the newest mail to `email` that carries one.
    public func latestCode(for email: String) async throws -> String? {
        try await outbox().first { $0.recipient.caseInsensitiveCompare(email) == .orderedSame && $0.code != nil }?.code
    }

    // MARK: Faults

    /// The next authorize or token call on `policy` answers `error` (`AADB2C90118`,
    /// `AADB2C90091`, `server_error`, …) once, in B2C's form.
    public func failNext(policy: String, error: String) async throws {
        try await refusals { try await control.arm(.error(policy: policy, name: error)) }
    }

    /// The next authorize or token call on `policy` waits `milliseconds` (0 to 60 000) first.
    public func delayNext(policy: String, milliseconds: Int) async throws {
        try await refusals { try await control.arm(.delay(policy: policy, milliseconds: milliseconds)) }
    }

    /// The next call to a native-authentication endpoint (`signup/v1.0/start`, …) answers its
    /// documented `error` (`user_already_exists`, …) once.
    public func failNext(nativeEndpoint: String, error: String) async throws {
        try await refusals { try await control.arm(.nativeError(endpoint: nativeEndpoint, name: error)) }
    }

    public func clearFaults() { control.disarmFaults() }

    // MARK: The HTTP surface's shapes, for the other views (the MCP tools)

    /// The fault a request's members name, checked and armed as `POST /dev/faults` does.
    package func arm(policy: String?, endpoint: String?, error: String?, delayMs: Int?) async throws {
        try await refusals { try await control.arm(policy: policy, endpoint: endpoint, error: error, delayMs: delayMs) }
    }

    /// `GET /dev/outbox`'s JSON, only the mails to `recipient` when one is given.
    package func outboxJSON(recipient: String? = nil) async throws -> String {
        let messages = try await control.outbox().filter { message in
            recipient.map { message.recipient.caseInsensitiveCompare($0) == .orderedSame } ?? true
        }
        return DevelopmentControl.json(messages).serialized
    }

    /// `/dev/clock`'s JSON: `{now, epochSeconds, offsetSeconds}`.
    package func clockJSON() throws -> String { try refusals { DevelopmentControl.json(try control.clock()).serialized } }

    // MARK: The clock

    /// The identity service's and the Task API's time.
    public var now: Date { get throws { try refusals { try control.clock().now } } }

    /// Moves time forward for the issuer, sessions, codes and the Task API's validator: a token
    /// expires without sleeping. Only forward.
    public func advanceClock(bySeconds seconds: Int64) throws {
        _ = try refusals { try control.advanceClock(seconds: seconds) }
    }

    /// Back to the wall clock.
    public func resetClock() throws { try refusals { try control.clock().reset() } }

    // MARK: Journey traces

    /// The developer trace (JSON) of the sign-ins a request with this `client-request-id`
    /// started: each step, its result and claims; nil when none was.
    public func journeyTrace(correlationID: String) async throws -> String? {
        try await control.journeyTrace(correlationID: correlationID)?.serialized
    }

    // MARK: Refusals

    private func refusals<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let failure as ProtocolFailure {
            throw TodoB2CTestError(code: failure.code, message: failure.message)
        } catch let failure as IdentityAdministration.AdministrationError {
            throw TodoB2CTestError(code: "invalid_request", message: failure.description)
        }
    }

    private func refusals<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let failure as ProtocolFailure {
            throw TodoB2CTestError(code: failure.code, message: failure.message)
        }
    }
}
