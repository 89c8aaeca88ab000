import Foundation
import SQLKit
import Storage

/// Lockout counters for sign-in names that no account has. Without them, ten wrong passwords
/// for a name answer "locked" only when an account exists, which tells an attacker which
/// addresses have accounts (the security issue's L-6). With them, every name locks alike.
extension SQLUserDirectory {
    struct UnknownNameRow: Codable {
        var tenantId: String
        var nameKey: String
        var source: String
        var failedAttempts: Int64
        var lockoutCount: Int64
        var lockedUntil: Int64?
        var lastFailedFingerprint: String?
        var updatedAt: Int64

        var lockout: LockoutState {
            LockoutState(stored: failedAttempts, lockoutCount, lockedUntil: lockedUntil, fingerprint: lastFailedFingerprint)
        }
    }

    /// The source of the name-wide counter (a real address never looks like this).
    static let everySource = "*"

    public func updateUnknownNameLockout<Decision: Sendable>(
        tenantID: UUID, nameKey: String, source: String, now: Date,
        _ transition: @escaping @Sendable (LockoutState, LockoutState) -> (LockoutState, LockoutState, Decision)
    ) async throws -> Decision {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.transaction { sql -> Decision in
            // Both rows exist before they are locked, so concurrent first attempts queue on the
            // same rows (PostgreSQL) instead of racing to insert them.
            for place in [source, Self.everySource] {
                try await sql.insert(into: "lockout_unknown_names").model(
                    UnknownNameRow(
                        tenantId: tenant, nameKey: nameKey, source: place, failedAttempts: 0, lockoutCount: 0, lockedUntil: nil,
                        lastFailedFingerprint: nil, updatedAt: now.epochSeconds), with: .snakeCase
                ).ignoringConflicts(with: ["tenant_id", "name_key", "source"]).run()
            }
            func row(_ place: String) async throws -> LockoutState {
                try await sql.select().columns("*").from("lockout_unknown_names").where("tenant_id", .equal, tenant)
                    .where("name_key", .equal, nameKey).where("source", .equal, place).for(.update)
                    .first(decoding: UnknownNameRow.self, with: .snakeCase)?.lockout ?? LockoutState()
            }
            let global = try await row(Self.everySource)
            let current = try await row(source)
            let (nextSource, nextGlobal, decision) = transition(current, global)
            for (place, state) in [(source, nextSource), (Self.everySource, nextGlobal)] {
                try await sql.update("lockout_unknown_names")
                    .set("failed_attempts", to: Int64(state.failedAttempts)).set("lockout_count", to: Int64(state.lockoutCount))
                    .set("locked_until", to: state.lockedUntil?.epochSeconds).set(
                        "last_failed_fingerprint", to: state.lastFailedFingerprint
                    )
                    .set("updated_at", to: now.epochSeconds)
                    .where("tenant_id", .equal, tenant).where("name_key", .equal, nameKey).where("source", .equal, place).run()
            }
            return decision
        }
    }
}
