import Foundation

/// Microsoft Graph's permissions this service serves, with Graph's own ids (Microsoft Graph
/// permissions reference, "All permissions and IDs"): the `appRoles` and
/// `oauth2PermissionScopes` of Graph's service principal, and what `requiredResourceAccess`
/// and `appRoleAssignments` name by id.
public enum GraphPermissions {
    /// Application permissions (`roles` of app-only tokens), by name and id.
    public static let appRoles: [(name: String, id: UUID)] = [
        ("User.Read.All", "df021288-bdef-4463-88db-98f22de89214"),
        ("User.ReadWrite.All", "741f803b-c850-494e-b5df-cde7c675a1ca"),
        ("Policy.ReadWrite.TrustFramework", "79a677f7-b79d-40d0-a36a-3e6f8688dd7a"),
        ("TrustFrameworkKeySet.Read.All", "fff194f1-7dce-4428-8301-1badb5518201"),
        ("TrustFrameworkKeySet.ReadWrite.All", "4a771c9a-1cf2-4609-b88e-3d3e02d539cd"),
        ("AuditLog.Read.All", "b0afded3-3588-46d8-8b3d-9842eff778da"),
        ("RoleManagement.Read.Directory", "483bed4a-2ad3-4361-a73b-c83ccdbdc53c"),
        ("RoleManagement.ReadWrite.Directory", "9e3f62cf-ca93-4989-b6ce-bf83c28f9fe8"),
        ("Application.Read.All", "9a5d68dd-52b0-4cc2-bd40-abcf44ac3a30"),
        ("Application.ReadWrite.All", "1bfefb4e-e0b5-418b-a88f-73c46d2cc8e9"),
        ("AppRoleAssignment.ReadWrite.All", "06b708a9-e830-4db3-a914-8e69da51d44f"),
        ("DelegatedPermissionGrant.ReadWrite.All", "8e8e4742-1d95-4f68-9d56-6ee75648c72a"),
        ("Group.Read.All", "5b567255-7703-4780-807c-7be8301ae99b"),
        ("Group.ReadWrite.All", "62a82d76-70ea-41e2-9197-370581804d09"),
        ("GroupMember.Read.All", "98830695-27a2-44f7-8c18-0c3ebc9698f6"),
        ("GroupMember.ReadWrite.All", "dbaae8cf-10b5-4b86-a4a1-f871c94c6695"),
        ("IdentityUserFlow.Read.All", "1b0c317f-dd31-4305-9932-259a8b6e8099"),
        ("IdentityUserFlow.ReadWrite.All", "65319a09-a2be-469d-8782-f6b07debf789"),
        ("APIConnectors.Read.All", "b86848a7-d5b1-41eb-a9b4-54a4e6306e97"),
        ("APIConnectors.ReadWrite.All", "1dfe531a-24a6-4f1b-80f4-7a0dc5a0a171"),
        ("IdentityProvider.Read.All", "e321f0bb-e7f7-481e-bb28-e3b0b32d4bd0"),
        ("IdentityProvider.ReadWrite.All", "90db2b9a-d928-4d33-a4dd-8442ae3d41e4"),
        ("CustomAuthenticationExtension.Read.All", "88bb2658-5d9e-454f-aacd-a3933e079526"),
        ("CustomAuthenticationExtension.ReadWrite.All", "c2667967-7050-4e7e-b059-4cbbb3811d03"),
    ].map { ($0.0, UUID(uuidString: $0.1)!) }

    /// Delegated permissions (`scp`), by name and id.
    public static let scopes: [(name: String, id: UUID)] = [
        ("User.Read", "e1fe6dd8-ba31-4d61-89e7-88639da4683d"),
        ("openid", "37f7f235-527c-4136-accd-4a02d197296e"),
        ("offline_access", "7427e0e9-2fba-42fe-b0c0-848c9e6a8182"),
        ("profile", "14dad69e-099b-42c9-810b-d002981feec1"),
        ("email", "64a6cdd6-aab1-4aaf-94b8-3cc8405e90d0"),
    ].map { ($0.0, UUID(uuidString: $0.1)!) }

    public static func appRole(id: UUID) -> String? { appRoles.first { $0.id == id }?.name }
    public static func appRoleID(_ name: String) -> UUID? { appRoles.first { $0.name.lowercased() == name.lowercased() }?.id }
    public static func scope(id: UUID) -> String? { scopes.first { $0.id == id }?.name }
}
