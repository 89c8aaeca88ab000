import Foundation
import SQLKit
import Storage

/// Lockout counters for sign-in names that no account has. Without them, ten wrong passwords
/// for a name answer "locked" only when an account exists, which tells an attacker which
/// addresses have accounts (the security issue's L-6). With them, every name locks alike.
extension SQLUserDirectory {
    struct UnknownNameRow: Codable {
        var tenant_id: String
        var name_key: String
        var source: String
        var failed_attempts: Int64
        var lockout_count: Int64
        var locked_until: Int64?
        var last_failed_fingerprint: String?
        var updated_at: Int64

        var lockout: LockoutState {
            LockoutState(stored: failed_attempts, lockout_count, lockedUntil: locked_until, fingerprint: last_failed_fingerprint)
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
                        tenant_id: tenant, name_key: nameKey, source: place, failed_attempts: 0, lockout_count: 0, locked_until: nil,
                        last_failed_fingerprint: nil, updated_at: now.epochSeconds)
                ).ignoringConflicts(with: ["tenant_id", "name_key", "source"]).run()
            }
            func row(_ place: String) async throws -> LockoutState {
                try await sql.select().columns("*").from("lockout_unknown_names").where("tenant_id", .equal, tenant)
                    .where("name_key", .equal, nameKey).where("source", .equal, place).for(.update)
                    .first(decoding: UnknownNameRow.self)?.lockout ?? LockoutState()
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
