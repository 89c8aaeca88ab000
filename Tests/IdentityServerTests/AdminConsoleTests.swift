import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// The admin console (SPEC §2.13): admins sign in through the tenant's own flow and hold the
/// `admin` role; every form is CSRF-protected and same-site; every change goes through the
/// administration rules as the signed-in admin, and the audit log says so.
@Suite("Admin console")
struct AdminConsoleTests {
    /// Signs in at `/admin` through the tenant's default flow; the page it ends on.
    static func signIn(_ driver: Driver, email: String, password: String = "Passw0rd!") async throws -> TestResponse {
        let start = try await driver.get("/admin")
        #expect(start.status == .seeOther, "\(start.text)")
        let location = start.headers[.location] ?? ""
        #expect(location.contains("/oauth2/v2.0/authorize?") && location.contains("code_challenge_method=S256"), "\(location)")
        let page = try await driver.follow(start)
        return try await driver.submit(page, [("email", email), ("password", password)])
    }

    static func admin(_ h: IdentityHarness, _ email: String = "root@example.com") async throws -> UserAccount {
        let user = try await h.addUser(email, name: "Root")
        try await h.server.administration.assignRole(.admin, to: user)
        return user
    }

    /// The CSRF token of the page's first form.
    static func csrf(_ page: TestResponse) -> String { page.field("csrf") ?? "" }

    @Test("an admin signs in through the tenant's flow and gets the console, headers that forbid framing and script; the sign-in is in the log",
          arguments: TestDatabase.engines)
    func adminSignsIn(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await Self.admin(h)
            let page = try await Self.signIn(driver, email: "root@example.com")
            #expect(page.status == .ok, "\(page.text.prefix(500))")
            #expect(page.text.contains("id=\"users\"") && page.text.contains("root@example.com") && page.text.contains("Sign out Root"))
            #expect(page.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("frame-ancestors 'none'") == true)
            #expect(page.headers[.cacheControl] == "no-store")
            #expect(!Self.csrf(page).isEmpty)
            var query = SignInQuery()
            query.limit = 10
            let records = try await h.server.service.signIns.log.events(tenantID: h.tenant.id, query)
            #expect(records.contains { $0.appName == "TodoB2C admin console" && $0.errorCode == 0 }, "\(records.map(\.appName))")
            // Signing out ends the session on the server: the old cookie opens nothing.
            let cookies = driver.cookies
            let out = try await driver.post("/admin/signout", [("csrf", Self.csrf(page))])
            #expect(out.status == .ok)
            driver.cookies = cookies
            #expect(try await driver.get("/admin/users").status == .seeOther)
        }
    }

    @Test("an account without the admin role is refused after its sign-in and gets no session; a forged callback is refused")
    func nonAdmin() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser("plain@example.com")
            let refused = try await Self.signIn(driver, email: "plain@example.com")
            #expect(refused.status == .forbidden && refused.text.contains("Not an administrator"), "\(refused.text.prefix(300))")
            let again = try await driver.get("/admin/users")
            #expect(again.status == .seeOther && (again.headers[.location] ?? "").contains("authorize"))
            // A callback this browser did not start, and one with another state, are refused.
            let stranger = Driver(client: driver.client)
            #expect(try await stranger.get("/admin/signin?code=abc&state=xyz").status == .badRequest)
        }
    }

    @Test("a post without the session's token, or from another site, changes nothing; with it the change is made as the admin and audited")
    func forms() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let root = try await Self.admin(h)
            let target = try await h.addUser("target@example.com", name: "Target")
            let page = try await Self.signIn(driver, email: "root@example.com")
            let token = Self.csrf(page)
            let action = "/admin/users/\(target.objectID)/disable"
            #expect(try await driver.post(action, []).status == .forbidden)
            #expect(try await driver.post(action, [("csrf", "forged")]).status == .forbidden)
            #expect(try await driver.post(action, [("csrf", token)], headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"]).status == .forbidden)
            #expect(try await driver.post(action, [("csrf", token)], headers: [HTTPField.Name("Origin")!: "https://evil.example"]).status == .forbidden)
            #expect(try await h.server.users.user(id: target.id)?.accountEnabled == true, "nothing changed")
            let done = try await driver.post(action, [("csrf", token)], headers: [HTTPField.Name("Sec-Fetch-Site")!: "same-origin"])
            #expect(done.status == .seeOther)
            #expect(try await h.server.users.user(id: target.id)?.accountEnabled == false)
            var query = DirectoryAuditQuery()
            query.initiatorUserID = root.objectID
            let audits = try await h.server.service.directoryAudits.audits(tenantID: h.tenant.id, query)
            #expect(audits.contains { $0.activity == .updateUser && $0.target?.id == target.objectID }, "\(audits)")
            // The audit page shows it, named by the admin.
            let auditPage = try await driver.get("/admin/audit?category=UserManagement")
            #expect(auditPage.status == .ok && auditPage.text.contains("Update user") && auditPage.text.contains("root@example.com"))
        }
    }

    @Test("users are created, found, given and stripped of roles, reset and deleted through the console; a refused account creates nothing")
    func userActions() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await Self.admin(h)
            let page = try await Self.signIn(driver, email: "root@example.com")
            let token = Self.csrf(page)
            let weak = try await driver.post("/admin/users", [("csrf", token), ("email", "new@example.com"), ("name", "New"), ("password", "short")])
            #expect(weak.status == .badRequest && weak.text.contains("password"), "\(weak.text.prefix(300))")
            #expect(try await h.server.administration.users(tenantID: h.tenant.id).allSatisfy { $0.email != "new@example.com" })
            let created = try await driver.post(
                "/admin/users", [("csrf", token), ("email", "new@example.com"), ("name", "New <b>One</b>"), ("password", "Passw0rd!")])
            #expect(created.status == .seeOther)
            let shown = try await driver.follow(created)
            #expect(shown.text.contains("New &lt;b&gt;One&lt;/b&gt;") && !shown.text.contains("<b>One</b>"), "escaped")
            let user = try await h.server.administration.findUser(tenantID: h.tenant.id, emailOrID: "new@example.com")
            let found = try await driver.get("/admin/users?q=new%40example")
            #expect(found.text.contains(user.objectID))
            for action in ["make-admin", "revoke-sessions", "reset-mfa"] {
                #expect(try await driver.post("/admin/users/\(user.objectID)/\(action)", [("csrf", token)]).status == .seeOther, "\(action)")
            }
            #expect(try await h.server.administration.roles(of: user).contains(.admin))
            #expect(try await driver.post("/admin/users/\(user.objectID)/remove-admin", [("csrf", token)]).status == .seeOther)
            #expect(try await h.server.administration.roles(of: user).isEmpty)
            #expect(try await driver.post("/admin/users/\(user.objectID)/delete", [("csrf", token)]).status == .seeOther)
            #expect(try await h.server.users.user(id: user.id) == nil)
            // Not on oneself: the signed-in admin cannot disable or delete their own account here.
            let me = try await h.server.administration.findUser(tenantID: h.tenant.id, emailOrID: "root@example.com")
            #expect(try await driver.post("/admin/users/\(me.objectID)/disable", [("csrf", token)]).status == .badRequest)
        }
    }

    @Test("taking the admin role, or revoking the account's sessions anywhere (Graph, the CLI), ends its console access at once")
    func accessEnds() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let root = try await Self.admin(h)
            #expect(try await Self.signIn(driver, email: "root@example.com").status == .ok)
            #expect(try await driver.get("/admin/users").status == .ok)
            try await h.server.administration.revokeSessions(root)
            #expect(try await driver.get("/admin/users").status == .seeOther, "the session ended with the others")
            #expect(try await Self.signIn(driver, email: "root@example.com").status == .ok)
            try await h.server.administration.removeRole(.admin, from: root)
            #expect(try await driver.get("/admin/users").status == .seeOther)
        }
    }

    @Test("the console asks for a fresh sign-in, and takes only its own code: another app's code, or a sign-in older than 5 minutes, gets no session")
    func codeBinding() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await Self.admin(h)
            let start = try await driver.get("/admin")
            let location = try #require(start.headers[.location])
            #expect(location.contains("prompt=login"))
            let state = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "state" }?.value)
            // The tenant's ordinary app's code, for the same account, with the console's state.
            let other = Driver(client: driver.client)
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_susi")
            let done = try await other.signIn(h, attempt: attempt, email: "root@example.com")
            let code = try #require(done.redirectParameters["code"])
            let swapped = try await driver.get("/admin/signin?code=\(code)&state=\(state)")
            #expect(swapped.status == .badRequest, "\(swapped.text.prefix(300))")
            #expect(try await driver.get("/admin/users").status == .seeOther, "no session")
            // The console's own code, redeemed after the sign-in is 5 minutes old.
            let page = try await driver.follow(try await driver.get("/admin"))
            let answer = try await driver.post(page.formAction ?? "", [("csrf_token", page.field("csrf_token") ?? ""), ("email", "root@example.com"), ("password", "Passw0rd!")])
            let callback = try #require(answer.headers[.location], "\(answer.status)")
            #expect(callback.contains("/admin/signin?"))
            h.clock.advance(by: 301)
            #expect(try await driver.get(callback).status == .badRequest)
            #expect(try await driver.get("/admin/users").status == .seeOther, "no session")
        }
    }

    @Test("one spelling of this server's origin: a Host in capitals or with a zero-padded port is the same origin; the console's redirect URIs are the configured origins only")
    func origins() {
        #expect(HostPolicy.normalized("LocalHost:05080") == "localhost:5080")
        #expect(HostPolicy.normalized("[::1]:080") == "[::1]:80")
        #expect(HostPolicy.normalized("127.0.0.1") == "127.0.0.1")
        var configuration = IdentityServerConfiguration(listenPort: 5080)
        configuration.allowedHosts = ["localhost", "127.0.0.1", "::1"]
        let known = HostPolicy(configuration: configuration).knownOrigins
        #expect(known.contains("http://localhost:5080") && known.contains("http://[::1]:5080") && known.count == 3, "\(known)")
    }

    @Test("the sign-in log's page filters by user and result and shows one sign-in's steps")
    func logPages() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await Self.admin(h)
            _ = try await h.addUser("someone@example.com")
            #expect(try await driver.ropc(h, username: "someone@example.com", password: "Wrong-Pass1").status == .badRequest)
            _ = try await Self.signIn(driver, email: "root@example.com")
            let failures = try await driver.get("/admin/sign-ins?user=someone%40example.com&result=failure")
            #expect(failures.status == .ok && failures.text.contains("error 90225"), "\(failures.text.prefix(800))")
            #expect(!failures.text.contains("root@example.com</td>"))
            let mine = try await driver.get("/admin/sign-ins?user=root%40example.com")
            let id = try #require(mine.text.components(separatedBy: "/admin/sign-ins/").dropFirst().first?.prefix(36))
            let detail = try await driver.get("/admin/sign-ins/\(id)")
            #expect(detail.status == .ok && detail.text.contains("id=\"steps\"") && detail.text.contains(": completed"), "\(detail.text.prefix(800))")
        }
    }

    @Test("Run user flow: the flow answers the console with an ID token by form post, and the console shows its claims verified; another run's answer or a tampered token is not")
    func runUserFlow() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await Self.admin(h)
            let tester = try await h.addUser("tester@example.com", name: "Tess")
            _ = try await Self.signIn(driver, email: "root@example.com")
            let flows = try await driver.get("/admin/flows")
            #expect(flows.status == .ok && flows.text.contains("run-B2C_1_susi") && !flows.text.contains("run-B2C_1_ROPC"))
            #expect(try await driver.get("/admin/run?flow=B2C_1_nothing").status == .notFound)
            let start = try await driver.get("/admin/run?flow=B2C_1_susi")
            let location = start.headers[.location] ?? ""
            #expect(location.contains("response_type=id_token") && location.contains("response_mode=form_post"), "\(location)")
            let answer = try await driver.submit(try await driver.follow(start), [("email", "tester@example.com"), ("password", "Passw0rd!")])
            let token = try #require(answer.field("id_token"), "\(answer.text.prefix(500))")
            let state = answer.field("state") ?? ""
            let shown = try await driver.post("/admin/run", [("id_token", token), ("state", state)])
            #expect(shown.status == .ok, "\(shown.text.prefix(500))")
            #expect(shown.text.contains("Signature, issuer, audience, lifetime and nonce verified"), "\(shown.text.prefix(800))")
            #expect(shown.text.contains(tester.objectID) && shown.text.contains("B2C_1_susi"))
            // The run's state is spent (its cookie cleared), and another state is refused.
            #expect(shown.headers[values: .setCookie].contains { $0.hasPrefix("todo_console_run=;") && $0.contains("Max-Age=0") },
                    "\(shown.headers[values: .setCookie])")
            _ = try await driver.get("/admin/run?flow=B2C_1_susi")
            #expect(try await driver.post("/admin/run", [("id_token", token), ("state", "other")]).status == .badRequest)
            // A token changed in transit is shown, but not as verified.
            let again = try await driver.get("/admin/run?flow=B2C_1_susi")
            let newState = URLComponents(string: again.headers[.location] ?? "")?.queryItems?.first { $0.name == "state" }?.value ?? ""
            var parts = token.split(separator: ".").map(String.init)
            parts[2] = String(parts[2].reversed())
            let tampered = try await driver.post("/admin/run", [("id_token", parts.joined(separator: ".")), ("state", newState)])
            #expect(tampered.status == .ok && tampered.text.contains("Not verified"), "\(tampered.text.prefix(400))")
        }
    }
}
