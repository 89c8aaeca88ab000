import Foundation
import SQLKit
import Storage

/// A security group of a tenant (Graph `group` with `securityEnabled`, SPEC §2.14).
public struct DirectoryGroup: Sendable, Equatable {
    public var id: UUID
    public var tenantID: UUID
    public var displayName: String
    public var description: String?
    public var mailNickname: String
    public var createdAt: Date

    public var objectID: String { id.uuidString.lowercased() }

    public init(id: UUID, tenantID: UUID, displayName: String, description: String?, mailNickname: String, createdAt: Date) {
        self.id = id
        self.tenantID = tenantID
        self.displayName = displayName
        self.description = description
        self.mailNickname = mailNickname
        self.createdAt = createdAt
    }
}

/// A member of a group: an account, or another group (nested groups, as Entra's security groups have).
public enum GroupMember: Sendable, Equatable, Hashable {
    case user(UUID)
    case group(UUID)

    public var id: UUID {
        switch self {
        case .user(let id), .group(let id): id
        }
    }
}

/// Why a membership change is refused.
public enum GroupMembershipRefusal: Error, Equatable {
    /// The member is in the group already (Graph: "One or more added object references already exist").
    case alreadyMember
    /// The group would contain itself, directly or through others.
    case cycle
    /// A group holds at most ``DirectoryGroups/maximumMembers`` direct members.
    case full
    /// Groups nest at most ``DirectoryGroups/maximumDepth`` deep.
    case tooDeep
}

/// Groups and their memberships. A deleted account or group leaves every group it was in
/// (foreign keys); the `groups` claim and `checkMemberGroups` read memberships transitively.
package struct DirectoryGroups: Sendable {
    let database: any Database
    /// A tenant holds at most this many groups; a group this many direct members.
    package static let maximumGroups = 10_000
    package static let maximumMembers = 10_000
    /// Groups nest at most this deep (adding a member that would make it deeper is refused).
    static let maximumDepth = 16

    package init(database: any Database) { self.database = database }

    private static func group(_ row: StoredRow) throws -> DirectoryGroup? {
        guard let id = UUID(uuidString: try row.text("id")), let tenant = UUID(uuidString: try row.text("tenant_id")) else { return nil }
        return DirectoryGroup(
            id: id, tenantID: tenant, displayName: try row.text("display_name"), description: try row.optionalText("description"),
            mailNickname: try row.text("mail_nickname"), createdAt: Date(timeIntervalSince1970: TimeInterval(try row.integer("created_at"))))
    }

    package func groups(tenantID: UUID) async throws -> [DirectoryGroup] {
        try await database.rows(
            "SELECT * FROM groups WHERE tenant_id = ? ORDER BY display_name, id", [.text(tenantID.uuidString.lowercased())]
        ).compactMap(Self.group)
    }

    package func group(tenantID: UUID, id: UUID) async throws -> DirectoryGroup? {
        try await database.rows(
            "SELECT * FROM groups WHERE tenant_id = ? AND id = ?", [.text(tenantID.uuidString.lowercased()), .text(id.uuidString.lowercased())]
        ).compactMap(Self.group).first
    }

    /// Adds the group; false when the tenant has its maximum already.
    package func create(_ group: DirectoryGroup) async throws -> Bool {
        let tenant = group.tenantID.uuidString.lowercased()
        return try await database.transaction { sql in
            let count = try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("groups")
                .where("tenant_id", .equal, tenant).first(decodingColumn: "n", as: Int.self) ?? 0
            guard count < Self.maximumGroups else { return false }
            try await sql.insert(into: "groups").columns("id", "tenant_id", "display_name", "description", "mail_nickname", "created_at")
                .values(
                    SQLBind(group.objectID), SQLBind(tenant), SQLBind(group.displayName), SQLBind(group.description),
                    SQLBind(group.mailNickname), SQLBind(group.createdAt.epochSeconds)
                ).run()
            return true
        }
    }

    package func update(_ group: DirectoryGroup) async throws {
        try await database.singleStatement { sql in
            try await sql.update("groups").set("display_name", to: group.displayName).set("description", to: group.description)
                .set("mail_nickname", to: group.mailNickname)
                .where("id", .equal, group.objectID).where("tenant_id", .equal, group.tenantID.uuidString.lowercased()).run()
        }
    }

    /// Removes the group and its memberships (in either direction); false when there was none.
    package func delete(tenantID: UUID, id: UUID) async throws -> Bool {
        let (tenant, group) = (tenantID.uuidString.lowercased(), id.uuidString.lowercased())
        return try await database.transaction { sql in
            guard try await sql.select().column("id").from("groups").where("id", .equal, group).where("tenant_id", .equal, tenant).first() != nil
            else { return false }
            try await sql.delete(from: "group_members").where("group_id", .equal, group).run()
            try await sql.delete(from: "group_members").where("member_group_id", .equal, group).run()
            try await sql.delete(from: "groups").where("id", .equal, group).run()
            return true
        }
    }

    /// The group's direct members, users first, each in id order.
    package func members(of groupID: UUID) async throws -> [GroupMember] {
        try await database.rows(
            "SELECT user_id, member_group_id FROM group_members WHERE group_id = ? ORDER BY member_group_id IS NOT NULL, member_id",
            [.text(groupID.uuidString.lowercased())]
        ).compactMap { row in
            if let user = try row.optionalText("user_id") { return UUID(uuidString: user).map(GroupMember.user) }
            return try row.optionalText("member_group_id").flatMap(UUID.init(uuidString:)).map(GroupMember.group)
        }
    }

    /// Adds `member` to the group. Under a per-tenant lock on PostgreSQL (one transaction at a
    /// time on SQLite), so two instances cannot each add half of a cycle.
    /// Throws ``GroupMembershipRefusal`` when the change is not allowed (nothing written).
    package func add(_ member: GroupMember, to groupID: UUID, tenantID: UUID, now: Date) async throws {
        let (group, tenant) = (groupID.uuidString.lowercased(), tenantID.uuidString.lowercased())
        let engine = database.engine
        let outcome = try await database.transaction { sql -> GroupMembershipRefusal? in
            if engine == .postgres {
                try await sql.raw("SELECT pg_advisory_xact_lock(\(bind: Self.lockKey(tenantID)))").run()
            }
            let existing = try await sql.select().column("member_id").from("group_members")
                .where("group_id", .equal, group).where("member_id", .equal, member.id.uuidString.lowercased()).first()
            if existing != nil { return .alreadyMember }
            let count = try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("group_members")
                .where("group_id", .equal, group).first(decodingColumn: "n", as: Int.self) ?? 0
            if count >= Self.maximumMembers { return .full }
            if case .group(let child) = member {
                // A cycle: the group is the child, or among the groups the child contains.
                // And nesting stays within ``maximumDepth`` levels, counted through both
                // (what is above the group and what is below the child), so every walk of
                // it (the groups claim, checkMemberGroups) sees all of it.
                if child == groupID { return .cycle }
                let below = try await Self.levels(from: child.uuidString.lowercased(), down: true, sql: sql, stopAt: group)
                guard let below else { return .cycle }
                let above = try await Self.levels(from: group, down: false, sql: sql, stopAt: nil) ?? Self.maximumDepth
                if above + below > Self.maximumDepth { return .tooDeep }
            }
            let (user, child): (String?, String?) =
                switch member {
                case .user(let id): (id.uuidString.lowercased(), nil)
                case .group(let id): (nil, id.uuidString.lowercased())
                }
            try await sql.insert(into: "group_members")
                .columns("group_id", "member_id", "user_id", "member_group_id", "tenant_id", "created_at")
                .values(
                    SQLBind(group), SQLBind(member.id.uuidString.lowercased()), SQLBind(user), SQLBind(child), SQLBind(tenant),
                    SQLBind(now.epochSeconds)
                ).run()
            return nil
        }
        if let outcome { throw outcome }
    }

    /// How many levels of groups there are from `start` (itself one) down through its member
    /// groups, or up through the groups it is in; nil when walking down reaches `stopAt` (a cycle).
    private static func levels(from start: String, down: Bool, sql: any SQLDatabase, stopAt: String?) async throws -> Int? {
        var frontier = [start]
        var seen = Set(frontier)
        var depth = 0
        while !frontier.isEmpty, depth <= maximumDepth {
            depth += 1
            let next = try await sql.select().column(down ? "member_group_id" : "group_id").from("group_members")
                .where(down ? "group_id" : "member_group_id", .in, frontier).where(down ? "member_group_id" : "group_id", .isNot, SQLLiteral.null)
                .all(decodingColumn: down ? "member_group_id" : "group_id", as: String.self)
            if let stopAt, next.contains(stopAt) { return nil }
            frontier = next.filter { seen.insert($0).inserted }
        }
        return depth
    }

    /// Takes `memberID` out of the group; false when it was not a member.
    package func remove(_ memberID: UUID, from groupID: UUID) async throws -> Bool {
        let (group, member) = (groupID.uuidString.lowercased(), memberID.uuidString.lowercased())
        return try await database.transaction { sql in
            guard try await sql.select().column("member_id").from("group_members")
                .where("group_id", .equal, group).where("member_id", .equal, member).first() != nil
            else { return false }
            try await sql.delete(from: "group_members").where("group_id", .equal, group).where("member_id", .equal, member).run()
            return true
        }
    }

    /// The groups `memberID` (a user or a group) is a direct member of.
    package func directGroups(of memberID: UUID) async throws -> [UUID] {
        try await database.rows(
            "SELECT group_id FROM group_members WHERE member_id = ? ORDER BY group_id", [.text(memberID.uuidString.lowercased())]
        ).compactMap { UUID(uuidString: try $0.text("group_id")) }
    }

    /// Every group `memberID` is in, directly or through nested groups (Graph's
    /// `transitiveMemberOf`, the `groups` claim, `checkMemberGroups`): one query per level of
    /// nesting; with `limit`, the walk stops once more than that many are found.
    package func transitiveGroups(of memberID: UUID, limit: Int? = nil) async throws -> Set<UUID> {
        var found = Set<String>()
        var frontier = [memberID.uuidString.lowercased()]
        for _ in 0..<Self.maximumDepth where !frontier.isEmpty {
            let next = try await database.read { [frontier] sql in
                try await sql.select().column("group_id").from("group_members").where("member_id", .in, frontier)
                    .all(decodingColumn: "group_id", as: String.self)
            }
            frontier = next.filter { found.insert($0).inserted }
            if let limit, found.count > limit { break }
        }
        return Set(found.compactMap(UUID.init(uuidString:)))
    }

    static func lockKey(_ tenantID: UUID) -> Int64 {
        // Groups' lock space: a fixed prefix and the tenant's first bytes.
        let bytes = withUnsafeBytes(of: tenantID.uuid) { Array($0.prefix(6)) }
        var key = Int64(0x4752) << 48
        for (index, byte) in bytes.enumerated() { key |= Int64(byte) << (8 * Int64(index)) }
        return key
    }
}
