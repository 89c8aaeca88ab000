import Foundation
import TodoModels

/// Security groups through the administration door (SPEC §2.14): every change checked and
/// audited like an account's.
extension IdentityAdministration {
    private var groupStore: DirectoryGroups {
        get throws {
            guard let groups else { throw AdministrationError.refused("Groups are not available here.") }
            return groups
        }
    }

    public func groups(tenantID: UUID) async throws -> [DirectoryGroup] { try await groupStore.groups(tenantID: tenantID) }

    public func group(tenantID: UUID, id: UUID) async throws -> DirectoryGroup? { try await groupStore.group(tenantID: tenantID, id: id) }

    /// Why a group's names are refused: a display name and mail nickname of 1 to 256 printable
    /// characters (the nickname ASCII without spaces or `@`, as Graph has it), a description of
    /// at most 1,024.
    static func problem(with group: DirectoryGroup) -> String? {
        guard (try? TextRules.name(group.displayName, maximumLength: 256).get()) == group.displayName else {
            return "A group's displayName must be 1 to 256 characters without controls, invisible characters or extra spaces."
        }
        guard !group.mailNickname.isEmpty, group.mailNickname.count <= 64,
            group.mailNickname.allSatisfy({ $0.isASCII && !$0.isWhitespace && !"@()\\[]\";:<>,".contains($0) && $0.asciiValue! >= 0x20 })
        else { return "A group's mailNickname is 1 to 64 ASCII characters without spaces, '@' or brackets." }
        if let description = group.description, description.count > 1024 || TextRules.printable(description) != description {
            return "A group's description is at most 1,024 printable characters."
        }
        return nil
    }

    private static func target(_ group: DirectoryGroup, modified: [AuditTarget.ModifiedProperty] = []) -> AuditTarget {
        AuditTarget(type: "Group", id: group.objectID, displayName: group.displayName, modified: modified)
    }

    public func createGroup(_ group: DirectoryGroup) async throws {
        try await audited(.addGroup, tenantID: group.tenantID, target: Self.target(group)) {
            if let problem = Self.problem(with: group) { throw AdministrationError.refused(problem) }
            guard try await groupStore.create(group) else {
                throw AdministrationError.refused("A tenant holds at most \(DirectoryGroups.maximumGroups) groups.")
            }
        }
    }

    public func updateGroup(_ group: DirectoryGroup, modified: [String]) async throws {
        try await audited(.updateGroup, tenantID: group.tenantID, target: Self.target(group, modified: modified.map { .init(name: $0, newValue: nil) })) {
            if let problem = Self.problem(with: group) { throw AdministrationError.refused(problem) }
            try await groupStore.update(group)
        }
    }

    public func deleteGroup(_ group: DirectoryGroup) async throws -> Bool {
        try await audited(.deleteGroup, tenantID: group.tenantID, target: Self.target(group), result: { $0 ? Self.target(group) : nil }) {
            try await groupStore.delete(tenantID: group.tenantID, id: group.id)
        }
    }

    public func members(of group: DirectoryGroup) async throws -> [GroupMember] { try await groupStore.members(of: group.id) }

    /// Adds a member of the group's own tenant (checked by the caller) to it; refused when it is
    /// one already, would make a cycle, or the group is full.
    public func addMember(_ member: GroupMember, to group: DirectoryGroup) async throws {
        let target = Self.target(group, modified: [.init(name: "Member", newValue: member.id.uuidString.lowercased())])
        try await audited(.addGroupMember, tenantID: group.tenantID, target: target) {
            do {
                try await groupStore.add(member, to: group.id, tenantID: group.tenantID, now: clock.now)
            } catch let refusal as GroupMembershipRefusal {
                switch refusal {
                case .alreadyMember:
                    throw AdministrationError.refused(
                        "One or more added object references already exist for the following modified properties: 'members'.")
                case .cycle: throw AdministrationError.refused("A group cannot contain itself, directly or through other groups.")
                case .full: throw AdministrationError.refused("A group holds at most \(DirectoryGroups.maximumMembers) direct members.")
                case .tooDeep: throw AdministrationError.refused("Groups nest at most \(DirectoryGroups.maximumDepth) deep.")
                }
            }
        }
    }

    public func removeMember(_ memberID: UUID, from group: DirectoryGroup) async throws -> Bool {
        let target = Self.target(group, modified: [.init(name: "Member", newValue: memberID.uuidString.lowercased())])
        return try await audited(.removeGroupMember, tenantID: group.tenantID, target: target, result: { $0 ? target : nil }) {
            try await groupStore.remove(memberID, from: group.id)
        }
    }

    /// The groups `memberID` is directly in.
    public func directGroups(of memberID: UUID) async throws -> [UUID] { try await groupStore.directGroups(of: memberID) }

    /// Every group `memberID` is in, through nesting too.
    public func transitiveGroups(of memberID: UUID) async throws -> Set<UUID> { try await groupStore.transitiveGroups(of: memberID) }
}
