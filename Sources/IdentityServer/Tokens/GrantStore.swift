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
    func redeemCode(_ code: String, clientID: String, policy: String, now: Date) async throws -> CodeRedemption

    /// Stores a new family and its first token; with `code`, also records the family on the code
    /// (in the same transaction), revoking it at once if the code was replayed meanwhile.
    func createFamily(_ family: RefreshTokenFamily, firstToken: String, tokenExpiresAt: Date, forCode code: String?) async throws
    /// Validates `token`, and if it is good, marks it used and stores `replacement` in its
    /// family, atomically, so that two concurrent uses cannot both succeed. `admit` runs before
    /// the token is consumed: what it throws comes back and leaves the token usable (a request
    /// refused for its parameters must not burn the holder's token).
    func rotateRefreshToken(
        _ token: String, replacement: String, binding: RefreshTokenBinding,
        admit: @Sendable (RefreshTokenFamily) throws -> Void,
        replacementExpiresAt: @Sendable (RefreshTokenFamily) -> Date, now: Date
    ) async throws -> RefreshTokenRedemption
    func revokeFamily(id: String, reason: String, now: Date) async throws
    /// Deletes expired codes and tokens; returns how many rows went.
    func sweep(now: Date) async throws -> Int
}

struct SQLGrantStore: GrantStore {
    let database: any Database

    public init(database: any Database) { self.database = database }

    struct CodeRow: Codable {
        var code_hash: String
        var tenant_id: String
        var client_id: String
        var user_id: String
        var policy: String
        var redirect_uri: String
        var scopes: String
        var nonce: String?
        var code_challenge: String?
        var code_challenge_method: String?
        var auth_time: Int64
        var new_user: Bool
        var identity_provider: String
        var created_at: Int64
        var expires_at: Int64
        var redeemed_at: Int64?
        var family_id: String?

        var grant: AuthorizationCodeGrant? {
            guard let tenantID = UUID(uuidString: tenant_id), let userID = UUID(uuidString: user_id),
                let provider = IdentityProviderKind(rawValue: identity_provider)
            else { return nil }
            // A method this build does not know verifies nothing (never a silent `plain`).
            let method = code_challenge_method.map(CodeChallengeMethod.init(rawValue:))
            if case .some(.none) = method { return nil }
            return AuthorizationCodeGrant(
                tenantID: tenantID, clientID: client_id, userID: userID, policy: policy, redirectURI: redirect_uri,
                scopes: StoredJSON.decode([String].self, scopes) ?? [], nonce: nonce, codeChallenge: code_challenge,
                codeChallengeMethod: method ?? nil, authTime: .init(epoch: auth_time), newUser: new_user,
                identityProvider: provider, createdAt: .init(epoch: created_at), expiresAt: .init(epoch: expires_at))
        }
    }

    struct FamilyRow: Codable {
        var id: String
        var tenant_id: String
        var client_id: String
        var user_id: String
        var policy: String
        var scopes: String
        var auth_time: Int64
        var identity_provider: String
        var created_at: Int64
        var sliding_expires_at: Int64?
        var revoked_at: Int64?
        var revoked_reason: String?
        var consented: String?

        init(_ family: RefreshTokenFamily) {
            id = family.id
            tenant_id = family.tenantID.uuidString.lowercased()
            client_id = family.clientID
            user_id = family.userID.uuidString.lowercased()
            policy = family.policy
            scopes = StoredJSON.encode(family.scopes)
            auth_time = family.authTime.epochSeconds
            identity_provider = family.identityProvider.rawValue
            created_at = family.createdAt.epochSeconds
            sliding_expires_at = family.slidingExpiresAt?.epochSeconds
            revoked_at = family.revokedAt?.epochSeconds
            revoked_reason = nil
            consented = family.consented.map { StoredJSON.encode($0) }
        }

        var family: RefreshTokenFamily? {
            guard let tenantID = UUID(uuidString: tenant_id), let userID = UUID(uuidString: user_id),
                let provider = IdentityProviderKind(rawValue: identity_provider)
            else { return nil }
            return RefreshTokenFamily(
                id: id, tenantID: tenantID, clientID: client_id, userID: userID, policy: policy,
                scopes: StoredJSON.decode([String].self, scopes) ?? [], authTime: .init(epoch: auth_time),
                identityProvider: provider, createdAt: .init(epoch: created_at),
                slidingExpiresAt: sliding_expires_at.map(Date.init(epoch:)), revokedAt: revoked_at.map(Date.init(epoch:)),
                consented: consented.flatMap { StoredJSON.decode([APIPermission].self, $0) })
        }
    }

    /// The token columns of the refresh-token-and-family join (renamed so they do not clash with
    /// the family's own `created_at`).
    struct JoinedTokenColumns: Codable {
        var token_hash: String
        var token_created_at: Int64
        var token_expires_at: Int64
        var token_used_at: Int64?
    }

    struct TokenRow: Codable {
        var token_hash: String
        var family_id: String
        var created_at: Int64
        var expires_at: Int64
        var used_at: Int64?
    }

    public func saveCode(_ code: String, grant: AuthorizationCodeGrant) async throws {
        let row = CodeRow(
            code_hash: Secrets.sha256Hex(code), tenant_id: grant.tenantID.uuidString.lowercased(),
            client_id: grant.clientID, user_id: grant.userID.uuidString.lowercased(), policy: grant.policy,
            redirect_uri: grant.redirectURI, scopes: StoredJSON.encode(grant.scopes), nonce: grant.nonce,
            code_challenge: grant.codeChallenge, code_challenge_method: grant.codeChallengeMethod?.rawValue,
            auth_time: grant.authTime.epochSeconds, new_user: grant.newUser,
            identity_provider: grant.identityProvider.rawValue, created_at: grant.createdAt.epochSeconds,
            expires_at: grant.expiresAt.epochSeconds, redeemed_at: nil, family_id: nil)
        try await database.transaction { sql in try await sql.insert(into: "authorization_codes").model(row).run() }
    }

    public func redeemCode(_ code: String, clientID: String, policy: String, now: Date) async throws -> CodeRedemption {
        let hash = Secrets.sha256Hex(code)
        return try await database.transaction { sql in
            // A row lock on PostgreSQL; SQLite's dialect renders none (its single writer serialises).
            let select = sql.select().columns("*").from("authorization_codes").where("code_hash", .equal, hash).for(.update)
            guard let row = try await select.first(decoding: CodeRow.self), let grant = row.grant else {
                return .unknown
            }
            if grant.clientID != clientID || grant.policy.lowercased() != policy.lowercased() { return .wrongBinding(grant) }
            if row.redeemed_at != nil {
                try await sql.update("authorization_codes").set("replayed_at", to: now.epochSeconds)
                    .where("code_hash", .equal, hash).run()
                if let family = row.family_id {
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
            token_hash: Secrets.sha256Hex(firstToken), family_id: family.id, created_at: family.createdAt.epochSeconds,
            expires_at: tokenExpiresAt.epochSeconds, used_at: nil)
        try await database.transaction { sql in
            try await sql.insert(into: "refresh_token_families").model(familyRow).run()
            try await sql.insert(into: "refresh_tokens").model(tokenRow).run()
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
        replacementExpiresAt: @Sendable (RefreshTokenFamily) -> Date, now: Date
    ) async throws -> RefreshTokenRedemption {
        let hash = Secrets.sha256Hex(token)
        let engine = database.engine
        return try await database.transaction { sql in
            // One statement for the token and its family: this runs on every refresh.
            let lock = engine == .postgres ? " FOR UPDATE" : ""
            guard
                let row = try await sql.raw(
                    """
                    SELECT t.token_hash AS token_hash, t.created_at AS token_created_at, t.expires_at AS token_expires_at,
                           t.used_at AS token_used_at, f.*
                    FROM refresh_tokens t JOIN refresh_token_families f ON f.id = t.family_id
                    WHERE t.token_hash = \(bind: hash)\(unsafeRaw: lock)
                    """
                ).first()
            else { return .unknown }
            let familyRow = try row.decode(model: FamilyRow.self)
            let joined = try row.decode(model: JoinedTokenColumns.self)
            let tokenRow = TokenRow(
                token_hash: joined.token_hash, family_id: familyRow.id, created_at: joined.token_created_at,
                expires_at: joined.token_expires_at, used_at: joined.token_used_at)
            guard let family = familyRow.family else { return .unknown }
            // Binding first: a token presented at the wrong client or policy is refused without
            // being consumed (research/client-sdk.md §C.10, AADB2C90088).
            if family.tenantID != binding.tenantID || family.clientID != binding.clientID { return .wrongClient(family) }
            if family.policy.lowercased() != binding.policy.lowercased() { return .wrongPolicy(family) }
            if family.revokedAt != nil { return .revoked(family) }
            if tokenRow.used_at != nil {
                try await Self.revoke(family: family.id, reason: "rotated refresh token reused", now: now, sql: sql)
                return .reused(family)
            }
            let expiresAt = Date(epoch: tokenRow.expires_at)
            if expiresAt <= now || (family.slidingExpiresAt.map { $0 <= now } ?? false) {
                let limit = min(expiresAt, family.slidingExpiresAt ?? expiresAt)
                return .expired(family, issuedAt: Date(epoch: tokenRow.created_at), expiresAt: limit)
            }
            try admit(family)
            try await sql.update("refresh_tokens").set("used_at", to: now.epochSeconds)
                .where("token_hash", .equal, hash).run()
            let next = TokenRow(
                token_hash: Secrets.sha256Hex(replacement), family_id: family.id, created_at: now.epochSeconds,
                expires_at: replacementExpiresAt(family).epochSeconds, used_at: nil)
            try await sql.insert(into: "refresh_tokens").model(next).run()
            return .rotated(family, tokenIssuedAt: Date(epoch: tokenRow.created_at))
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
