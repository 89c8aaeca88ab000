import Foundation
import SQLKit
import Storage
import WireCoding

/// A flow's multi-factor authentication (SPEC §2.11, https://learn.microsoft.com/azure/active-directory-b2c/multi-factor-authentication): which
/// second factors it offers and when it asks for one.
public struct MFAPolicy: Sendable, Codable, Equatable {
    public enum Method: String, Sendable, Codable, CaseIterable {
        /// An authenticator app's time-based code (RFC 6238: SHA-1, 6 digits, 30 s).
        case totp
        /// A one-time code mailed to the account's address, through the outbox here.
        case email
    }

    public enum Enforcement: String, Sendable, Codable, CaseIterable {
        case off
        /// Every sign-in that is not already backed by a second factor in this browser's session.
        case always
        /// Only in a browser that has not passed a second factor for this account before.
        case conditional
    }

    public var methods: [Method]
    public var enforcement: Enforcement

    public init(methods: [Method], enforcement: Enforcement) {
        self.methods = methods
        self.enforcement = enforcement
    }

    public static let off = MFAPolicy(methods: [], enforcement: .off)

    enum CodingKeys: String, CodingKey { case methods, enforcement }

    /// `methods` may be left out: an authenticator app, B2C's TOTP method.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        enforcement = try container.decode(Enforcement.self, forKey: .enforcement)
        methods = try container.decodeIfPresent([Method].self, forKey: .methods) ?? [.totp]
    }

    package var isOn: Bool { enforcement != .off && !methods.isEmpty }
}

/// What a sign-in had established when it stopped for a second factor: enough to finish it
/// once the factor is proven.
package struct PendingSignIn: Sendable, Codable, Equatable {
    package var userID: UUID
    var identityProvider: IdentityProviderKind
    var newUser: Bool
    var authTime: Date
    package var method: MFAPolicy.Method

    package init(
        userID: UUID,
        identityProvider: IdentityProviderKind,
        newUser: Bool,
        authTime: Date,
        method: MFAPolicy.Method
    ) {
        self.userID = userID
        self.identityProvider = identityProvider
        self.newUser = newUser
        self.authTime = authTime
        self.method = method
    }
}

/// A second-factor challenge of one transaction.
package struct SecondFactorChallenge: Sendable {
    package var pending: PendingSignIn
    /// The secret offered for enrolment when the account has no authenticator yet (in clear
    /// here; sealed at rest).
    package var enrolmentSecret: String?
    /// Whether an email code was sent and is still valid.
    package var codeExpiresAt: Date?
}

/// How a presented second-factor code fared.
enum SecondFactorCheck: Equatable {
    case accepted
    case wrong
    /// The transaction's or the account's tries are used up (AADB2C90151).
    case tooManyTries
}

/// Second factors at rest: enrolled authenticators (secrets sealed with the data key), each
/// transaction's challenge, browsers that passed a factor, and the per-account failure window.
package protocol SecondFactorStore: Sendable {
    func hasAuthenticator(userID: UUID) async throws -> Bool
    /// The enrolled secret, or nil.
    func authenticatorSecret(userID: UUID) async throws -> String?
    /// Records `step` as used unless a later or equal step was: a code works once.
    func useStep(_ step: Int64, userID: UUID) async throws -> Bool
    /// Enrols `secret` with `step` used; false if the account got an authenticator meanwhile.
    func enrol(userID: UUID, secret: String, step: Int64, now: Date) async throws -> Bool
    func removeAuthenticator(userID: UUID) async throws

    func startChallenge(interactionID: String, pending: PendingSignIn, enrolmentSecret: String?, now: Date) async throws
    func challenge(interactionID: String) async throws -> SecondFactorChallenge?
    /// Saves a new mailed code and queues its message, unless the last one went less than
    /// ``sendCooldown`` ago or ``sendsPerChallenge`` were sent: false then, and nothing is sent.
    func saveEmailCode(interactionID: String, code: String, now: Date, expiresAt: Date, mail: OutboxMessage) async throws -> Bool
    /// Whether `code` is the mailed one and unexpired.
    func emailCodeMatches(interactionID: String, code: String, now: Date) async throws -> Bool
    /// Takes one try of the transaction and of the account before a code is checked, so
    /// parallel guesses count too; false when either is used up.
    func takeTry(interactionID: String, userID: UUID, now: Date) async throws -> Bool
    /// After a right code: the account's failure window starts again, the challenge is gone.
    func succeeded(interactionID: String, userID: UUID) async throws

    func rememberBrowser(token: String, userID: UUID, expiresAt: Date) async throws
    func isKnownBrowser(token: String, userID: UUID, now: Date) async throws -> Bool
}

package struct SQLSecondFactorStore: SecondFactorStore {
    let database: any Database
    let dataKey: DataKey

    /// Tries per transaction, and per account within ``accountWindow``.
    static let triesPerTransaction: Int64 = 5
    static let triesPerAccount: Int64 = 10
    static let accountWindow: TimeInterval = 15 * 60

    private static func key(_ id: UUID) -> String { id.uuidString.lowercased() }
    private static func sealingContext(_ userID: UUID) -> String { "totp_authenticators.secret:\(key(userID))" }
    private static func enrolmentContext(_ interactionID: String) -> String { "mfa_challenges.secret:\(interactionID)" }
    private static func codeHash(_ code: String, interactionID: String) -> String { Secrets.sha256Hex("\(interactionID):\(code)") }

    package func hasAuthenticator(userID: UUID) async throws -> Bool {
        try await authenticatorSecret(userID: userID) != nil
    }

    package func authenticatorSecret(userID: UUID) async throws -> String? {
        let sealed = try await database.read { sql in
            try await sql.select().column("sealed_secret").from("totp_authenticators").where("user_id", .equal, Self.key(userID))
                .first(decodingColumn: "sealed_secret", as: String.self)
        }
        return try sealed.map { try dataKey.open($0, context: Self.sealingContext(userID)).value }
    }

    package func useStep(_ step: Int64, userID: UUID) async throws -> Bool {
        try await database.transaction { sql in
            // One conditional UPDATE: of two requests with the same code, one wins.
            !(try await sql.raw(
                "UPDATE totp_authenticators SET last_step = \(bind: step) WHERE user_id = \(bind: Self.key(userID)) AND last_step < \(bind: step) RETURNING user_id"
            ).all()).isEmpty
        }
    }

    package func enrol(userID: UUID, secret: String, step: Int64, now: Date) async throws -> Bool {
        let sealed = try dataKey.seal(secret, context: Self.sealingContext(userID))
        return try await database.transaction { sql in
            !(try await sql.raw(
                """
                INSERT INTO totp_authenticators (user_id, sealed_secret, last_step, created_at)
                VALUES (\(bind: Self.key(userID)), \(bind: sealed), \(bind: step), \(bind: now.epochSeconds))
                ON CONFLICT (user_id) DO NOTHING RETURNING user_id
                """
            ).all()).isEmpty
        }
    }

    package func removeAuthenticator(userID: UUID) async throws {
        try await database.transaction { sql in
            try await sql.delete(from: "totp_authenticators").where("user_id", .equal, Self.key(userID)).run()
        }
    }

    struct ChallengeRow: Codable {
        var interactionId: String
        var userId: String
        var details: String
        var sealedEnrolmentSecret: String?
        var emailCodeHash: String?
        var codeExpiresAt: Int64?
        var attempts: Int64
        var createdAt: Int64
    }

    package func startChallenge(interactionID: String, pending: PendingSignIn, enrolmentSecret: String?, now: Date) async throws {
        let sealed = try enrolmentSecret.map { try dataKey.seal($0, context: Self.enrolmentContext(interactionID)) }
        // A transaction has one challenge: a new sign-in in the same transaction replaces it and
        // keeps the tries and sends already used. One upsert, so concurrent sign-ins cannot collide.
        try await database.transaction { sql in
            try await sql.raw(
                """
                INSERT INTO mfa_challenges (interaction_id, user_id, details, sealed_enrolment_secret, attempts, created_at)
                VALUES (\(bind: interactionID), \(bind: Self.key(pending.userID)), \(bind: StoredJSON.encode(pending)), \(bind: sealed), 0,
                  \(bind: now.epochSeconds))
                ON CONFLICT (interaction_id) DO UPDATE SET user_id = excluded.user_id, details = excluded.details,
                  sealed_enrolment_secret = excluded.sealed_enrolment_secret, email_code_hash = NULL, code_expires_at = NULL
                """
            ).run()
        }
    }

    package func challenge(interactionID: String) async throws -> SecondFactorChallenge? {
        guard
            let row = try await database.read({ sql in
                try await sql.select().columns("*").from("mfa_challenges").where("interaction_id", .equal, interactionID)
                    .first(decoding: ChallengeRow.self, with: .snakeCase)
            }), let pending = StoredJSON.decode(PendingSignIn.self, row.details)
        else { return nil }
        return SecondFactorChallenge(
            pending: pending,
            enrolmentSecret: try row.sealedEnrolmentSecret.map {
                try dataKey.open($0, context: Self.enrolmentContext(interactionID)).value
            },
            codeExpiresAt: row.codeExpiresAt.map(Date.init(epoch:)))
    }

    static let sendCooldown: Int64 = 30
    static let sendsPerChallenge: Int64 = 5

    package func saveEmailCode(interactionID: String, code: String, now: Date, expiresAt: Date, mail: OutboxMessage) async throws -> Bool {
        let hash = Self.codeHash(code, interactionID: interactionID)
        return try await database.transaction { sql in
            let updated = try await sql.raw(
                """
                UPDATE mfa_challenges SET email_code_hash = \(bind: hash), code_expires_at = \(bind: expiresAt.epochSeconds),
                  sends = sends + 1, last_sent_at = \(bind: now.epochSeconds)
                WHERE interaction_id = \(bind: interactionID) AND sends < \(bind: Self.sendsPerChallenge)
                  AND (last_sent_at IS NULL OR last_sent_at <= \(bind: now.epochSeconds - Self.sendCooldown))
                RETURNING interaction_id
                """
            ).all()
            guard !updated.isEmpty else { return false }
            try await sql.insert(into: "outbox").model(OutboxRow(mail), with: .snakeCase).run()
            return true
        }
    }

    package func emailCodeMatches(interactionID: String, code: String, now: Date) async throws -> Bool {
        let row = try await database.read { sql in
            try await sql.select().columns("*").from("mfa_challenges").where("interaction_id", .equal, interactionID)
                .first(decoding: ChallengeRow.self, with: .snakeCase)
        }
        guard let row, let hash = row.emailCodeHash, let expires = row.codeExpiresAt, expires > now.epochSeconds else { return false }
        return Secrets.constantTimeEquals(hash, Self.codeHash(code, interactionID: interactionID))
    }

    package func takeTry(interactionID: String, userID: UUID, now: Date) async throws -> Bool {
        let user = Self.key(userID)
        let windowStart = now.epochSeconds - Int64(Self.accountWindow)
        return try await database.transaction { sql in
            let transactionTry = try await sql.raw(
                """
                UPDATE mfa_challenges SET attempts = attempts + 1
                WHERE interaction_id = \(bind: interactionID) AND attempts < \(bind: Self.triesPerTransaction) RETURNING attempts
                """
            ).all()
            guard !transactionTry.isEmpty else { return false }
            // The account's window: tries since the window started, restarted when it has passed.
            let accountTries = try await sql.raw(
                """
                INSERT INTO mfa_failures (user_id, tries, window_started_at) VALUES (\(bind: user), 1, \(bind: now.epochSeconds))
                ON CONFLICT (user_id) DO UPDATE SET
                  tries = CASE WHEN mfa_failures.window_started_at < \(bind: windowStart) THEN 1 ELSE mfa_failures.tries + 1 END,
                  window_started_at = CASE WHEN mfa_failures.window_started_at < \(bind: windowStart) THEN \(bind: now.epochSeconds)
                    ELSE mfa_failures.window_started_at END
                RETURNING tries
                """
            ).first(decodingColumn: "tries", as: Int64.self)
            return (accountTries ?? 0) <= Self.triesPerAccount
        }
    }

    package func succeeded(interactionID: String, userID: UUID) async throws {
        try await database.transaction { sql in
            try await sql.delete(from: "mfa_failures").where("user_id", .equal, Self.key(userID)).run()
            try await sql.delete(from: "mfa_challenges").where("interaction_id", .equal, interactionID).run()
        }
    }

    package func rememberBrowser(token: String, userID: UUID, expiresAt: Date) async throws {
        try await database.transaction { sql in
            try await sql.insert(into: "mfa_browsers").columns("token_hash", "user_id", "expires_at")
                .values(SQLBind(Secrets.sha256Hex(token)), SQLBind(Self.key(userID)), SQLBind(expiresAt.epochSeconds)).run()
        }
    }

    package func isKnownBrowser(token: String, userID: UUID, now: Date) async throws -> Bool {
        let hash = Secrets.sha256Hex(token)
        return try await database.read { sql in
            try await sql.select().column("user_id").from("mfa_browsers").where("token_hash", .equal, hash)
                .where("user_id", .equal, Self.key(userID)).where("expires_at", .greaterThan, now.epochSeconds).first()
        } != nil
    }

    package init(database: any Database, dataKey: DataKey) {
        self.database = database
        self.dataKey = dataKey
    }
}
