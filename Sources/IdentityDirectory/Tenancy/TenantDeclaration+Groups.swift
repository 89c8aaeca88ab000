import Foundation
import TodoModels

extension TenantDeclaration {
    /// A security group (SPEC §2.14) as the declaration carries it: its id (so Graph's id and the
    /// `groups` claim stay the same across an export and an apply), names, and members — accounts
    /// by email or object id, groups by id.
    public struct GroupPart: Codable, Sendable {
        var id: UUID
        var name: String
        var mailNickname: String?
        var description: String?
        var members: [String]?
        var memberGroups: [UUID]?
    }

    /// Makes or updates the declared groups and sets each one's members to exactly those
    /// declared; groups the file does not name stay as they are. Every member is found before
    /// the first write.
    func applyGroups(tenantID: UUID, administration: IdentityAdministration, now: Date, note: (String, String, Bool?) -> Void) async throws {
        guard let groups, !groups.isEmpty else { return }
        let declaredIDs = Set(groups.map(\.id))
        var wanted: [UUID: Set<GroupMember>] = [:]
        for part in groups {
            var members = Set<GroupMember>()
            for member in part.members ?? [] {
                do {
                    members.insert(.user(try await administration.findUser(tenantID: tenantID, emailOrID: member).id))
                } catch {
                    throw DeclarationError.invalid("group '\(part.name)': no account '\(TextRules.printable(member))' in the tenant")
                }
            }
            for child in part.memberGroups ?? [] {
                let exists = declaredIDs.contains(child) ? true : try await administration.group(tenantID: tenantID, id: child) != nil
                guard exists else {
                    throw DeclarationError.invalid("group '\(part.name)': no group \(child.uuidString.lowercased())")
                }
                members.insert(.group(child))
            }
            wanted[part.id] = members
        }
        for part in groups {
            let group = DirectoryGroup(
                id: part.id, tenantID: tenantID, displayName: part.name, description: part.description,
                mailNickname: part.mailNickname ?? String(part.name.filter { $0.isASCII && ($0.isLetter || $0.isNumber) }.prefix(64)),
                createdAt: Date(timeIntervalSince1970: TimeInterval(now.epochSeconds)))
            if let stored = try await administration.group(tenantID: tenantID, id: part.id) {
                if (stored.displayName, stored.description, stored.mailNickname) != (group.displayName, group.description, group.mailNickname) {
                    var changed = stored
                    (changed.displayName, changed.description, changed.mailNickname) = (group.displayName, group.description, group.mailNickname)
                    try await administration.updateGroup(changed, modified: ["displayName", "description", "mailNickname"])
                    note("group", "'\(part.name)'", false)
                }
            } else {
                try await administration.createGroup(group)
                note("group", "'\(part.name)'", nil)
            }
        }
        for part in groups {
            guard let group = try await administration.group(tenantID: tenantID, id: part.id) else { continue }
            let held = Set(try await administration.members(of: group))
            let wantedMembers = wanted[part.id] ?? []
            guard held != wantedMembers else { continue }
            for member in held.subtracting(wantedMembers) { _ = try await administration.removeMember(member.id, from: group) }
            for member in wantedMembers.subtracting(held) { try await administration.addMember(member, to: group) }
            note("group members", "'\(part.name)'", false)
        }
    }
}

extension IdentityAdministration {
    /// The tenant's groups as a declaration writes them.
    func declaredGroups(tenantID: UUID) async throws -> [TenantDeclaration.GroupPart]? {
        var parts: [TenantDeclaration.GroupPart] = []
        for group in try await groups(tenantID: tenantID) {
            var users: [String] = []
            var children: [UUID] = []
            for member in try await members(of: group) {
                switch member {
                case .user(let id):
                    let account = try await self.users.user(id: id)
                    users.append(account?.email ?? id.uuidString.lowercased())
                case .group(let id): children.append(id)
                }
            }
            parts.append(
                .init(
                    id: group.id, name: group.displayName, mailNickname: group.mailNickname, description: group.description,
                    members: users.isEmpty ? nil : users.sorted(), memberGroups: children.isEmpty ? nil : children.sorted { $0.uuidString < $1.uuidString }))
        }
        return parts.isEmpty ? nil : parts
    }
}
