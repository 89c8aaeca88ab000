import Foundation
import IdentityDirectory
import SQLKit
import Storage
import WireCoding

/// Server-side state of interactive sign-ins: transactions, SSO sessions, email verification
/// codes, the dev outbox, the simulated provider's codes and server-held keys.
package protocol InteractionStore: ServerSecrets {
    /// Stores a new transaction unless `clientAddress` started `limitPerHour` in the last hour
    /// already; false then.
    func saveInteraction(
        id: String, request: AuthorizationRequest, csrfHash: String, clientAddress: String, limitPerHour: Int, now: Date,
        expiresAt: Date
    ) async throws -> Bool
    func interaction(id: String) async throws -> InteractionRecord?
    /// Marks the transaction complete; false if it already was (each transaction yields one result).
    func completeInteraction(id: String, now: Date) async throws -> Bool
    /// Saves the journey's state if it is still at `revision` (and not completed); false when
    /// another request moved it first.
    func saveJourney(id: String, state: JourneyState, revision: Int64) async throws -> Bool
    /// Keeps the final state (its trace) of a completed transaction.
    func saveFinalJourney(id: String, state: JourneyState) async throws
    /// Keeps, sealed, the parameters a completed transaction sent the app.
    func saveAnswer(id: String, parameters: [(String, String)]) async throws
    /// The parameters a completed transaction sent the app, if they were kept.
    func answer(id: String) async throws -> [(String, String)]?
    /// Runs `work` as one transaction: a completion, its code and its answer are stored
    /// together or not at all.
    func atomically<T>(_ work: () async throws -> T) async throws -> T
    /// The journeys of `tenantID` that a request with `correlationID` started: their policy and
    /// state, newest first (the developer trace, `/dev/journeys/{correlationId}`).
    func journeys(tenantID: UUID, correlationID: String) async throws -> [(policy: String, startedAt: Date, state: JourneyState)]

    func saveSession(idHash: String, session: SSOSession, now: Date) async throws
    func session(idHash: String, now: Date) async throws -> SSOSession?
    func deleteSession(idHash: String) async throws

    /// Saves a code sent for the canonical address `email`: of the account `userID` (a reset),
    /// or of no account yet (sign-up); `mail`, the message carrying it, goes to the outbox in
    /// the same transaction.
    /// Refused (`false`: nothing saved, nothing mailed) beyond `limits`' sends to the address
    /// in its window.
    func saveVerificationCode(
        interactionID: String, tenantID: UUID, email: String, userID: UUID?, code: String, expiresAt: Date, mail: OutboxMessage?,
        limits: CodeLimits, now: Date
    ) async throws -> Bool
    /// Checks a code for the canonical address `email`. After 5 wrong tries the code is void
    /// (AADB2C90157-style retry limit); beyond `limits`' wrong codes for the address in its
    /// window, across transactions, no code proves anything until the window has passed.
    func checkVerificationCode(
        interactionID: String, tenantID: UUID, email: String, code: String, limits: CodeLimits, now: Date
    ) async throws -> CodeCheck

    func outbox(tenantID: UUID, limit: Int) async throws -> [OutboxMessage]

    func saveFederationCode(_ code: String, interactionID: String, identity: FederatedIdentity, expiresAt: Date) async throws
    func takeFederationCode(_ code: String, now: Date) async throws -> (interactionID: String, identity: FederatedIdentity)?

    func sweep(now: Date) async throws
    /// Forgets the tenant's transient state: transactions and their codes, the outbox, and the
    /// lockout of names without an account (the test-control surface's reset).
    func clearTenantState(tenantID: UUID) async throws
}

/// What a presented verification code proved.
package enum CodeCheck: Equatable {
    /// Wrong, expired, void after too many tries, or for another address.
    case refused
    /// Too many wrong codes for this address lately, in any transaction: not even checked.
    case throttled
    /// The address is proven; the code was bound to `account` (nil: a sign-up code).
    case proves(account: UUID?)
}

package struct SQLInteractionStore: InteractionStore {
    let database: any Database
    /// Seals `server_secrets` values (the security issue's M-6).
    let dataKey: DataKey

    struct InteractionRow: Codable {
        var id: String
        var tenantId: String
        var policy: String
        var parameters: String
        var csrfHash: String
        var createdAt: Int64
        var expiresAt: Int64
        var completedAt: Int64?
        var clientAddress: String?
        package var journey: String?
        var journeyRevision: Int64
    }

    package func saveInteraction(
        id: String, request: AuthorizationRequest, csrfHash: String, clientAddress: String, limitPerHour: Int, now: Date,
        expiresAt: Date
    ) async throws -> Bool {
        let row = InteractionRow(
            id: id, tenantId: request.tenantID.uuidString.lowercased(), policy: request.policy,
            parameters: StoredJSON.encode(request), csrfHash: csrfHash, createdAt: now.epochSeconds,
            expiresAt: expiresAt.epochSeconds, completedAt: nil, clientAddress: clientAddress,
            journey: StoredJSON.encode(JourneyState()), journeyRevision: 0)
        return try await database.transaction { sql in
            let recent =
                try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("authorization_requests")
                .where("client_address", .equal, clientAddress).where("created_at", .greaterThan, now.epochSeconds - 3600)
                .first(decodingColumn: "n", as: Int.self) ?? 0
            guard recent < limitPerHour else { return false }
            try await sql.insert(into: "authorization_requests").model(row, with: .snakeCase).run()
            return true
        }
    }

    package func interaction(id: String) async throws -> InteractionRecord? {
        guard
            let row = try await database.read({ sql in
                try await sql.select().columns("*").from("authorization_requests").where("id", .equal, id)
                    .first(decoding: InteractionRow.self, with: .snakeCase)
            }), let request = StoredJSON.decode(AuthorizationRequest.self, row.parameters)
        else { return nil }
        return InteractionRecord(
            id: row.id, request: request, csrfHash: row.csrfHash, expiresAt: Date(epoch: row.expiresAt),
            completedAt: row.completedAt.map(Date.init(epoch:)),
            // A journey that cannot be read (a transaction from before journeys) starts again.
            journey: row.journey.flatMap { StoredJSON.decode(JourneyState.self, $0) } ?? JourneyState(),
            journeyRevision: row.journeyRevision)
    }

    package func completeInteraction(id: String, now: Date) async throws -> Bool {
        // One conditional UPDATE, so two concurrent submissions cannot both complete it.
        try await database.transaction { sql in
            let rows = try await sql.raw(
                "UPDATE authorization_requests SET completed_at = \(bind: now.epochSeconds) WHERE id = \(bind: id) AND completed_at IS NULL RETURNING id"
            ).all()
            return !rows.isEmpty
        }
    }

    package func saveAnswer(id: String, parameters: [(String, String)]) async throws {
        let sealed = try dataKey.seal(FormEncoding.encode(parameters), context: Self.answerContext(id))
        try await database.singleStatement { sql in
            try await sql.update("authorization_requests").set("sealed_answer", to: sealed).where("id", .equal, id).run()
        }
    }

    package func answer(id: String) async throws -> [(String, String)]? {
        let rows = try await database.rows("SELECT sealed_answer FROM authorization_requests WHERE id = ?", [.text(id)])
        guard let sealed = try rows.first?.optionalText("sealed_answer") else { return nil }
        return FormEncoding.decode(try dataKey.open(sealed, context: Self.answerContext(id)).value)
    }

    /// Binds a sealed answer to its transaction: one cannot be moved to another's row.
    private static func answerContext(_ id: String) -> String { "authorization_requests.sealed_answer:\(id)" }

    package func atomically<T>(_ work: () async throws -> T) async throws -> T { try await database.atomically(work) }

    package func saveJourney(id: String, state: JourneyState, revision: Int64) async throws -> Bool {
        let text = StoredJSON.encode(state)
        return try await database.transaction { sql in
            let rows = try await sql.raw(
                """
                UPDATE authorization_requests SET journey = \(bind: text), journey_revision = journey_revision + 1
                WHERE id = \(bind: id) AND journey_revision = \(bind: revision) AND completed_at IS NULL RETURNING id
                """
            ).all()
            return !rows.isEmpty
        }
    }

    package func saveFinalJourney(id: String, state: JourneyState) async throws {
        let text = StoredJSON.encode(state)
        try await database.transaction { sql in
            try await sql.update("authorization_requests").set("journey", to: text).where("id", .equal, id)
                .where("completed_at", .isNot, SQLLiteral.null).run()
        }
    }

    struct SessionRow: Codable {
        var idHash: String
        var tenantId: String
        var userId: String
        var identityProvider: String
        var authTime: Int64
        var createdAt: Int64
        var expiresAt: Int64
        var mfa: Bool
    }

    package func saveSession(idHash: String, session: SSOSession, now: Date) async throws {
        let row = SessionRow(
            idHash: idHash, tenantId: session.tenantID.uuidString.lowercased(),
            userId: session.userID.uuidString.lowercased(), identityProvider: session.identityProvider.rawValue,
            authTime: session.authTime.epochSeconds, createdAt: now.epochSeconds,
            expiresAt: session.expiresAt.epochSeconds, mfa: session.secondFactor)
        try await database.transaction { sql in try await sql.insert(into: "sso_sessions").model(row, with: .snakeCase).run() }
    }

    package func session(idHash: String, now: Date) async throws -> SSOSession? {
        guard
            let row = try await database.read({ sql in
                try await sql.select().columns("*").from("sso_sessions").where("id_hash", .equal, idHash)
                    .first(decoding: SessionRow.self, with: .snakeCase)
            }), row.expiresAt > now.epochSeconds, let tenantID = UUID(uuidString: row.tenantId),
            let userID = UUID(uuidString: row.userId),
            let provider = IdentityProviderKind(rawValue: row.identityProvider)
        else { return nil }
        return SSOSession(
            tenantID: tenantID, userID: userID, identityProvider: provider, authTime: Date(epoch: row.authTime),
            expiresAt: Date(epoch: row.expiresAt), secondFactor: row.mfa)
    }

    package func deleteSession(idHash: String) async throws {
        try await database.transaction { sql in
            try await sql.delete(from: "sso_sessions").where("id_hash", .equal, idHash).run()
        }
    }

    package func outbox(tenantID: UUID, limit: Int) async throws -> [OutboxMessage] {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("outbox").where("tenant_id", .equal, tenant)
                .orderBy("created_at", .descending).orderBy("id", .descending).limit(limit).all(decoding: OutboxRow.self, with: .snakeCase)
        }.map {
            OutboxMessage(
                id: $0.id, tenantID: tenantID, recipient: $0.recipient, subject: $0.subject, body: $0.body,
                createdAt: Date(epoch: $0.createdAt))
        }
    }

    struct FederationRow: Codable {
        var codeHash: String
        var requestId: String
        var provider: String
        var subject: String
        var email: String?
        var displayName: String
        var givenName: String?
        var surname: String?
        var expiresAt: Int64
    }

    package func saveFederationCode(_ code: String, interactionID: String, identity: FederatedIdentity, expiresAt: Date) async throws {
        let row = FederationRow(
            codeHash: Secrets.sha256Hex(code), requestId: interactionID, provider: identity.provider.rawValue,
            subject: identity.subject, email: identity.email, displayName: identity.displayName,
            givenName: identity.givenName, surname: identity.surname, expiresAt: expiresAt.epochSeconds)
        try await database.transaction { sql in try await sql.insert(into: "federation_codes").model(row, with: .snakeCase).run() }
    }

    package func takeFederationCode(_ code: String, now: Date) async throws -> (interactionID: String, identity: FederatedIdentity)? {
        let hash = Secrets.sha256Hex(code)
        return try await database.transaction { sql -> (String, FederatedIdentity)? in
            guard
                let row = try await sql.select().columns("*").from("federation_codes")
                    .where("code_hash", .equal, hash).first(decoding: FederationRow.self, with: .snakeCase)
            else { return nil }
            try await sql.delete(from: "federation_codes").where("code_hash", .equal, hash).run()
            guard row.expiresAt > now.epochSeconds, let provider = IdentityProviderKind(rawValue: row.provider) else {
                return nil
            }
            return (
                row.requestId,
                FederatedIdentity(
                    provider: provider, subject: row.subject, email: row.email, displayName: row.displayName,
                    givenName: row.givenName, surname: row.surname)
            )
        }
    }

    package func serverSecret(named name: String, now: Date) async throws -> String {
        struct Row: Codable {
            var name: String
            var value: String
            var createdAt: Int64
        }
        let context = "server_secrets:\(name)"
        if let stored = try await database.read({ sql in
            try await sql.select().column("value").from("server_secrets").where("name", .equal, name)
                .first(decodingColumn: "value", as: String.self)
        }) {
            let (value, wasClear) = try dataKey.open(stored, context: context)
            if wasClear {
                let sealed = try dataKey.seal(value, context: context)
                try await database.transaction { sql in
                    try await sql.update("server_secrets").set("value", to: sealed).where("name", .equal, name)
                        .where("value", .equal, stored).run()
                }
            }
            return value
        }
        // Concurrent first uses (several requests, several instances) each offer a value; the
        // first insert wins and everyone reads the winner back, instead of all but one failing
        // on the primary key.
        let candidate = Row(
            name: name, value: try dataKey.seal(Secrets.randomToken(byteCount: 32), context: context), createdAt: now.epochSeconds)
        let winner = try await database.transaction { sql in
            try await sql.insert(into: "server_secrets").model(candidate, with: .snakeCase).ignoringConflicts(with: ["name"]).run()
            return try await sql.select().column("value").from("server_secrets").where("name", .equal, name)
                .first(decodingColumn: "value", as: String.self) ?? candidate.value
        }
        return try dataKey.open(winner, context: context).value
    }

    package func clearTenantState(tenantID: UUID) async throws {
        let tenant = tenantID.uuidString.lowercased()
        try await database.transaction { sql in
            try await sql.raw(
                "DELETE FROM verification_codes WHERE request_id IN (SELECT id FROM authorization_requests WHERE tenant_id = \(bind: tenant))"
            ).run()
            try await sql.raw(
                "DELETE FROM federation_codes WHERE request_id IN (SELECT id FROM authorization_requests WHERE tenant_id = \(bind: tenant))"
            ).run()
            try await sql.delete(from: "authorization_requests").where("tenant_id", .equal, tenant).run()
            try await sql.delete(from: "outbox").where("tenant_id", .equal, tenant).run()
            try await sql.delete(from: "lockout_unknown_names").where("tenant_id", .equal, tenant).run()
            try await sql.delete(from: "code_limits").where("tenant_id", .equal, tenant).run()
        }
    }

    package func sweep(now: Date) async throws {
        let cutoff = now.epochSeconds
        try await database.transaction { sql in
            try await sql.delete(from: "authorization_requests").where("expires_at", .lessThan, cutoff).run()
            try await sql.delete(from: "sso_sessions").where("expires_at", .lessThan, cutoff).run()
            try await sql.delete(from: "verification_codes").where("expires_at", .lessThan, cutoff).run()
            try await sql.delete(from: "federation_codes").where("expires_at", .lessThan, cutoff).run()
            try await sql.delete(from: "mfa_browsers").where("expires_at", .lessThan, cutoff).run()
            // Windows long past, and mail nobody will read: the outbox keeps a day (the second
            // outside attack's F-4: its rows were never deleted).
            try await sql.delete(from: "code_limits").where("window_started_at", .lessThan, cutoff - 86_400).run()
            try await sql.delete(from: "outbox").where("created_at", .lessThan, cutoff - OutboxMessage.retentionSeconds).run()
            // Counters of names without an account, a day after their last attempt (unless locked).
            try await sql.delete(from: "lockout_unknown_names").where("updated_at", .lessThan, cutoff - 86_400)
                .where { $0.where("locked_until", .is, SQLLiteral.null).orWhere("locked_until", .lessThan, cutoff) }.run()
        }
    }

    package init(database: any Database, dataKey: DataKey) {
        self.database = database
        self.dataKey = dataKey
    }
}

extension SQLInteractionStore {
    package func journeys(tenantID: UUID, correlationID: String) async throws -> [(policy: String, startedAt: Date, state: JourneyState)] {
        // A correlation id is this service's: 36 characters of hex and dashes, nothing a LIKE
        // pattern could read as a wildcard.
        guard UUID(uuidString: correlationID) != nil else { return [] }
        let rows = try await database.rows(
            "SELECT policy, created_at, journey FROM authorization_requests WHERE tenant_id = ? AND journey LIKE ? ORDER BY created_at DESC LIMIT 20",
            [.text(tenantID.uuidString.lowercased()), .text("%\"correlationID\":\"\(correlationID.lowercased())\"%")])
        return try rows.compactMap { row in
            guard let text = try row.optionalText("journey"), let state = StoredJSON.decode(JourneyState.self, text),
                state.correlationID == correlationID.lowercased()
            else { return nil }
            return (try row.text("policy"), Date(timeIntervalSince1970: TimeInterval(try row.integer("created_at"))), state)
        }
    }
}
