import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// The console's app registrations, keys and policy upload: the same rules as the CLI and Graph,
/// a refusal in words with nothing changed, secrets shown once.
@Suite("Admin console: apps, keys, policies")
struct AdminConsoleManagementTests {
    static func signedIn(_ h: IdentityHarness, _ driver: Driver) async throws -> String {
        _ = try await AdminConsoleTests.admin(h)
        return AdminConsoleTests.csrf(try await AdminConsoleTests.signIn(driver, email: "root@example.com"))
    }

    @Test("redirect URIs as B2C takes them: https, http on loopback, custom schemes and the OOB URN for native apps; no fragment, wildcard or script scheme")
    func redirectRule() {
        for good in ["https://app.example.com/cb", "http://localhost:3000/cb", "http://127.0.0.1/cb"] {
            #expect(RedirectURIRule.problem(with: good, kind: .confidential) == nil, "\(good)")
        }
        for native in ["msauth.com.contoso.app://auth", "urn:ietf:wg:oauth:2.0:oob"] {
            #expect(RedirectURIRule.problem(with: native, kind: .public) == nil)
            #expect(RedirectURIRule.problem(with: native, kind: .confidential) != nil)
        }
        for bad in ["https://app.example.com/cb#x", "https://*.example.com/cb", "http://app.example.com/cb", "javascript:alert(1)", "/cb",
                    "https://app.example.com/c b", String(repeating: "a", count: 300), "HTTP://evil.example/cb", "http://localhost.evil.example/cb",
                    "http://127.0.0.1.nip.io/cb", "http://evil.example\\@localhost/cb", "http://localhost@evil.example/cb"] {
            #expect(RedirectURIRule.problem(with: bad, kind: .public) != nil, "\(bad)")
        }
    }

    @Test("an app registered in the console signs in at once; a confidential app's secret is shown once and works at the token endpoint; bad redirect URIs change nothing")
    func apps() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let token = try await Self.signedIn(h, driver)
            let refused = try await driver.post(
                "/admin/apps", [("csrf", token), ("name", "Bad"), ("kind", "public"), ("redirect", "http://app.example.com/cb")])
            #expect(refused.status == .badRequest && refused.text.contains("use https"), "\(refused.text.prefix(300))")
            #expect(try await h.server.administration.applications(tenantID: h.tenant.id).allSatisfy { $0.displayName != "Bad" })
            let made = try await driver.post(
                "/admin/apps", [("csrf", token), ("name", "Daemon app"), ("kind", "confidential"), ("redirect", "https://daemon.example/cb")])
            #expect(made.status == .ok)
            let clientID = try #require(made.text.components(separatedBy: "id=\"clientId\">").dropFirst().first?.prefix(36))
            let secret = try #require(made.text.components(separatedBy: "id=\"secret\">").dropFirst().first?.components(separatedBy: "<").first)
            let granted = try await driver.post(
                "/\(h.tenant.name)/oauth2/v2.0/token",
                [("grant_type", "client_credentials"), ("client_id", String(clientID)), ("client_secret", secret),
                 ("scope", "https://graph.microsoft.com/.default")])
            #expect(granted.status != .unauthorized, "the secret authenticates: \(granted.text.prefix(300))")
            #expect(!(try await driver.get("/admin/apps/\(clientID)")).text.contains(secret), "shown once")
            // Redirect URIs: a fragment is refused and nothing changes; a good one is added and removed.
            let withFragment = try await driver.post("/admin/apps/\(clientID)/add-redirect", [("csrf", token), ("uri", "https://daemon.example/x#y")])
            #expect(withFragment.status == .badRequest)
            #expect(try await driver.post("/admin/apps/\(clientID)/add-redirect", [("csrf", token), ("uri", "https://daemon.example/two")]).status == .seeOther)
            var app = try #require(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: String(clientID)))
            #expect(app.redirectURIs == ["https://daemon.example/cb", "https://daemon.example/two"])
            #expect(try await driver.post("/admin/apps/\(clientID)/remove-redirect", [("csrf", token), ("uri", "https://daemon.example/cb")]).status == .seeOther)
            app = try #require(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: String(clientID)))
            #expect(app.redirectURIs == ["https://daemon.example/two"])
            // The console's own registration is not one the console edits.
            #expect(try await driver.get("/admin/apps/\(AdminConsole.clientID(of: h.tenant).uuidString.lowercased())").status == .notFound)
            #expect(try await driver.post("/admin/apps/\(clientID)/delete", [("csrf", token)]).status == .seeOther)
            #expect(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: String(clientID)) == nil)
        }
    }

    @Test("keys: a rotation publishes a new key; a key set is made with B2C's prefix and given an RSA key; a refused policy upload names its problems and stores nothing")
    func keysAndPolicies() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let token = try await Self.signedIn(h, driver)
            let before = try await h.server.administration.signingKeys().count
            #expect(try await driver.post("/admin/keys/rotate", [("csrf", token)]).status == .seeOther)
            #expect(try await h.server.administration.signingKeys().count == before + 1)
            #expect(try await driver.post("/admin/keysets", [("csrf", token), ("id", "ConsoleKeys")]).status == .seeOther)
            #expect(try await driver.post("/admin/keysets/B2C_1A_ConsoleKeys/generate", [("csrf", token)]).status == .seeOther)
            let sets = try await h.server.administration.policyKeySets(tenantID: h.tenant.id)
            #expect(sets.first { $0.id == "B2C_1A_ConsoleKeys" }?.keys.count == 1)
            let keysPage = try await driver.get("/admin/keys")
            #expect(keysPage.text.contains("B2C_1A_ConsoleKeys") && keysPage.text.contains("signing"))
            let bad = try await driver.post("/admin/policies", [("csrf", token), ("xml", "<TrustFrameworkPolicy PolicyId=\"B2C_1A_x\"/>")])
            #expect(bad.status == .badRequest, "\(bad.text.prefix(300))")
            #expect(try await h.server.administration.customPolicies(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("Graph's directory roles: Global Administrator's members are the console's admins; adding and removing a member through Graph opens and closes the console, audited as the app")
    func graphDirectoryRoles() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let user = try await h.addUser("graphadmin@example.com")
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["RoleManagement.Read.Directory"])
            let writer = try await GraphUsersTests.appToken(h, driver, roles: ["RoleManagement.ReadWrite.Directory"])
            let listed = try await driver.request(.get, "/v1.0/directoryRoles", headers: reader)
            let role = try #require((listed.json["value"] as? [[String: Any]])?.first, "\(listed.text)")
            #expect(role["roleTemplateId"] as? String == GraphDirectoryRoles.globalAdministratorTemplate && role["displayName"] as? String == "Global Administrator")
            let id = try #require(role["id"] as? String)
            // Reading is not writing.
            let body = #"{"@odata.id":"https://graph.microsoft.com/v1.0/directoryObjects/\#(user.objectID)"}"#
            #expect(try await driver.request(.post, "/v1.0/directoryRoles/\(id)/members/$ref", headers: GraphUsersTests.json("", reader), body: body).status == .forbidden)
            #expect(try await driver.request(.post, "/v1.0/directoryRoles/\(id)/members/$ref", headers: GraphUsersTests.json("", writer), body: body).status == .noContent)
            #expect(try await driver.request(.post, "/v1.0/directoryRoles/\(id)/members/$ref", headers: GraphUsersTests.json("", writer), body: body).status == .badRequest, "already a member")
            let members = try await driver.request(.get, "/v1.0/directoryRoles/roleTemplateId=\(GraphDirectoryRoles.globalAdministratorTemplate)/members", headers: reader)
            #expect((members.json["value"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [user.objectID], "\(members.text)")
            #expect(try await AdminConsoleTests.signIn(driver, email: "graphadmin@example.com").status == .ok, "the console opens")
            #expect(try await driver.request(.delete, "/v1.0/directoryRoles/\(id)/members/\(user.objectID)/$ref", headers: writer).status == .noContent)
            #expect(try await driver.get("/admin/users").status == .seeOther, "and closes")
            #expect(try await driver.request(.delete, "/v1.0/directoryRoles/\(id)/members/\(user.objectID)/$ref", headers: writer).status == .notFound)
            #expect(try await driver.request(.get, "/v1.0/directoryRoles/\(UUID())", headers: reader).status == .notFound)
            var query = DirectoryAuditQuery()
            query.category = "RoleManagement"
            let audits = try await h.server.service.directoryAudits.audits(tenantID: h.tenant.id, query)
            #expect(audits.map(\.activity.displayName).sorted() == ["Add member to role", "Remove member from role"], "\(audits)")
            #expect(audits.allSatisfy { if case .application = $0.initiator.actor { true } else { false } })
        }
    }

    @Test("the tenant YAML carries directory roles: an export with users lists an admin's role, and applying it gives the role back; again, nothing changes")
    func rolesInTheDeclaration() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            let root = try await AdminConsoleTests.admin(h)
            let exported = try await h.server.administration.exportTenant(tenantID: h.tenant.id, withUsers: true)
            #expect(exported.contains("roles:\n    - admin") || exported.contains("roles:\n  - admin") || exported.contains("- admin"), "\(exported.suffix(600))")
            try await h.server.administration.removeRole(.admin, from: root)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("roles-\(UUID().uuidString).yaml")
            try exported.write(to: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: file) }
            let applied = try await TenantDeclaration.load(path: file.path).applyReporting(
                to: h.server.administration, baseDirectory: file.deletingLastPathComponent())
            #expect(applied.changes.contains { $0.hasPrefix("user role") }, "\(applied.changes)")
            #expect(try await h.server.administration.roles(of: root) == [.admin])
            let again = try await TenantDeclaration.load(path: file.path).applyReporting(
                to: h.server.administration, baseDirectory: file.deletingLastPathComponent())
            #expect(again.changes.isEmpty, "\(again.changes)")
        }
    }

    @Test("an app with only User.ReadWrite.All cannot change, delete or sign out an admin (it could take the console over); with RoleManagement.ReadWrite.Directory it can")
    func privilegedAccounts() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let root = try await AdminConsoleTests.admin(h)
            let users = try await GraphUsersTests.appToken(h, driver, roles: ["User.ReadWrite.All"])
            let password = #"{"passwordProfile":{"password":"Taken-Over9","forceChangePasswordNextSignIn":false}}"#
            let refused = try await driver.request(.patch, "/v1.0/users/\(root.objectID)", headers: GraphUsersTests.json("", users), body: password)
            #expect(refused.status == .forbidden, "\(refused.text)")
            #expect(try await driver.request(.delete, "/v1.0/users/\(root.objectID)", headers: users).status == .forbidden)
            #expect(try await driver.request(.post, "/v1.0/users/\(root.objectID)/revokeSignInSessions", headers: users).status == .forbidden)
            #expect(try await h.server.users.user(id: root.id)?.passwordHash == root.passwordHash, "nothing changed")
            let both = try await GraphUsersTests.appToken(h, driver, roles: ["User.ReadWrite.All", "RoleManagement.ReadWrite.Directory"])
            #expect(try await driver.request(.patch, "/v1.0/users/\(root.objectID)", headers: GraphUsersTests.json("", both), body: password).status == .noContent)
        }
    }

    @Test("the console's own registration and another tenant's client id are out of reach; a URI is judged as typed; a reference is a directoryObjects URL")
    func boundaries() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let token = try await Self.signedIn(h, driver)
            let console = AdminConsole.clientID(of: h.tenant).uuidString.lowercased()
            #expect(try await driver.post("/admin/apps/\(console)/add-redirect", [("csrf", token), ("uri", "https://evil.example/cb")]).status == .notFound)
            let long = "https://app.example/" + String(repeating: "a", count: 300)
            #expect(try await driver.post("/admin/apps", [("csrf", token), ("name", "Long"), ("kind", "public"), ("redirect", long)]).status == .badRequest)
            #expect(try await h.server.administration.applications(tenantID: h.tenant.id).allSatisfy { $0.displayName != "Long" })
            // A client id is one tenant's.
            let other = Tenant(id: UUID(), name: "other.onmicrosoft.com", displayName: "Other", defaultPolicy: "B2C_1_susi")
            try await h.server.tenants.save(other, now: Date())
            let mine = try #require(try await h.server.administration.applications(tenantID: h.tenant.id).first)
            var stolen = mine
            stolen.tenantID = other.id
            stolen.redirectURIs = ["https://evil.example/cb"]
            await #expect(throws: TenantDirectoryError.self) { try await h.server.tenants.save(stolen, now: Date()) }
            #expect(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: mine.clientIDString)?.redirectURIs == mine.redirectURIs)
            // A large policy is read whole (past the 64 KiB form limit) and judged by the policy rules.
            let big = "<TrustFrameworkPolicy PolicyId=\"B2C_1A_big\">" + String(repeating: "<!-- padding -->", count: 8_000) + "</TrustFrameworkPolicy>"
            let judged = try await driver.post("/admin/policies", [("csrf", token), ("xml", big)])
            #expect(judged.status == .badRequest && !judged.text.contains("Not taken"), "\(judged.text.prefix(300))")
            #expect(GraphDirectoryRoles.referencedID("https://graph.microsoft.com/v1.0/directoryObjects/\(mine.clientIDString)") != nil)
            #expect(GraphDirectoryRoles.referencedID("https://evil.example/v1.0/groups/\(mine.clientIDString)") == nil)
            #expect(GraphDirectoryRoles.referencedID(mine.clientIDString) == nil)
        }
    }

    @Test("another tenant's account is out of the console's and Graph's reach: its page is not found, no action applies to it, and it cannot be made a member of this tenant's role")
    func otherTenantsAccount() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let token = try await Self.signedIn(h, driver)
            let other = Tenant(id: UUID(), name: "elsewhere.onmicrosoft.com", displayName: "Elsewhere", defaultPolicy: "B2C_1_susi")
            try await h.server.tenants.save(other, now: Date())
            let stranger = try await h.server.administration.createLocalUser(
                tenantID: other.id, email: "stranger@example.com", displayName: "Stranger", password: "Passw0rd!")
            #expect(try await driver.get("/admin/users/\(stranger.objectID)").status == .notFound)
            #expect(try await driver.post("/admin/users/\(stranger.objectID)/disable", [("csrf", token)]).status == .notFound)
            #expect(try await h.server.users.user(id: stranger.id)?.accountEnabled == true)
            let writer = try await GraphUsersTests.appToken(h, driver, roles: ["RoleManagement.ReadWrite.Directory"])
            let body = #"{"@odata.id":"https://graph.microsoft.com/v1.0/directoryObjects/\#(stranger.objectID)"}"#
            let refused = try await driver.request(
                .post, "/v1.0/directoryRoles/\(GraphDirectoryRoles.roleID(of: h.tenant))/members/$ref", headers: GraphUsersTests.json("", writer), body: body)
            #expect(refused.status == .badRequest)
            #expect(try await h.server.administration.roles(of: stranger).isEmpty)
        }
    }
}
