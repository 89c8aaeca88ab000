import Foundation
import SQLKit
import Storage
import WireCoding

/// Authorization codes and refresh tokens. Only SHA-256 hashes of the values are stored.
package protocol GrantStore: Sendable {
    func saveCode(_ code: String, grant: AuthorizationCodeGrant) async throws
    /// Whether `code` exists, is unexpired and has not been redeemed: the one case a lost answer
    /// may be sent again (a redeemed code presented again revokes what it bought).
    func isPending(_ code: String, now: Date) async throws -> Bool
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

package struct SQLGrantStore: GrantStore {
    let database: any Database
    /// Seals a rotated token's successor for the reuse interval.
    let dataKey: DataKey

    package init(database: any Database, dataKey: DataKey) {
        self.database = database
        self.dataKey = dataKey
    }

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
        var extraClaims: String?

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
                claimOverrides: claimOverrides.flatMap { StoredJSON.decode([String: String].self, $0) },
                extraClaims: extraClaims.flatMap { StoredJSON.decode([String: JSONValue].self, $0) })
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

    package func saveCode(_ code: String, grant: AuthorizationCodeGrant) async throws {
        let row = CodeRow(
            codeHash: Secrets.sha256Hex(code), tenantId: grant.tenantID.uuidString.lowercased(),
            clientId: grant.clientID, userId: grant.userID.uuidString.lowercased(), policy: grant.policy,
            redirectUri: grant.redirectURI, scopes: StoredJSON.encode(grant.scopes), nonce: grant.nonce,
            codeChallenge: grant.codeChallenge, codeChallengeMethod: grant.codeChallengeMethod?.rawValue,
            authTime: grant.authTime.epochSeconds, newUser: grant.newUser,
            identityProvider: grant.identityProvider.rawValue, createdAt: grant.createdAt.epochSeconds,
            expiresAt: grant.expiresAt.epochSeconds, redeemedAt: nil, familyId: nil, face: grant.face.rawValue,
            claimOverrides: grant.claimOverrides.map { StoredJSON.encode($0) }, extraClaims: grant.extraClaims.map { StoredJSON.encode($0) })
        try await database.transaction { sql in try await sql.insert(into: "authorization_codes").model(row, with: .snakeCase).run() }
    }

    package func isPending(_ code: String, now: Date) async throws -> Bool {
        let rows = try await database.rows(
            "SELECT code_hash FROM authorization_codes WHERE code_hash = ? AND redeemed_at IS NULL AND expires_at > ?",
            [.text(Secrets.sha256Hex(code)), .integer(now.epochSeconds)])
        return !rows.isEmpty
    }

    package func redeemCode(_ code: String, clientID: String, policy: String, face: ProtocolFace, now: Date) async throws -> CodeRedemption {
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

    package func createFamily(_ family: RefreshTokenFamily, firstToken: String, tokenExpiresAt: Date, forCode code: String?) async throws {
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

    package func family(ofRefreshToken token: String) async throws -> RefreshTokenFamily? {
        let hash = Secrets.sha256Hex(token)
        return try await database.read { sql in
            try await sql.raw(
                "SELECT f.* FROM refresh_tokens t JOIN refresh_token_families f ON f.id = t.family_id WHERE t.token_hash = \(bind: hash)"
            ).first().map(FamilyRow.init(row:))?.family
        }
    }

    package func revokeFamily(id: String, reason: String, now: Date) async throws {
        try await database.transaction { sql in try await Self.revoke(family: id, reason: reason, now: now, sql: sql) }
    }

    static func revoke(family: String, reason: String, now: Date, sql: any SQLDatabase) async throws {
        try await sql.update("refresh_token_families").set("revoked_at", to: now.epochSeconds)
            .set("revoked_reason", to: reason).where("id", .equal, family).where("revoked_at", .is, SQLLiteral.null)
            .run()
    }

    package func sweep(now: Date) async throws -> Int {
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
    package init(epoch: Int64) { self.init(timeIntervalSince1970: TimeInterval(epoch)) }
}
