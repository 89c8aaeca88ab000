import Foundation
import SQLKit
import Storage

/// A role an account holds in its tenant's directory. `admin` opens the admin console
/// (SPEC §2.13); Entra's name for it is Global Administrator.
public enum DirectoryRole: String, Sendable, CaseIterable, Codable {
    case admin
}

/// Who holds which directory role, per account (a deleted account's roles go with it).
package struct DirectoryRoles: Sendable {
    let database: any Database

    package init(database: any Database) { self.database = database }

    package func roles(of userID: UUID) async throws -> Set<DirectoryRole> {
        let rows = try await database.rows(
            "SELECT role FROM directory_role_members WHERE user_id = ?", [.text(userID.uuidString.lowercased())])
        return Set(try rows.compactMap { DirectoryRole(rawValue: try $0.text("role")) })
    }

    /// The tenant's holders of `role`.
    package func members(of role: DirectoryRole, tenantID: UUID) async throws -> [UUID] {
        try await database.rows(
            "SELECT user_id FROM directory_role_members WHERE tenant_id = ? AND role = ? ORDER BY user_id",
            [.text(tenantID.uuidString.lowercased()), .text(role.rawValue)]
        ).compactMap { UUID(uuidString: try $0.text("user_id")) }
    }

    /// Gives `user` the role; false when it held it already.
    package func add(_ role: DirectoryRole, to user: UserAccount, now: Date) async throws -> Bool {
        guard !(try await roles(of: user.id).contains(role)) else { return false }
        try await database.singleStatement { sql in
            try await sql.insert(into: "directory_role_members").columns("user_id", "role", "tenant_id", "created_at")
                .values(
                    SQLBind(user.objectID), SQLBind(role.rawValue), SQLBind(user.tenantID.uuidString.lowercased()),
                    SQLBind(now.epochSeconds)
                )
                .ignoringConflicts().run()
        }
        return true
    }

    /// Takes the role from `user`; false when it did not hold it.
    package func remove(_ role: DirectoryRole, from user: UserAccount) async throws -> Bool {
        guard try await roles(of: user.id).contains(role) else { return false }
        try await database.singleStatement { sql in
            try await sql.delete(from: "directory_role_members").where("user_id", .equal, user.objectID)
                .where("role", .equal, role.rawValue).run()
        }
        return true
    }
}
