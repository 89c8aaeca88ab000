import Foundation
import PostgresNIO
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

    /// Asks PostgreSQL, on another connection, whether the transaction that inserted `mark`
    /// committed. The marker row is the proof: an xid is none across a crash restart, where
    /// PostgreSQL hands the next transaction the xid of the lost, unflushed one, and
    /// `txid_status` then answers `committed` for someone else's work (issue 51, F1). So only the
    /// marker says committed; `txid_status` may still say aborted (an xid is given out again only
    /// when its first owner never became durable, so ours did not commit either), or that the xid
    /// is in the future (the same, after a restart); anything else is asked again until the
    /// deadline, then unknown.
    func commitOutcome(of mark: CommitMark, table: String) async -> CommitOutcome {
        let clock = ContinuousClock()
        let end = clock.now + Self.commitResolutionDeadline
        while clock.now < end {
            // Each question bounded too: one waiting on a lease or a statement must not outlast the whole.
            do {
                let asked = try await withDeadline(.seconds(2), "commit marker") { [self] in
                    try await rows(
                        "SELECT CASE WHEN EXISTS (SELECT 1 FROM \(table) WHERE id = ?) THEN 1 ELSE 0 END AS marked, txid_status(?) AS status",
                        [.text(mark.id), .integer(mark.transactionID)])
                }
                if let row = asked.first {
                    if try row.integer("marked") != 0 { return .committed }
                    if try row.optionalText("status") == "aborted" { return .aborted }
                }
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "22023" {
                // "transaction ID … is in the future": PostgreSQL restarted before our xid was durable.
                return .aborted
            } catch {}
            guard (try? await Task.sleep(for: Self.commitResolutionPause)) != nil else { return .unknown }
        }
        return .unknown
    }

    /// The table of commit markers: one row per write transaction, inserted just before its
    /// COMMIT, kept a few minutes (``sweepMarkers(now:)``).
    static let markerTable = "storage_commit_markers"
    /// How long a marker is kept: far beyond the recovery's deadline and clock skew between instances.
    static let markerLifetime: TimeInterval = 120

    /// Notes the transaction just before COMMIT: a marker row of its own (a time-ordered id) and
    /// its xid; nil when it wrote nothing, whose lost COMMIT then loses nothing either.
    static func mark(_ sql: any SQLDatabase, table: String) async throws -> CommitMark? {
        let id = CommitMark.newID(now: Date())
        let row: (any SQLRow)?
        do {
            row = try await sql.raw(
                "INSERT INTO \(unsafeRaw: table) (id) SELECT \(bind: id) WHERE txid_current_if_assigned() IS NOT NULL RETURNING txid_current() AS xid"
            ).first()
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {
            // undefined_table: the schema was made again under this process (a database dropped
            // and migrated anew at the same URL).
            throw MarkerTableMissing()
        }
        guard let xid = try row?.decode(column: "xid", as: Int64.self) else { return nil }
        return CommitMark(id: id, transactionID: xid)
    }
}

/// The commit markers' table is not there (``PostgresDatabase/mark(_:)``): the transaction was
/// rolled back before its COMMIT, so it may be run again once the table is made.
struct MarkerTableMissing: Error {}

/// A write transaction's proof of commit (``PostgresDatabase/mark(_:)``).
struct CommitMark: Sendable, Equatable {
    var id: String
    var transactionID: Int64

    /// 12 hexadecimal digits of milliseconds since 1970, then 16 random ones: ordered by time, so
    /// old markers go in one range delete.
    static func newID(now: Date) -> String {
        let milliseconds = UInt64(max(0, now.timeIntervalSince1970 * 1000))
        let time = String(milliseconds, radix: 16)
        return String(repeating: "0", count: max(0, 12 - time.count)) + time + "-" + String(format: "%016llx", UInt64.random(in: .min ... .max))
    }
}
