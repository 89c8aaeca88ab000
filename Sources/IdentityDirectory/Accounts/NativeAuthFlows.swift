import Foundation
import SQLKit
import Storage
import WireCoding

/// A native-authentication flow in progress (SPEC §2.15): which tenant, app and account (or, in
/// a sign-up, address) it is for, the step it is at, and what it has gathered. The client holds
/// only an opaque continuation token; the store keeps its SHA-256 hash. The flow's own ``id``
/// stays while its tokens rotate: a code sent in the flow is bound to it.
package struct NativeAuthFlow: Sendable, Equatable {
    /// Where a flow is: each names the one call that may continue it, so a token of one step is
    /// nothing at another (Microsoft's reference: a continuation token is for the next call).
    package enum Step: String, Sendable {
        /// Sign-in after `initiate`: `oauth2/v2.0/challenge`.
        case challenge
        /// Sign-in after `challenge`: `oauth2/v2.0/token` with the password or the code.
        case token
        /// Sign-in stopped for its second factor: `introspect`, or `challenge` with a method id.
        case secondFactor
        /// A second-factor code was sent: `oauth2/v2.0/token` with `grant_type=mfa_oob`.
        case secondFactorToken
        /// The account has no second factor yet: `register/v1.0/introspect` or `challenge`.
        case registration
        /// A registration code was sent: `register/v1.0/continue`.
        case registrationCode
        /// Proven by a sign-up, a reset or a registration: `oauth2/v2.0/token` with
        /// `grant_type=continuation_token`.
        case signedIn
        /// Sign-up after `start`: `signup/v1.0/challenge`.
        case signUpChallenge
        /// Sign-up waiting for what it asked: `signup/v1.0/continue` (`oob`, `password` or
        /// `attributes`, per ``NativeAuthFlowData/awaiting``), or `challenge` again for a new code.
        case signUpContinue
        /// Reset after `start`: `resetpassword/v1.0/challenge`.
        case resetChallenge
        /// A reset code was sent: `resetpassword/v1.0/continue` (or `challenge` again).
        case resetCode
        /// The address is proven: `resetpassword/v1.0/submit` with the new password.
        case resetSubmit
        /// The password was set: `resetpassword/v1.0/poll_completion`.
        case resetPoll
    }

    package var id: String
    package var tenantID: UUID
    package var clientID: String
    /// The account, once there is one (a sign-up has none until its last step).
    package var userID: UUID?
    /// The canonical address the flow is about.
    package var email: String?
    package var step: Step
    /// `password` or `oob`, once a challenge chose.
    package var method: String?
    package var data: NativeAuthFlowData
    package var attempts: Int
    package var expiresAt: Date
    /// The stored hash of the token it was found by.
    var tokenHash: String
}

/// What a flow gathered on its way, kept with it until it ends.
package struct NativeAuthFlowData: Sendable, Codable, Equatable {
    /// The address as the person typed it (its case), for the account a sign-up makes.
    package var displayEmail: String?
    /// A sign-up's password, already hashed, until the account is made.
    package var passwordHash: String?
    /// A sign-up's attributes so far, by their flow names.
    package var attributes: [String: String] = [:]
    package var displayName: String?
    /// A code proved the address in this flow.
    package var emailVerified = false
    /// What a sign-up's `continue` waits for next: `oob`, `password` or `attributes`.
    package var awaiting: String?
    /// What the client said it handles itself (`capabilities`: `mfa_required`,
    /// `registration_required`); anything else needs the browser.
    package var capabilities: [String] = []
    /// The account passed its second factor in this flow.
    package var secondFactorPassed = false
    /// The account was made in this flow.
    package var newUser = false
    /// The flow reset the account's password.
    package var afterReset = false
    /// The flow's OnAttributeCollectionStart extension was called.
    package var attributeCollectionStarted = false

    package init() {}
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

    /// Counts a new flow from `clientAddress`: false, and nothing counted, when the address
    /// started `limitPerHour` in the last hour. Starts older than an hour are dropped here.
    package func admit(clientAddress: String, limitPerHour: Int, now: Date) async throws -> Bool {
        try await database.transaction { sql in
            let hourAgo = now.epochSeconds - 3600
            try await sql.delete(from: "native_auth_starts").where("created_at", .lessThanOrEqual, hourAgo).run()
            let recent =
                try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("native_auth_starts")
                .where("client_address", .equal, clientAddress).where("created_at", .greaterThan, hourAgo)
                .first(decodingColumn: "n", as: Int.self) ?? 0
            guard recent < limitPerHour else { return false }
            try await sql.insert(into: "native_auth_starts").columns("client_address", "created_at")
                .values(SQLBind(clientAddress), SQLBind(now.epochSeconds)).run()
            return true
        }
    }

    /// Starts a flow at `step`; returns its first continuation token.
    package func start(
        tenantID: UUID, clientID: String, userID: UUID?, email: String?, step: NativeAuthFlow.Step, data: NativeAuthFlowData = .init(),
        now: Date
    ) async throws -> String {
        let token = Secrets.randomToken(byteCount: 32)
        try await database.transaction { sql in
            try await sql.delete(from: "native_auth_flows").where("expires_at", .lessThan, now.epochSeconds).run()
            try await sql.insert(into: "native_auth_flows")
                .columns("token_hash", "flow_id", "tenant_id", "client_id", "user_id", "email", "step", "method", "data", "attempts", "expires_at")
                .values(
                    SQLBind(Self.hash(token)), SQLBind(UUID().uuidString.lowercased()), SQLBind(tenantID.uuidString.lowercased()),
                    SQLBind(clientID.lowercased()), SQLBind(userID?.uuidString.lowercased()), SQLBind(email), SQLBind(step.rawValue),
                    SQLLiteral.null, SQLBind(StoredJSON.encode(data)), SQLBind(0), SQLBind(now.addingTimeInterval(Self.lifetime).epochSeconds)
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
        let rows = try await database.rows("SELECT * FROM native_auth_flows WHERE token_hash = ?", [.text(Self.hash(token))])
        guard let row = rows.first, let tenant = UUID(uuidString: try row.text("tenant_id")),
            let step = NativeAuthFlow.Step(rawValue: try row.text("step")),
            let data = StoredJSON.decode(NativeAuthFlowData.self, try row.text("data"))
        else { return .unknown }
        let expires = Date(timeIntervalSince1970: TimeInterval(try row.integer("expires_at")))
        guard expires > now else { return .expired }
        return .found(
            NativeAuthFlow(
                id: try row.text("flow_id"), tenantID: tenant, clientID: try row.text("client_id"),
                userID: try row.optionalText("user_id").flatMap(UUID.init(uuidString:)), email: try row.optionalText("email"), step: step,
                method: try row.optionalText("method"), data: data, attempts: Int(try row.integer("attempts")), expiresAt: expires,
                tokenHash: Self.hash(token)))
    }

    /// Moves the flow to `step` with `method`, `data` and `userID` (unchanged when nil): its
    /// token is spent and a new one returned. Nil when the token was spent meanwhile (two
    /// requests raced with it).
    package func advance(
        _ flow: NativeAuthFlow, to step: NativeAuthFlow.Step, method: String? = nil, data: NativeAuthFlowData? = nil, userID: UUID? = nil
    ) async throws -> (token: String, flow: NativeAuthFlow)? {
        let token = Secrets.randomToken(byteCount: 32)
        var moved = flow
        moved.step = step
        moved.method = method ?? flow.method
        moved.data = data ?? flow.data
        moved.userID = userID ?? flow.userID
        moved.tokenHash = Self.hash(token)
        let update = moved
        let done = try await database.transaction { sql in
            guard try await sql.select().column("token_hash").from("native_auth_flows").where("token_hash", .equal, flow.tokenHash).first() != nil
            else { return false }
            try await sql.update("native_auth_flows").set("token_hash", to: update.tokenHash).set("step", to: step.rawValue)
                .set("method", to: update.method).set("data", to: StoredJSON.encode(update.data))
                .set("user_id", to: update.userID?.uuidString.lowercased())
                .where("token_hash", .equal, flow.tokenHash).run()
            return true
        }
        return done ? (token, moved) : nil
    }

    /// Keeps `flow`'s data under the same token (a step that spent nothing); false when the token
    /// was spent meanwhile.
    package func update(_ flow: NativeAuthFlow) async throws -> Bool {
        let data = StoredJSON.encode(flow.data)
        return try await database.transaction { sql in
            guard try await sql.select().column("token_hash").from("native_auth_flows").where("token_hash", .equal, flow.tokenHash).first() != nil
            else { return false }
            try await sql.update("native_auth_flows").set("data", to: data).where("token_hash", .equal, flow.tokenHash).run()
            return true
        }
    }

    /// Counts a failed proof; true when the flow may still be tried, false once it is gone.
    package func failed(_ flow: NativeAuthFlow) async throws -> Bool {
        try await database.transaction { sql in
            try await sql.update("native_auth_flows").set(SQLIdentifier("attempts"), to: SQLRaw("attempts + 1"))
                .where("token_hash", .equal, flow.tokenHash).run()
            let attempts =
                try await sql.select().column("attempts").from("native_auth_flows").where("token_hash", .equal, flow.tokenHash)
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
