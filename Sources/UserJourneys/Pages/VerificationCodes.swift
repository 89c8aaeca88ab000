import Foundation
import IdentityDirectory
import SQLKit
import Storage
import WireCoding

/// The verification codes of sign-up and password reset: one per transaction, 5 tries each,
/// and per address a window of sends and wrong codes across transactions (``CodeLimits``).
extension SQLInteractionStore {
    struct VerificationRow: Codable {
        var requestId: String
        var emailLower: String
        var codeHash: String
        var attempts: Int64
        var expiresAt: Int64
        var userId: String?
    }

    package func saveVerificationCode(
        interactionID: String, tenantID: UUID, email: String, userID: UUID?, code: String, expiresAt: Date, mail: OutboxMessage?,
        limits: CodeLimits, now: Date
    ) async throws -> Bool {
        try await database.transaction { sql in
            let sends = try await Self.count(
                adding: (sends: 1, wrong: 0), returning: "sends", tenantID: tenantID, email: email, limits: limits, now: now, sql: sql)
            guard sends <= limits.sendsPerAddress else { return false }
            if let mail { try await sql.insert(into: "outbox").model(OutboxRow(mail), with: .snakeCase).run() }
            // Wrong tries survive a re-send, so asking for new codes does not reset the limit.
            let previous =
                try await sql.select().column("attempts").from("verification_codes")
                .where("request_id", .equal, interactionID).first(decodingColumn: "attempts", as: Int64.self) ?? 0
            let row = VerificationRow(
                requestId: interactionID, emailLower: email, codeHash: Secrets.sha256Hex(code),
                attempts: previous, expiresAt: expiresAt.epochSeconds, userId: userID?.uuidString.lowercased())
            try await sql.delete(from: "verification_codes").where("request_id", .equal, interactionID).run()
            try await sql.insert(into: "verification_codes").model(row, with: .snakeCase).run()
            return true
        }
    }

    /// Adds to the address's counters in its window (a new window when the last one has
    /// passed) and returns `column` (`sends` or `wrong`) after it. One upsert, which also takes
    /// the row's lock on PostgreSQL until the transaction ends (adding nothing takes just the
    /// lock), so concurrent transactions for one address cannot both slip under the limit.
    private static func count(
        adding: (sends: Int, wrong: Int), returning column: String, tenantID: UUID, email: String, limits: CodeLimits, now: Date,
        sql: any SQLDatabase
    ) async throws -> Int64 {
        let tenant = tenantID.uuidString.lowercased()
        let windowStart = now.epochSeconds - Int64(limits.windowSeconds)
        let (sends, wrong) = adding
        return try await sql.raw(
            """
            INSERT INTO code_limits (tenant_id, email_lower, window_started_at, sends, wrong)
            VALUES (\(bind: tenant), \(bind: email), \(bind: now.epochSeconds), \(bind: sends), \(bind: wrong))
            ON CONFLICT (tenant_id, email_lower) DO UPDATE SET
              sends = CASE WHEN code_limits.window_started_at < \(bind: windowStart) THEN \(bind: sends) ELSE code_limits.sends + \(bind: sends) END,
              wrong = CASE WHEN code_limits.window_started_at < \(bind: windowStart) THEN \(bind: wrong) ELSE code_limits.wrong + \(bind: wrong) END,
              window_started_at = CASE WHEN code_limits.window_started_at < \(bind: windowStart) THEN \(bind: now.epochSeconds) ELSE code_limits.window_started_at END
            RETURNING \(unsafeRaw: column)
            """
        ).first(decodingColumn: column, as: Int64.self) ?? 0
    }

    package func checkVerificationCode(
        interactionID: String, tenantID: UUID, email: String, code: String, limits: CodeLimits, now: Date
    ) async throws -> CodeCheck {
        let presented = Secrets.sha256Hex(code.trimmingCharacters(in: .whitespaces))
        return try await database.transaction { sql -> CodeCheck in
            // Across transactions: each new attempt brings a new code and 5 more tries, so the
            // address's wrong codes are counted too (the second outside attack's F-3: 200 wrong
            // guesses against one account, then the right code still reset the password).
            // Read under the address's row lock (taken by adding nothing), so concurrent checks for
            // one address take turns and none is compared past the limit.
            let wrong = try await Self.count(
                adding: (0, 0), returning: "wrong", tenantID: tenantID, email: email, limits: limits, now: now, sql: sql)
            if wrong >= limits.wrongPerAddress { return .throttled }
            // A row lock on PostgreSQL; SQLite's dialect renders none (its single writer serialises).
            let select = sql.select().columns("*").from("verification_codes").where("request_id", .equal, interactionID).for(.update)
            guard
                let row = try await select.first(decoding: VerificationRow.self, with: .snakeCase),
                row.emailLower == email, row.expiresAt > now.epochSeconds, row.attempts < 5
            else { return .refused }
            if Secrets.constantTimeEquals(row.codeHash, presented) {
                try await sql.delete(from: "verification_codes").where("request_id", .equal, interactionID).run()
                return .proves(account: row.userId.flatMap(UUID.init(uuidString:)))
            }
            try await sql.update("verification_codes").set("attempts", to: row.attempts + 1)
                .where("request_id", .equal, interactionID).run()
            _ = try await Self.count(
                adding: (0, 1), returning: "wrong", tenantID: tenantID, email: email, limits: limits, now: now, sql: sql)
            return .refused
        }
    }
}
