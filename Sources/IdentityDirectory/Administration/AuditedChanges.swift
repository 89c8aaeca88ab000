import Foundation
import Logging

/// Every change through ``IdentityAdministration`` is one audit record (SPEC §2.13): the change
/// made, or the refusal that stopped it with its reason. Errors that decide nothing (a database
/// down) are not recorded: nothing was changed or refused.
///
/// A change and its record commit in one transaction (``Storage/Database/atomically(_:)``), so
/// no change is stored without its record, nor a record without its change (issue 51, F4: a
/// PostgreSQL restart between the two had left an acknowledged user with no "Add user"). A
/// refusal rolls back whatever the change wrote before it, and its record is written alone.
extension IdentityAdministration {
    private static let logger = Logger(label: "todo.audit")

    /// Runs `change` and records it as `activity` by ``initiator``: on success the target
    /// `result` names (nil from it: nothing changed, nothing recorded), else `target`; on a
    /// refusal (``AdministrationError``, ``PolicyRejection``, ``PolicyKeySetError``) its reason,
    /// and the refusal is rethrown.
    @discardableResult
    func audited<T>(
        _ activity: AuditActivity, tenantID: UUID, target: AuditTarget?, result: ((T) -> AuditTarget?)? = nil,
        _ change: () async throws -> T
    ) async throws -> T {
        do {
            return try await atomically {
                let value = try await change()
                if let result {
                    if let changed = result(value) { try await write(activity, tenantID: tenantID, target: changed, failure: nil) }
                } else {
                    try await write(activity, tenantID: tenantID, target: target, failure: nil)
                }
                return value
            }
        } catch let refusal as AdministrationError {
            await record(activity, tenantID: tenantID, target: target, failure: refusal.description)
            throw refusal
        } catch let refusal as PolicyRejection {
            await record(activity, tenantID: tenantID, target: target ?? .policy(refusal.policyID), failure: refusal.description)
            throw refusal
        } catch let refusal as PolicyKeySetError {
            await record(activity, tenantID: tenantID, target: target, failure: refusal.message)
            throw refusal
        }
    }

    /// Runs `work` as one transaction of the directory's database: changes made in several
    /// steps, and their records, commit together.
    func atomically<T>(_ work: () async throws -> T) async throws -> T {
        guard let auditLog else { return try await work() }
        return try await auditLog.database.atomically(work)
    }

    /// A change to what every tenant shares (the service's token signing keys), recorded in each
    /// tenant's log, in the change's transaction.
    func auditEveryTenant(_ activity: AuditActivity, target: AuditTarget) async throws {
        for tenant in try await tenants.tenants() { try await write(activity, tenantID: tenant.id, target: target, failure: nil) }
    }

    /// Writes the record of a change, inside its transaction: a record that cannot be written
    /// fails the change.
    private func write(_ activity: AuditActivity, tenantID: UUID, target: AuditTarget?, failure: String?) async throws {
        guard let auditLog else { return }
        try await auditLog.record(
            DirectoryAudit(tenantID: tenantID, at: clock.now, activity: activity, initiator: initiator, target: target, failureReason: failure))
    }

    /// Writes the record of a refusal, which changed nothing, on its own: after the work it is
    /// part of has ended (a refused file of a multi-file upload rolls the others back, and its
    /// record must stay). One that cannot be written is logged as an error rather than hiding
    /// the refusal.
    private func record(_ activity: AuditActivity, tenantID: UUID, target: AuditTarget?, failure: String?) async {
        guard let auditLog else { return }
        let audit = DirectoryAudit(tenantID: tenantID, at: clock.now, activity: activity, initiator: initiator, target: target, failureReason: failure)
        let correlation = initiator.correlationID
        await auditLog.database.afterEnd {
            do {
                try await auditLog.record(audit)
            } catch {
                Self.logger.error(
                    "audit record not written",
                    metadata: ["activity": "\(activity.displayName)", "correlation": "\(correlation)", "error": "\(error)"])
            }
        }
    }
}

extension AuditTarget {
    /// An account. Its email is named: the record is about that user.
    static func user(_ user: UserAccount, modified: [ModifiedProperty] = []) -> AuditTarget {
        AuditTarget(
            type: "User", id: user.objectID, displayName: user.displayName, userPrincipalName: user.presentableEmail, modified: modified)
    }

    static func application(_ app: AppRegistration, modified: [ModifiedProperty] = []) -> AuditTarget {
        AuditTarget(type: "Application", id: app.clientIDString, displayName: app.displayName, modified: modified)
    }

    static func policy(_ id: String) -> AuditTarget { AuditTarget(type: "Policy", id: id) }

    /// A key container, by its stored id (`B2C_1A_` added as the store adds it), so every record
    /// of one container names it alike.
    static func keySet(_ id: String) -> AuditTarget { AuditTarget(type: "KeyContainer", id: PolicyKeySetLibrary.normalizedID(id)) }
}
