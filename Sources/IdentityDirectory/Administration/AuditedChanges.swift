import Foundation
import Logging

/// Every change through ``IdentityAdministration`` is one audit record (SPEC §2.13): the change
/// made, or the refusal that stopped it with its reason. Errors that decide nothing (a database
/// down) are not recorded: nothing was changed or refused.
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
        let value: T
        do {
            value = try await change()
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
        if let result {
            if let changed = result(value) { await record(activity, tenantID: tenantID, target: changed, failure: nil) }
        } else {
            await record(activity, tenantID: tenantID, target: target, failure: nil)
        }
        return value
    }

    /// A change to what every tenant shares (the service's token signing keys), already made:
    /// recorded in each tenant's log (a failure to list them is logged, not the change's failure).
    func auditEveryTenant(_ activity: AuditActivity, target: AuditTarget) async {
        do {
            for tenant in try await tenants.tenants() { await record(activity, tenantID: tenant.id, target: target, failure: nil) }
        } catch {
            Self.logger.error("audit record not written", metadata: ["activity": "\(activity.displayName)", "error": "\(error)"])
        }
    }

    /// Writes the record. The change it describes is already made: a record that cannot be
    /// written is logged as an error rather than turned into the change's failure.
    private func record(_ activity: AuditActivity, tenantID: UUID, target: AuditTarget?, failure: String?) async {
        guard let auditLog else { return }
        let audit = DirectoryAudit(
            tenantID: tenantID, at: clock.now, activity: activity, initiator: initiator, target: target, failureReason: failure)
        do {
            try await auditLog.record(audit)
        } catch {
            Self.logger.error(
                "audit record not written",
                metadata: ["activity": "\(activity.displayName)", "correlation": "\(initiator.correlationID)", "error": "\(error)"])
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
