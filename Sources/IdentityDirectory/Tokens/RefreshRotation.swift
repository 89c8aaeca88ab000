import Foundation
import SQLKit
import Storage
import WireCoding

/// The refresh-token rotation (RFC 9700 §4.14.2): the grant that runs on every refresh, so the
/// usual case is one read and one write statement (issue 13); reuse is decided in a transaction.
extension SQLGrantStore {
    /// How long after a rotation a retry of its token still gets the unused successor, when the
    /// database failed in between: long enough for an outage and the client's back-off.
    static let outageRetryWindow: TimeInterval = 300

    /// What a successor is sealed to: the token it replaces.
    fileprivate static func successorContext(_ hash: String) -> String { "refresh_tokens.successor:\(hash)" }

    package func rotateRefreshToken(
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
                // and while the successor is unused, the same successor again. Likewise a retry
                // delayed by an outage (the reliability rerun's P-2): the rotation committed, its
                // answer was lost or was a 503 inviting the retry, and the database came back after
                // the interval. Not theft while the successor is unused, so the window widens to
                // ``outageRetryWindow`` when this process saw the database fail since the rotation.
                // Ages, not instants: the outage's on the system clock, the rotation's on the
                // service's (a test's manual clock), each measured from its own now.
                let sinceRotation = now.timeIntervalSince(usedAt)
                let outageSince = database.health.lastOutage.map { Date().timeIntervalSince($0) <= sinceRotation + 1 } ?? false
                if sinceRotation <= reuseInterval || (reuseInterval > 0 && outageSince && sinceRotation <= Self.outageRetryWindow),
                    let sealed,
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

    fileprivate static func presentedToken(_ hash: String, sql: any SQLDatabase, lock: Bool) async throws -> PresentedToken? {
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
    /// consumed (https://github.com/AzureAD/microsoft-authentication-library-for-objc/issues/1358, AADB2C90088).
    fileprivate static func triage(_ token: PresentedToken, binding: RefreshTokenBinding, now: Date) throws -> Triage {
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
}
