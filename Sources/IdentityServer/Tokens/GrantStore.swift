import Foundation
import SQLKit
import Storage
import WireCoding

/// Authorization codes and refresh tokens. Only SHA-256 hashes of the values are stored.
protocol GrantStore: Sendable {
    func saveCode(_ code: String, grant: AuthorizationCodeGrant) async throws
    /// Marks the code used and returns its grant, in one transaction; a second call reports
    /// `.replayed` and revokes the refresh-token family the first redemption created. A code
    /// presented by another client or at another user flow is refused and left unused.
    func redeemCode(_ code: String, clientID: String, policy: String, face: ProtocolFace, now: Date) async throws -> CodeRedemption

    /// Stores a new family and its first token; with `code`, also records the family on the code
    /// (in the same transaction), revoking it at once if the code was replayed meanwhile.
    func createFamily(_ family: RefreshTokenFamily, firstToken: String, tokenExpiresAt: Date, forCode code: String?) async throws
    /// Validates `token`, and if it is good, marks it used and stores `replacement` in its
    /// family, atomically, so that two concurrent uses cannot both succeed. `admit` runs before
    /// the token is consumed: what it throws comes back and leaves the token usable (a request
    /// refused for its parameters must not burn the holder's token).
    /// A token presented again within `reuseInterval` of its rotation, while its successor is
    /// still unused, gets that same successor back (``RefreshTokenRedemption/reissued``): a client
    /// that raced itself keeps its session. Later, or once the successor was used, reuse revokes
    /// the family (RFC 9700 §4.14.2).
    func rotateRefreshToken(
        _ token: String, replacement: String, binding: RefreshTokenBinding,
        admit: @Sendable (RefreshTokenFamily) throws -> Void,
        replacementExpiresAt: @Sendable (RefreshTokenFamily) -> Date, reuseInterval: TimeInterval, now: Date
    ) async throws -> RefreshTokenRedemption
    func revokeFamily(id: String, reason: String, now: Date) async throws
    /// The family of a refresh token, read without using the token: for checks that must refuse
    /// before a rotation consumes it.
    func family(ofRefreshToken token: String) async throws -> RefreshTokenFamily?
    /// Deletes expired codes and tokens; returns how many rows went.
    func sweep(now: Date) async throws -> Int
}

struct SQLGrantStore: GrantStore {
    let database: any Database
    /// Seals a rotated token's successor for the reuse interval.
    let dataKey: DataKey

    public init(database: any Database, dataKey: DataKey) {
        self.database = database
        self.dataKey = dataKey
    }

    private static func successorContext(_ hash: String) -> String { "refresh_tokens.successor:\(hash)" }

    struct CodeRow: Codable {
        var codeHash: String
        var tenantId: String
        var clientId: String
        var userId: String
        var policy: String
        var redirectUri: String
        var scopes: String
        var nonce: String?
        var codeChallenge: String?
        var codeChallengeMethod: String?
        var authTime: Int64
        var newUser: Bool
        var identityProvider: String
        var createdAt: Int64
        var expiresAt: Int64
        var redeemedAt: Int64?
        var familyId: String?
        var face: String
        var claimOverrides: String?

        var grant: AuthorizationCodeGrant? {
            guard let tenantID = UUID(uuidString: tenantId), let userID = UUID(uuidString: userId),
                let provider = IdentityProviderKind(rawValue: identityProvider)
            else { return nil }
            // A method this build does not know verifies nothing (never a silent `plain`).
            let method = codeChallengeMethod.map(CodeChallengeMethod.init(rawValue:))
            if case .some(.none) = method { return nil }
            return AuthorizationCodeGrant(
                tenantID: tenantID, clientID: clientId, userID: userID, policy: policy, redirectURI: redirectUri,
                scopes: StoredJSON.decode([String].self, scopes) ?? [], nonce: nonce, codeChallenge: codeChallenge,
                codeChallengeMethod: method ?? nil, authTime: .init(epoch: authTime), newUser: newUser,
                identityProvider: provider, createdAt: .init(epoch: createdAt), expiresAt: .init(epoch: expiresAt),
                face: ProtocolFace(rawValue: face) ?? .b2c,
                claimOverrides: claimOverrides.flatMap { StoredJSON.decode([String: String].self, $0) })
        }
    }

    struct FamilyRow: Codable {
        var id: String
        var tenantId: String
        var clientId: String
        var userId: String
        var policy: String
        var scopes: String
        var authTime: Int64
        var identityProvider: String
        var createdAt: Int64
        var slidingExpiresAt: Int64?
        var revokedAt: Int64?
        var revokedReason: String?
        var consented: String?
        var face: String
        var claimOverrides: String?

        init(_ family: RefreshTokenFamily) {
            id = family.id
            tenantId = family.tenantID.uuidString.lowercased()
            clientId = family.clientID
            userId = family.userID.uuidString.lowercased()
            policy = family.policy
            scopes = StoredJSON.encode(family.scopes)
            authTime = family.authTime.epochSeconds
            identityProvider = family.identityProvider.rawValue
            createdAt = family.createdAt.epochSeconds
            slidingExpiresAt = family.slidingExpiresAt?.epochSeconds
            revokedAt = family.revokedAt?.epochSeconds
            revokedReason = nil
            consented = family.consented.map { StoredJSON.encode($0) }
            face = family.face.rawValue
            claimOverrides = family.claimOverrides.map { StoredJSON.encode($0) }
        }

        /// Read column by column: this runs on every refresh, and SQLKit's `Codable` path
        /// converted each of the fifteen keys to snake case per row (issue 13's profile).
        init(row: any SQLRow) throws {
            func column<T: Decodable>(_ name: String, _ type: T.Type = T.self) throws -> T { try row.decode(column: name, as: type) }
            id = try column("id")
            tenantId = try column("tenant_id")
            clientId = try column("client_id")
            userId = try column("user_id")
            policy = try column("policy")
            scopes = try column("scopes")
            authTime = try column("auth_time")
            identityProvider = try column("identity_provider")
            createdAt = try column("created_at")
            slidingExpiresAt = try column("sliding_expires_at")
            revokedAt = try column("revoked_at")
            revokedReason = try column("revoked_reason")
            consented = try column("consented")
            face = try column("face")
            claimOverrides = try column("claim_overrides")
        }

        var family: RefreshTokenFamily? {
            guard let tenantID = UUID(uuidString: tenantId), let userID = UUID(uuidString: userId),
                let provider = IdentityProviderKind(rawValue: identityProvider)
            else { return nil }
            return RefreshTokenFamily(
                id: id, tenantID: tenantID, clientID: clientId, userID: userID, policy: policy,
                scopes: StoredJSON.decode([String].self, scopes) ?? [], authTime: .init(epoch: authTime),
                identityProvider: provider, createdAt: .init(epoch: createdAt),
                slidingExpiresAt: slidingExpiresAt.map(Date.init(epoch:)), revokedAt: revokedAt.map(Date.init(epoch:)),
                consented: consented.flatMap { StoredJSON.decode([APIPermission].self, $0) },
                face: ProtocolFace(rawValue: face) ?? .b2c,
                claimOverrides: claimOverrides.flatMap { StoredJSON.decode([String: String].self, $0) })
        }
    }

    struct TokenRow: Codable {
        var tokenHash: String
        var familyId: String
        var createdAt: Int64
        var expiresAt: Int64
        var usedAt: Int64?
    }

    public func saveCode(_ code: String, grant: AuthorizationCodeGrant) async throws {
        let row = CodeRow(
            codeHash: Secrets.sha256Hex(code), tenantId: grant.tenantID.uuidString.lowercased(),
            clientId: grant.clientID, userId: grant.userID.uuidString.lowercased(), policy: grant.policy,
            redirectUri: grant.redirectURI, scopes: StoredJSON.encode(grant.scopes), nonce: grant.nonce,
            codeChallenge: grant.codeChallenge, codeChallengeMethod: grant.codeChallengeMethod?.rawValue,
            authTime: grant.authTime.epochSeconds, newUser: grant.newUser,
            identityProvider: grant.identityProvider.rawValue, createdAt: grant.createdAt.epochSeconds,
            expiresAt: grant.expiresAt.epochSeconds, redeemedAt: nil, familyId: nil, face: grant.face.rawValue,
            claimOverrides: grant.claimOverrides.map { StoredJSON.encode($0) })
        try await database.transaction { sql in try await sql.insert(into: "authorization_codes").model(row, with: .snakeCase).run() }
    }

    public func redeemCode(_ code: String, clientID: String, policy: String, face: ProtocolFace, now: Date) async throws -> CodeRedemption {
        let hash = Secrets.sha256Hex(code)
        return try await database.transaction { sql in
            // A row lock on PostgreSQL; SQLite's dialect renders none (its single writer serialises).
            let select = sql.select().columns("*").from("authorization_codes").where("code_hash", .equal, hash).for(.update)
            guard let row = try await select.first(decoding: CodeRow.self, with: .snakeCase), let grant = row.grant else {
                return .unknown
            }
            if grant.clientID != clientID || grant.policy.lowercased() != policy.lowercased() || grant.face != face {
                return .wrongBinding(grant)
            }
            if row.redeemedAt != nil {
                try await sql.update("authorization_codes").set("replayed_at", to: now.epochSeconds)
                    .where("code_hash", .equal, hash).run()
                if let family = row.familyId {
                    try await Self.revoke(family: family, reason: "authorization code replayed", now: now, sql: sql)
                }
                return .replayed
            }
            try await sql.update("authorization_codes").set("redeemed_at", to: now.epochSeconds)
                .where("code_hash", .equal, hash).run()
            if grant.expiresAt <= now { return .expired(grant) }
            return .redeemed(grant)
        }
    }

    public func createFamily(_ family: RefreshTokenFamily, firstToken: String, tokenExpiresAt: Date, forCode code: String?) async throws {
        let familyRow = FamilyRow(family)
        let tokenRow = TokenRow(
            tokenHash: Secrets.sha256Hex(firstToken), familyId: family.id, createdAt: family.createdAt.epochSeconds,
            expiresAt: tokenExpiresAt.epochSeconds, usedAt: nil)
        try await database.transaction { sql in
            try await sql.insert(into: "refresh_token_families").model(familyRow, with: .snakeCase).run()
            try await sql.insert(into: "refresh_tokens").model(tokenRow, with: .snakeCase).run()
            guard let code else { return }
            let hash = Secrets.sha256Hex(code)
            try await sql.update("authorization_codes").set("family_id", to: family.id).where("code_hash", .equal, hash).run()
            let replayed =
                try await sql.select().column("replayed_at").from("authorization_codes").where("code_hash", .equal, hash)
                .first(decodingColumn: "replayed_at", as: Int64?.self) ?? nil
            if replayed != nil {
                try await Self.revoke(family: family.id, reason: "authorization code replayed", now: family.createdAt, sql: sql)
            }
        }
    }

    public func rotateRefreshToken(
        _ token: String, replacement: String, binding: RefreshTokenBinding,
        admit: @Sendable (RefreshTokenFamily) throws -> Void,
        replacementExpiresAt: @Sendable (RefreshTokenFamily) -> Date, reuseInterval: TimeInterval, now: Date
    ) async throws -> RefreshTokenRedemption {
        let hash = Secrets.sha256Hex(token)
        let dataKey = self.dataKey
        let successor = Successor(
            hash: Secrets.sha256Hex(replacement),
            sealed: reuseInterval > 0 ? try dataKey.seal(replacement, context: Self.successorContext(hash)) : nil)
        // The usual case in two steps and one write statement: read the token on a reader
        // connection, then consume it only if it is still unused and its family unrevoked. Those
        // two columns are all of the row that can change (binding, expiry and scopes never do),
        // and each only ever goes from NULL to set, so a refusal decided on the read stands, and
        // the statement rotates only a token a transaction would have rotated. (On PostgreSQL a
        // revoke that commits while the statement runs may not stop it: the rotation then counts
        // as made just before the revoke, which is also what the transaction's row lock gave, the
        // revoke waiting for it; the successor belongs to a revoked family.) A token already
        // used, or consumed by a racing request between the two steps, takes the transaction
        // below, which decides reuse under the lock.
        guard let read = try await database.read({ sql in try await Self.presentedToken(hash, sql: sql, lock: false) }) else {
            return .unknown
        }
        switch try Self.triage(read, binding: binding, now: now) {
        case .decided(let outcome): return outcome
        case .used: break
        case .usable(let family, let issuedAt):
            try admit(family)
            let expiresAt = replacementExpiresAt(family)
            let consumed = try await database.singleStatement { sql in
                try await Self.consume(hash, successor: successor, expiresAt: expiresAt, now: now, sql: sql)
            }
            if consumed { return .rotated(family, tokenIssuedAt: issuedAt) }
        }
        let engine = database.engine
        return try await database.transaction { sql in
            guard let row = try await Self.presentedToken(hash, sql: sql, lock: engine == .postgres) else { return .unknown }
            switch try Self.triage(row, binding: binding, now: now) {
            case .decided(let outcome): return outcome
            case .usable(let family, let issuedAt):
                try admit(family)
                // Read unused under the writer's lock (PostgreSQL: the rows' lock), so this cannot
                // miss; were it to, the token is refused, never rotated twice.
                guard try await Self.consume(hash, successor: successor, expiresAt: replacementExpiresAt(family), now: now, sql: sql)
                else { return .unknown }
                return .rotated(family, tokenIssuedAt: issuedAt)
            case .used(let family, let usedAt, let issuedAt, let sealed):
                // The same client racing itself (two tabs, two processes): within the interval,
                // and while the successor is unused, the same successor again.
                if now.timeIntervalSince(usedAt) <= reuseInterval, let sealed,
                    let successor = try? dataKey.open(sealed, context: Self.successorContext(hash)).value
                {
                    let successorUsed =
                        try await sql.select().column("used_at").from("refresh_tokens")
                        .where("token_hash", .equal, Secrets.sha256Hex(successor)).first(decodingColumn: "used_at", as: Int64?.self)
                    if case .some(.none) = successorUsed {
                        try admit(family)
                        return .reissued(family, successor: successor, tokenIssuedAt: issuedAt)
                    }
                }
                try await Self.revoke(family: family.id, reason: "rotated refresh token reused", now: now, sql: sql)
                return .reused(family)
            }
        }
    }

    /// The replacement token: its hash, and itself sealed when the reuse interval keeps it.
    struct Successor: Sendable {
        var hash: String
        var sealed: String?
    }

    /// A presented token with its family, as one join: this runs on every refresh.
    struct PresentedToken: Sendable {
        var family: FamilyRow
        var issuedAt: Int64
        var expiresAt: Int64
        var usedAt: Int64?
        var sealedSuccessor: String?
    }

    enum Triage {
        case decided(RefreshTokenRedemption)
        case usable(RefreshTokenFamily, issuedAt: Date)
        case used(RefreshTokenFamily, usedAt: Date, issuedAt: Date, sealedSuccessor: String?)
    }

    private static func presentedToken(_ hash: String, sql: any SQLDatabase, lock: Bool) async throws -> PresentedToken? {
        // With `lock`, the transaction's read: a row lock on both rows on PostgreSQL (SQLite's
        // writer transaction serialises). Without, the optimistic read on a reader connection.
        let lock = lock ? " FOR UPDATE" : ""
        guard
            let row = try await sql.raw(
                """
                SELECT t.created_at AS token_created_at, t.expires_at AS token_expires_at,
                       t.used_at AS token_used_at, t.sealed_successor AS token_sealed_successor, f.*
                FROM refresh_tokens t JOIN refresh_token_families f ON f.id = t.family_id
                WHERE t.token_hash = \(bind: hash)\(unsafeRaw: lock)
                """
            ).first()
        else { return nil }
        return PresentedToken(
            family: try FamilyRow(row: row),
            issuedAt: try row.decode(column: "token_created_at", as: Int64.self),
            expiresAt: try row.decode(column: "token_expires_at", as: Int64.self),
            usedAt: try row.decode(column: "token_used_at", as: Int64?.self),
            sealedSuccessor: try? row.decode(column: "token_sealed_successor", as: String?.self))
    }

    /// What a presented token's row alone decides, in the order the checks must run: binding
    /// first, so a token presented at the wrong client or policy is refused without being
    /// consumed (research/client-sdk.md §C.10, AADB2C90088).
    private static func triage(_ token: PresentedToken, binding: RefreshTokenBinding, now: Date) throws -> Triage {
        guard let family = token.family.family else { return .decided(.unknown) }
        if family.tenantID != binding.tenantID || family.clientID != binding.clientID { return .decided(.wrongClient(family)) }
        if family.policy.lowercased() != binding.policy.lowercased() || family.face != binding.face {
            return .decided(.wrongPolicy(family))
        }
        if family.revokedAt != nil { return .decided(.revoked(family)) }
        let issuedAt = Date(epoch: token.issuedAt)
        if let usedAt = token.usedAt {
            return .used(family, usedAt: Date(epoch: usedAt), issuedAt: issuedAt, sealedSuccessor: token.sealedSuccessor)
        }
        let expiresAt = Date(epoch: token.expiresAt)
        if expiresAt <= now || (family.slidingExpiresAt.map { $0 <= now } ?? false) {
            let limit = min(expiresAt, family.slidingExpiresAt ?? expiresAt)
            return .decided(.expired(family, issuedAt: issuedAt, expiresAt: limit))
        }
        return .usable(family, issuedAt: issuedAt)
    }

    /// Marks the token used and stores its successor, in one statement, if the token is still
    /// unused and its family unrevoked; false when it was not. The successor's row is inserted
    /// by the `refresh_tokens_rotate` trigger (migration 27) as part of this statement, so the
    /// two can never be apart, even without a transaction around them.
    static func consume(
        _ hash: String, successor: Successor, expiresAt: Date, now: Date, sql: any SQLDatabase
    ) async throws -> Bool {
        let rows = try await sql.raw(
            """
            UPDATE refresh_tokens SET used_at = \(bind: now.epochSeconds), sealed_successor = \(bind: successor.sealed),
                successor_hash = \(bind: successor.hash), successor_expires_at = \(bind: expiresAt.epochSeconds)
            WHERE token_hash = \(bind: hash) AND used_at IS NULL AND EXISTS (
                SELECT 1 FROM refresh_token_families f WHERE f.id = refresh_tokens.family_id AND f.revoked_at IS NULL)
            RETURNING token_hash
            """
        ).all()
        return !rows.isEmpty
    }

    public func family(ofRefreshToken token: String) async throws -> RefreshTokenFamily? {
        let hash = Secrets.sha256Hex(token)
        return try await database.read { sql in
            try await sql.raw(
                "SELECT f.* FROM refresh_tokens t JOIN refresh_token_families f ON f.id = t.family_id WHERE t.token_hash = \(bind: hash)"
            ).first().map(FamilyRow.init(row:))?.family
        }
    }

    public func revokeFamily(id: String, reason: String, now: Date) async throws {
        try await database.transaction { sql in try await Self.revoke(family: id, reason: reason, now: now, sql: sql) }
    }

    static func revoke(family: String, reason: String, now: Date, sql: any SQLDatabase) async throws {
        try await sql.update("refresh_token_families").set("revoked_at", to: now.epochSeconds)
            .set("revoked_reason", to: reason).where("id", .equal, family).where("revoked_at", .is, SQLLiteral.null)
            .run()
    }

    public func sweep(now: Date) async throws -> Int {
        let cutoff = now.epochSeconds
        // Keep redeemed codes until they expire so replays are still recognised.
        return try await database.transaction { sql in
            let codes =
                try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n")
                .from("authorization_codes").where("expires_at", .lessThan, cutoff).first(decodingColumn: "n", as: Int.self) ?? 0
            try await sql.delete(from: "authorization_codes").where("expires_at", .lessThan, cutoff).run()
            let tokens =
                try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n")
                .from("refresh_tokens").where("expires_at", .lessThan, cutoff).first(decodingColumn: "n", as: Int.self) ?? 0
            try await sql.delete(from: "refresh_tokens").where("expires_at", .lessThan, cutoff).run()
            return codes + tokens
        }
    }
}

extension Date {
    init(epoch: Int64) { self.init(timeIntervalSince1970: TimeInterval(epoch)) }
}
