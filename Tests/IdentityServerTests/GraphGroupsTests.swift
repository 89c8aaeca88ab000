import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
import Yams

@testable import IdentityServer
@testable import UserJourneys

/// Graph's security groups (SPEC §2.14): members by `$ref`, nesting without cycles,
/// `memberOf`/`transitiveMemberOf`/`checkMemberGroups`, and the Entra face's `groups` claim.
@Suite("Microsoft Graph groups API")
struct GraphGroupsTests {
    static let roles = ["Group.ReadWrite.All", "User.ReadWrite.All", "Application.ReadWrite.All"]

    static func create(_ driver: Driver, _ auth: HTTPFields, _ name: String) async throws -> String {
        let created = try await driver.request(
            .post, "/v1.0/groups", headers: GraphApplicationsTests.json(auth),
            body: #"{"displayName":"\#(name)","mailNickname":"\#(name.replacingOccurrences(of: " ", with: ""))","mailEnabled":false,"securityEnabled":true}"#)
        #expect(created.status == .created, "\(created.text)")
        return try #require(created.json["id"] as? String)
    }

    static func add(_ driver: Driver, _ auth: HTTPFields, member: String, to group: String) async throws -> TestResponse {
        try await driver.request(
            .post, "/v1.0/groups/\(group)/members/$ref", headers: GraphApplicationsTests.json(auth),
            body: #"{"@odata.id":"https://graph.microsoft.com/v1.0/directoryObjects/\#(member)"}"#)
    }

    static func ids(_ response: TestResponse) -> Set<String> {
        Set((response.json["value"] as? [Any])?.compactMap { ($0 as? [String: Any])?["id"] as? String ?? $0 as? String } ?? [])
    }

    @Test("groups: members by $ref, nesting, memberOf, transitiveMemberOf, checkMemberGroups; cycles and duplicates refused", arguments: TestDatabase.engines)
    func membership(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.roles)
            let user = try await h.addUser()
            let testers = try await Self.create(driver, auth, "Testers")
            let staff = try await Self.create(driver, auth, "Staff")
            let everyone = try await Self.create(driver, auth, "Everyone")
            #expect(try await Self.add(driver, auth, member: user.objectID, to: testers).status == .noContent)
            #expect(try await Self.add(driver, auth, member: testers, to: staff).status == .noContent)
            #expect(try await Self.add(driver, auth, member: staff, to: everyone).status == .noContent)

            // Direct and transitive memberships, and checkMemberGroups through nesting.
            #expect(Self.ids(try await driver.get("/v1.0/users/\(user.objectID)/memberOf", headers: auth)) == [testers])
            #expect(Self.ids(try await driver.get("/v1.0/users/\(user.objectID)/transitiveMemberOf", headers: auth)) == [testers, staff, everyone])
            let other = UUID().uuidString.lowercased()
            let checked = try await driver.request(
                .post, "/v1.0/users/\(user.objectID)/checkMemberGroups", headers: GraphApplicationsTests.json(auth),
                body: #"{"groupIds":["\#(everyone)","\#(other)"]}"#)
            #expect(Self.ids(checked) == [everyone])
            let objects = try await driver.request(
                .post, "/v1.0/users/\(user.objectID)/getMemberObjects", headers: GraphApplicationsTests.json(auth), body: #"{"securityEnabledOnly":true}"#)
            #expect(Self.ids(objects) == [testers, staff, everyone])
            // A group named by its own URL is a member too.
            let nested = try await Self.create(driver, auth, "Nested")
            let byGroupURL = try await driver.request(
                .post, "/v1.0/groups/\(nested)/members/$ref", headers: GraphApplicationsTests.json(auth),
                body: #"{"@odata.id":"https://graph.microsoft.com/v1.0/groups/\#(everyone)"}"#)
            #expect(byGroupURL.status == .noContent)
            _ = try await driver.request(.delete, "/v1.0/groups/\(nested)", headers: auth)
            let members = try await driver.get("/v1.0/groups/\(staff)/members", headers: auth)
            #expect(Self.ids(members) == [testers])

            // A cycle, directly or through others, and a duplicate: Graph's error, nothing added.
            for (member, group) in [(everyone, testers), (staff, staff), (user.objectID, testers)] {
                let refused = try await Self.add(driver, auth, member: member, to: group)
                #expect(refused.status == .badRequest, "\(refused.text)")
                #expect(GraphUsersTests.errorCode(refused) == "Request_BadRequest")
            }
            #expect(Self.ids(try await driver.get("/v1.0/groups/\(testers)/members", headers: auth)) == [user.objectID])
            #expect((try await Self.add(driver, auth, member: UUID().uuidString, to: testers)).status == .notFound)

            // Filter and page.
            let page = try await driver.get("/v1.0/groups?$top=2", headers: auth)
            #expect((page.json["value"] as? [Any])?.count == 2 && page.json["@odata.nextLink"] != nil)
            #expect(Self.ids(try await driver.get("/v1.0/groups?$filter=startswith(displayName,'sta')", headers: auth)) == [staff])

            // Removing, deleting a group, deleting the user: memberships go with them.
            #expect((try await driver.request(.delete, "/v1.0/groups/\(staff)/members/\(testers)/$ref", headers: auth)).status == .noContent)
            #expect(Self.ids(try await driver.get("/v1.0/users/\(user.objectID)/transitiveMemberOf", headers: auth)) == [testers])
            #expect((try await driver.request(.delete, "/v1.0/groups/\(testers)", headers: auth)).status == .noContent)
            #expect(Self.ids(try await driver.get("/v1.0/users/\(user.objectID)/memberOf", headers: auth)).isEmpty)
            let again = try await Self.create(driver, auth, "Again")
            #expect(try await Self.add(driver, auth, member: user.objectID, to: again).status == .noContent)
            _ = try await h.server.administration.deleteUser(user)
            #expect(Self.ids(try await driver.get("/v1.0/groups/\(again)/members", headers: auth)).isEmpty)
        }
    }

    @Test("nesting stays within its depth, counted above and below the new link", arguments: TestDatabase.engines)
    func depth(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let administration = h.server.administration
            func group(_ name: String) async throws -> DirectoryGroup {
                let group = DirectoryGroup(id: UUID(), tenantID: h.tenant.id, displayName: name, description: nil, mailNickname: name, createdAt: Date())
                try await administration.createGroup(group)
                return group
            }
            // Two chains of 8, each built top-down; linking them makes 16 levels, one more is refused.
            var upper: [DirectoryGroup] = []
            var lower: [DirectoryGroup] = []
            for index in 0..<8 {
                upper.append(try await group("u\(index)"))
                lower.append(try await group("l\(index)"))
                if index > 0 {
                    try await administration.addMember(.group(upper[index].id), to: upper[index - 1])
                    try await administration.addMember(.group(lower[index].id), to: lower[index - 1])
                }
            }
            try await administration.addMember(.group(lower[0].id), to: upper[7])
            let extra = try await group("extra")
            await #expect(throws: IdentityAdministration.AdministrationError.self) { try await administration.addMember(.group(extra.id), to: lower[7]) }
            let top = try await group("top")
            await #expect(throws: IdentityAdministration.AdministrationError.self) { try await administration.addMember(.group(upper[0].id), to: top) }
            // A user at the bottom is in all sixteen.
            let user = try await h.addUser()
            try await administration.addMember(.user(user.id), to: lower[7])
            #expect(try await administration.transitiveGroups(of: user.id).count == 16)
        }
    }

    @Test("only security groups; writes need Group.ReadWrite.All", arguments: TestDatabase.engines)
    func refusals(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["Group.Read.All"])
            let refused = try await driver.request(
                .post, "/v1.0/groups", headers: GraphApplicationsTests.json(reader),
                body: #"{"displayName":"X","mailNickname":"x","mailEnabled":false,"securityEnabled":true}"#)
            #expect(refused.status == .forbidden)
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.roles)
            for body in [
                #"{"displayName":"M365","mailNickname":"m","mailEnabled":true,"securityEnabled":false,"groupTypes":["Unified"]}"#,
                #"{"displayName":"No nick","mailEnabled":false,"securityEnabled":true}"#,
                #"{"displayName":"Bad nick","mailNickname":"a b@c","mailEnabled":false,"securityEnabled":true}"#,
                #"{"displayName":"Extra","mailNickname":"e","visibility":"Public"}"#,
            ] {
                let response = try await driver.request(.post, "/v1.0/groups", headers: GraphApplicationsTests.json(auth), body: body)
                #expect(response.status == .badRequest, "\(body): \(response.text)")
            }
            #expect(try await h.server.administration.groups(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("the groups claim: on the Entra face, for an app whose groupMembershipClaims asks for it", arguments: TestDatabase.engines)
    func groupsClaim(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.roles)
            let user = try await h.addUser()
            let inner = try await Self.create(driver, auth, "Inner")
            let outer = try await Self.create(driver, auth, "Outer")
            _ = try await Self.add(driver, auth, member: user.objectID, to: inner)
            _ = try await Self.add(driver, auth, member: inner, to: outer)
            func mint(entra: Bool) async throws -> [String: Any] {
                let minted = try await driver.request(
                    .post, "/dev/tokens", headers: DevelopmentSurfaceTests.json,
                    body: #"{"user":"alice@example.com","client":"\#(h.clientID)","scope":"openid \#(h.clientID)","entra":\#(entra)}"#)
                #expect(minted.status == .ok, "\(minted.text)")
                return DecodedJWT(minted.json["id_token"] as? String ?? "").claims
            }
            #expect(try await mint(entra: true)["groups"] == nil)

            let app = try #require(try await h.server.administration.applications(tenantID: h.tenant.id).first { $0.clientIDString == h.clientID })
            let patched = try await driver.request(
                .patch, "/v1.0/applications/\(GraphApplicationJSON.objectID(of: app))", headers: GraphApplicationsTests.json(auth),
                body: #"{"groupMembershipClaims":"SecurityGroup"}"#)
            #expect(patched.status == .noContent, "\(patched.text)")
            #expect(Set(try await mint(entra: true)["groups"] as? [String] ?? []) == [inner, outer])
            // B2C's face has no groups claim (B2C user flows do not issue one).
            #expect(try await mint(entra: false)["groups"] == nil)
        }
    }

    @Test("groups in the tenant YAML: an export after Graph changes applies with no change, and a declaration sets the members", arguments: TestDatabase.engines)
    func declared(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.roles)
            let user = try await h.addUser()
            let inner = try await Self.create(driver, auth, "Inner")
            let outer = try await Self.create(driver, auth, "Outer")
            _ = try await Self.add(driver, auth, member: user.objectID, to: inner)
            _ = try await Self.add(driver, auth, member: inner, to: outer)
            let yaml = try await h.server.administration.exportTenant(tenantID: h.tenant.id, withUsers: false)
            #expect(yaml.contains("alice@example.com") && yaml.lowercased().contains(inner))
            let declaration = try YAMLDecoder().decode(TenantDeclaration.self, from: yaml)
            let (_, unchanged) = try await declaration.applyReporting(to: h.server.administration, baseDirectory: URL(fileURLWithPath: "/tmp"))
            #expect(unchanged.isEmpty, "\(unchanged)")

            // The file says who is in the group: Inner loses Alice.
            var trimmed = try YAMLDecoder().decode(TenantDeclaration.self, from: yaml)
            trimmed.groups = trimmed.groups?.map { group in
                var group = group
                group.members = nil
                return group
            }
            let (_, changes) = try await trimmed.applyReporting(to: h.server.administration, baseDirectory: URL(fileURLWithPath: "/tmp"))
            #expect(changes.contains { $0.contains("group members") }, "\(changes)")
            #expect(Self.ids(try await driver.get("/v1.0/users/\(user.objectID)/memberOf", headers: auth)).isEmpty)
            #expect(Self.ids(try await driver.get("/v1.0/groups/\(outer)/members", headers: auth)) == [inner])
        }
    }
}
