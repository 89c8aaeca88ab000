import Foundation
import SQLKit
import Storage
import WireCoding

/// A native-authentication flow in progress (SPEC §2.15): which tenant, app and account it is
/// for, the step it is at, and the method the account proves itself with. The client holds
/// only an opaque continuation token; the store keeps its SHA-256 hash.
package struct NativeAuthFlow: Sendable, Equatable {
    package enum Step: String, Sendable {
        /// After `initiate`: the next call is `challenge`.
        case challenge
        /// After `challenge`: the next call is `token` with the method's credential.
        case token
    }

    package var tenantID: UUID
    package var clientID: String
    package var userID: UUID
    package var step: Step
    /// `password` or `oob`, once the challenge chose.
    package var method: String?
    package var attempts: Int
    package var expiresAt: Date
    /// The stored hash of the token it was found by.
    var tokenHash: String
}

/// The native-authentication flows, each one continuation token at a time: a step that moves
/// the flow on takes the token it was given and hands back a new one, so none works twice; a
/// flow lasts ``lifetime`` from its start and is gone after ``maximumAttempts`` failed proofs.
package struct NativeAuthFlows: Sendable {
    let database: any Database
    package static let lifetime: TimeInterval = 600
    package static let maximumAttempts = 5

    package init(database: any Database) { self.database = database }

    private static func hash(_ token: String) -> String { Secrets.sha256Hex("native-auth:" + token) }

    /// Starts a flow at `step`; returns its first continuation token.
    package func start(tenantID: UUID, clientID: String, userID: UUID, step: NativeAuthFlow.Step, now: Date) async throws -> String {
        let token = Secrets.randomToken(byteCount: 32)
        try await database.transaction { sql in
            try await sql.delete(from: "native_auth_flows").where("expires_at", .lessThan, now.epochSeconds).run()
            try await sql.insert(into: "native_auth_flows")
                .columns("token_hash", "tenant_id", "client_id", "user_id", "step", "method", "attempts", "expires_at")
                .values(
                    SQLBind(Self.hash(token)), SQLBind(tenantID.uuidString.lowercased()), SQLBind(clientID.lowercased()),
                    SQLBind(userID.uuidString.lowercased()), SQLBind(step.rawValue), SQLLiteral.null, SQLBind(0),
                    SQLBind(now.addingTimeInterval(Self.lifetime).epochSeconds)
                ).run()
        }
        return token
    }

    /// The flow `token` continues, if it is one of this store's and still live; expired ones are
    /// told apart (`expired_token`).
    package enum Lookup: Sendable, Equatable {
        case found(NativeAuthFlow)
        case expired
        case unknown
    }

    package func find(_ token: String, now: Date) async throws -> Lookup {
        guard !token.isEmpty, token.utf8.count <= 512 else { return .unknown }
        let rows = try await database.rows(
            "SELECT * FROM native_auth_flows WHERE token_hash = ?", [.text(Self.hash(token))])
        guard let row = rows.first, let tenant = UUID(uuidString: try row.text("tenant_id")), let user = UUID(uuidString: try row.text("user_id")),
            let step = NativeAuthFlow.Step(rawValue: try row.text("step"))
        else { return .unknown }
        let expires = Date(timeIntervalSince1970: TimeInterval(try row.integer("expires_at")))
        guard expires > now else { return .expired }
        return .found(
            NativeAuthFlow(
                tenantID: tenant, clientID: try row.text("client_id"), userID: user, step: step, method: try row.optionalText("method"),
                attempts: Int(try row.integer("attempts")), expiresAt: expires, tokenHash: Self.hash(token)))
    }

    /// Moves the flow to `step` with `method`: its token is spent and a new one returned. Nil
    /// when the token was spent meanwhile (two requests raced with it).
    package func advance(_ flow: NativeAuthFlow, to step: NativeAuthFlow.Step, method: String?) async throws -> String? {
        let token = Secrets.randomToken(byteCount: 32)
        return try await database.transaction { sql in
            guard try await sql.select().column("token_hash").from("native_auth_flows").where("token_hash", .equal, flow.tokenHash).first() != nil
            else { return nil }
            try await sql.update("native_auth_flows").set("token_hash", to: Self.hash(token)).set("step", to: step.rawValue)
                .set("method", to: method).where("token_hash", .equal, flow.tokenHash).run()
            return token
        }
    }

    /// Counts a failed proof; true when the flow may still be tried, false once it is gone.
    package func failed(_ flow: NativeAuthFlow) async throws -> Bool {
        try await database.transaction { sql in
            try await sql.update("native_auth_flows").set(SQLIdentifier("attempts"), to: SQLRaw("attempts + 1"))
                .where("token_hash", .equal, flow.tokenHash).run()
            let attempts = try await sql.select().column("attempts").from("native_auth_flows").where("token_hash", .equal, flow.tokenHash)
                .first(decodingColumn: "attempts", as: Int.self) ?? Self.maximumAttempts
            if attempts >= Self.maximumAttempts {
                try await sql.delete(from: "native_auth_flows").where("token_hash", .equal, flow.tokenHash).run()
                return false
            }
            return true
        }
    }

    /// Ends the flow (its tokens were issued); false when another request ended it first.
    package func finish(_ flow: NativeAuthFlow) async throws -> Bool {
        try await database.transaction { sql in
            guard try await sql.select().column("token_hash").from("native_auth_flows").where("token_hash", .equal, flow.tokenHash).first() != nil
            else { return false }
            try await sql.delete(from: "native_auth_flows").where("token_hash", .equal, flow.tokenHash).run()
            return true
        }
    }
}
