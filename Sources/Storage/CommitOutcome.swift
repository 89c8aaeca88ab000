import Foundation
import SQLKit

/// What became of a transaction whose connection was lost during COMMIT.
enum CommitOutcome: Equatable {
    case committed
    case aborted
    /// PostgreSQL did not say within the deadline (it stayed away), or no longer knows.
    case unknown
}

extension PostgresDatabase {
    /// How long a transaction that lost its connection during COMMIT waits to learn its outcome:
    /// long enough for a PostgreSQL restart (about a second under the scale-out test's load),
    /// short enough that the request is still answered well within a client's timeout.
    static let commitResolutionDeadline: Duration = .seconds(6)
    static let commitResolutionPause: Duration = .milliseconds(200)

    /// Asks PostgreSQL, on another connection, whether transaction `id` committed: the purpose
    /// PostgreSQL gives `txid_status` ("Applications may use it to determine whether a
    /// transaction committed or aborted when the application and database server become
    /// disconnected while a COMMIT is in progress", System Information Functions). A transaction
    /// still `in progress` (its backend finishing the COMMIT) is asked about again.
    func commitOutcome(of id: Int64) async -> CommitOutcome {
        let clock = ContinuousClock()
        let end = clock.now + Self.commitResolutionDeadline
        while clock.now < end {
            // Each question bounded too: one waiting on a lease or a statement must not outlast the whole.
            let asked = try? await withDeadline(.seconds(2), "txid_status") { [self] in
                try await rows("SELECT txid_status(?) AS status", [.integer(id)])
            }
            if let row = asked?.first {
                switch try? row.optionalText("status") {
                case "committed": return .committed
                case "aborted": return .aborted
                case "in progress": break
                // NULL: too old to tell (wraparound); an unreadable answer tells nothing either.
                default: return .unknown
                }
            }
            guard (try? await Task.sleep(for: Self.commitResolutionPause)) != nil else { return .unknown }
        }
        return .unknown
    }

    /// The transaction's id, noted just before COMMIT; nil when it wrote nothing, whose lost
    /// COMMIT then loses nothing either.
    @Sendable static func transactionID(_ sql: any SQLDatabase) async throws -> Int64? {
        try await sql.raw("SELECT txid_current_if_assigned() AS id").first()?.decode(column: "id", as: Int64?.self) ?? nil
    }
}
