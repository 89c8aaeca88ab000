import Foundation
import IdentityClient
import SQLKit
import Storage
import Testing

/// The web app's pages and redirects over real HTTP (the app on the API port, the identity
/// service beside it), driven by the headless browser: every page, every redirect, CSRF, kept
/// input, sign-out of both sessions, the reset hand-over and an expired session.
@Suite("Web app pages and redirects")
struct WebAppTests {
    static func signUp(_ browser: HostedPagesBrowser, _ system: LiveSystem, email: String, name: String = "Webby") async throws
        -> HostedPagesBrowser.Page
    {
        let landing = try await browser.navigate(system.webBase)
        let signUpLink = try #require(landing.link(id: "signUp"))
        let form = try await browser.navigate(URL(string: signUpLink, relativeTo: landing.url)!.absoluteURL)
        return try await browser.completeSignUp(form, email: email, password: "Web-Passw0rd", name: name) { page, fields, id in
            try await browser.submitFollowingAll(page, fields, formID: id)
        }
    }

    static func titles(_ page: HostedPagesBrowser.Page) -> [String] {
        page.text.components(separatedBy: "data-title=\"").dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
    }

    @Test("landing page: the three ways in, security headers, no scripts; signed-out pages send to the landing page")
    func landing() async throws {
        try await LiveSystem.run { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let landing = try await browser.navigate(system.webBase)
            #expect(landing.status == 200)
            for id in ["signUp", "signIn", "signInFacebook", "forgot"] { #expect(landing.link(id: id) != nil, "\(id)") }
            #expect(landing.headers["content-security-policy"]?.contains("default-src 'none'") == true)
            #expect(landing.headers["x-frame-options"] == "DENY")
            #expect(!landing.text.contains("<script"))
            #expect(
                try await browser.navigate(system.webBase.appendingPathComponent("static/app.css")).headers["content-type"]?.hasPrefix(
                    "text/css") == true)
            for path in ["todos", "claims"] {
                let page = try await browser.navigate(system.webBase.appendingPathComponent(path))
                #expect(page.url.path == "/", "\(path) should send a signed-out browser to the landing page")
            }
            // Each button starts its own user flow at the identity service (Facebook's goes straight on to
            // the simulated Facebook, by domain_hint).
            let starts = [
                ("signUp", "B2C_1_sign_up"), ("signIn", "B2C_1_susi"), ("signInFacebook", "facebook.com/dialog/oauth"),
                ("forgot", "B2C_1_reset"),
            ]
            for (id, policy) in starts {
                let page = try await browser.open(URL(string: landing.link(id: id)!, relativeTo: landing.url)!.absoluteURL)
                #expect(page.url.absoluteString.contains(policy), "\(id) → \(page.url)")
            }
        }
    }

    @Test("sign up, then add, complete, reopen, rename, delete, filter and page through tasks; the API holds the same list")
    func tasksPages() async throws {
        try await LiveSystem.run(webPageSize: 2) { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            var page = try await Self.signUp(browser, system, email: "web@example.com")
            #expect(page.url.path == "/todos")
            #expect(page.text.contains("<h1>My tasks</h1>") && page.text.contains("emptyList"))
            for title in ["Buy milk", "Walk the dog", "Call <Mum> & \"Dad\""] {
                page = try await browser.submitFollowingAll(page, [("title", title)], formID: "addForm")
            }
            #expect(page.text.contains("3 open, 0 done"))
            #expect(Self.titles(page) == ["Call &lt;Mum&gt; &amp; &quot;Dad&quot;", "Walk the dog"])  // newest first, two per page, escaped
            let older = try #require(page.link(id: "older"))
            let second = try await browser.navigate(URL(string: older, relativeTo: page.url)!.absoluteURL)
            #expect(Self.titles(second) == ["Buy milk"])

            func action(_ page: HostedPagesBrowser.Page, _ title: String, _ verb: String) throws -> URL {
                let marker = "data-title=\"\(title)\""
                let block = try #require(page.text.components(separatedBy: "<li").first { $0.contains(marker) })
                let range = try #require(block.range(of: #"action="/todos/[0-9a-f-]+/\#(verb)""#, options: .regularExpression))
                return URL(string: String(block[range].dropFirst(8).dropLast()), relativeTo: page.url)!.absoluteURL
            }
            let csrf = try #require(page.field("csrf_token"))
            page = try await browser.post(try action(second, "Buy milk", "complete"), [("csrf_token", csrf)])
            #expect(page.text.contains("2 open, 1 done"))
            page = try await browser.post(try action(page, "Walk the dog", "rename"), [("csrf_token", csrf), ("title", "Walk the cat")])
            #expect(Self.titles(page).contains("Walk the cat"))
            page = try await browser.navigate(
                system.webBase.appendingPathComponent("todos").appending(queryItems: [.init(name: "filter", value: "done")]))
            #expect(Self.titles(page) == ["Buy milk"])
            page = try await browser.post(try action(page, "Buy milk", "reopen"), [("csrf_token", csrf), ("filter", "done")])
            #expect(page.url.query == "filter=done" && page.text.contains("emptyFilter"))
            page = try await browser.navigate(system.webBase.appendingPathComponent("todos"))
            page = try await browser.post(try action(page, "Walk the cat", "delete"), [("csrf_token", csrf)])
            #expect(page.text.contains("2 open, 0 done"))

            // The same list through the Task API, with a token of the same user.
            let claims = try await browser.navigate(system.webBase.appendingPathComponent("claims"))
            #expect(claims.text.contains("<th scope=\"row\">emails</th>") && claims.text.contains("web@example.com"))
        }
    }

    @Test("forms without the session's CSRF token change nothing; a rejected title keeps what was typed")
    func csrfAndKeptInput() async throws {
        try await LiveSystem.run { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let page = try await Self.signUp(browser, system, email: "csrf@example.com")
            let add = system.webBase.appendingPathComponent("todos")
            for token in ["", "forged", String(repeating: "A", count: 43)] {
                let refused = try await browser.post(add, [("csrf_token", token), ("title", "planted")], follow: false)
                #expect(refused.status == 403)
                #expect(refused.text.contains("This form has expired"))
            }
            let signOut = try await browser.post(
                system.webBase.appendingPathComponent("auth/signout"), [("csrf_token", "forged")], follow: false)
            #expect(signOut.status == 403)
            let csrf = try #require(page.field("csrf_token"))
            let long = String(repeating: "x", count: 1001)
            let rejected = try await browser.post(add, [("csrf_token", csrf), ("title", long)], follow: false)
            #expect(rejected.status == 422)
            #expect(rejected.text.contains("id=\"error\""))
            #expect(rejected.field("title") == long)
            let list = try await browser.navigate(add)
            #expect(Self.titles(list).isEmpty && list.text.contains("emptyList"))
        }
    }

    @Test("the session cookie is HttpOnly and SameSite=Lax, gets a new id at sign-in, and the old id is dead")
    func sessionCookie() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("cookie@example.com")
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let start = try await browser.fetch(system.webBase.appendingPathComponent("auth/signin"))
            let header = try #require(start.headers["set-cookie"])
            #expect(header.contains("todo_session=") && header.contains("HttpOnly") && header.contains("SameSite=Lax"))
            #expect(header.contains("Path=/") && !header.contains("Secure"))  // plain http on loopback here
            let before = try #require(await browser.cookie("todo_session"))
            let signIn = try await browser.navigate(URL(string: try #require(start.location))!)
            let page = try await browser.submitFollowingAll(
                signIn, [("email", "cookie@example.com"), ("password", "Passw0rd!")], formID: "localAccountForm")
            #expect(page.url.path == "/todos")
            let after = try #require(await browser.cookie("todo_session"))
            #expect(after != before)
            // Pages are never cached, never framed, and run no scripts.
            #expect(page.headers["cache-control"] == "no-store")
            #expect(page.headers["x-frame-options"] == "DENY")
            #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
            // The id planted before sign-in opens nothing.
            let planted = HostedPagesBrowser(identityBase: system.identityBase)
            await planted.setCookie("todo_session", before)
            #expect(try await planted.navigate(system.webBase.appendingPathComponent("todos")).url.path == "/")
        }
    }

    @Test("every task form refuses a missing or forged CSRF token and changes nothing")
    func csrfOnTaskActions() async throws {
        try await LiveSystem.run { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            var page = try await Self.signUp(browser, system, email: "actions@example.com")
            page = try await browser.submitFollowingAll(page, [("title", "untouchable")], formID: "addForm")
            let block = try #require(page.text.components(separatedBy: "<li").first { $0.contains("data-title=\"untouchable\"") })
            let range = try #require(block.range(of: #"/todos/[0-9a-f-]{36}/"#, options: .regularExpression))
            let base = String(block[range])
            for action in ["complete", "reopen", "rename", "delete"] {
                for token in [nil, "forged"] as [String?] {
                    let fields = (token.map { [("csrf_token", $0)] } ?? []) + [("title", "changed")]
                    let refused = try await browser.post(
                        URL(string: base + action, relativeTo: system.webBase)!.absoluteURL, fields, follow: false)
                    #expect(refused.status == 403, "\(action) with \(token ?? "no token")")
                }
            }
            let list = try await browser.navigate(system.webBase.appendingPathComponent("todos"))
            #expect(Self.titles(list) == ["untouchable"])
            #expect(list.text.contains("1 open, 0 done"))
        }
    }

    @Test("sign-out ends the app session and the identity service's; signing in again finds the same list")
    func signOutAndBack() async throws {
        try await LiveSystem.run { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            var page = try await Self.signUp(browser, system, email: "back@example.com")
            page = try await browser.submitFollowingAll(page, [("title", "Still here")], formID: "addForm")
            page = try await browser.submitFollowingAll(page, [], formID: nil)  // the header's sign-out form comes first
            #expect(page.url.path == "/")
            #expect(page.text.contains("You have signed out"))
            #expect(try await browser.navigate(system.webBase.appendingPathComponent("todos")).url.path == "/")
            // The identity service asks for the password again (its SSO cookie is gone).
            let landing = try await browser.navigate(system.webBase)
            let signIn = try await browser.navigate(URL(string: landing.link(id: "signIn")!, relativeTo: landing.url)!.absoluteURL)
            #expect(signIn.formAction(id: "localAccountForm") != nil)
            page = try await browser.submitFollowingAll(
                signIn, [("email", "back@example.com"), ("password", "Web-Passw0rd")], formID: "localAccountForm")
            #expect(Self.titles(page) == ["Still here"])

            // A second user in another browser sees an empty list.
            let other = HostedPagesBrowser(identityBase: system.identityBase)
            let theirs = try await Self.signUp(other, system, email: "other@example.com", name: "Other")
            #expect(Self.titles(theirs).isEmpty)
        }
    }

    @Test("Profile runs the profile-edit flow and the claims page shows the new name")
    func profileEdit() async throws {
        try await LiveSystem.run { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let tasks = try await Self.signUp(browser, system, email: "profile@example.com", name: "Before")
            _ = try await browser.submitFollowingAll(tasks, [("title", "survives the policy switch")], formID: "addForm")
            let profile = try await browser.navigate(system.webBase.appendingPathComponent("auth/profile"))
            #expect(profile.url.absoluteString.contains("B2C_1_edit_profile"))
            let back = try await browser.submitFollowingAll(profile, [("displayName", "After")])
            #expect(back.url.path == "/todos")
            #expect(Self.titles(back) == ["survives the policy switch"])
            let claims = try await browser.navigate(system.webBase.appendingPathComponent("claims"))
            #expect(claims.text.contains("<td>After</td>"))
            #expect(claims.text.contains("B2C_1_edit_profile"))
        }
    }

    @Test("'Forgot your password?' on the sign-in page hands over to the reset flow")
    func forgotPassword() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("forgot@example.com")
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let landing = try await browser.navigate(system.webBase)
            let signIn = try await browser.navigate(URL(string: landing.link(id: "signIn")!, relativeTo: landing.url)!.absoluteURL)
            let forgot = try #require(signIn.link(id: "forgotPassword"))
            let reset = try await browser.navigate(URL(string: forgot, relativeTo: signIn.url)!.absoluteURL)
            #expect(reset.url.absoluteString.contains("B2C_1_reset"))
            #expect(reset.text.contains("id=\"sendCode\""))
        }
    }

    @Test("a redirect with another state does not cancel the sign-in in progress")
    func forgedReturn() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("state@example.com")
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let signIn = try await browser.navigate(system.webBase.appendingPathComponent("auth/signin"))
            // A link from another site, followed in the same browser (the Lax cookie goes along).
            var forged = URLComponents(url: system.webBase.appendingPathComponent("auth/openid/return"), resolvingAgainstBaseURL: false)!
            forged.queryItems = [.init(name: "code", value: "planted"), .init(name: "state", value: "forged")]
            let refused = try await browser.navigate(forged.url!)
            #expect(refused.status == 400)
            let page = try await browser.submitFollowingAll(
                signIn, [("email", "state@example.com"), ("password", "Passw0rd!")], formID: "localAccountForm")
            #expect(page.url.path == "/todos")
        }
    }

    @Test("concurrent pages of one session whose access token expired share one refresh and stay signed in")
    func concurrentRefresh() async throws {
        try await LiveSystem.run { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            _ = try await Self.signUp(browser, system, email: "tabs@example.com")
            try await Self.editSessions(system) { entry in entry["accessTokens"] = [[String: Any]]() }
            let todos = system.webBase.appendingPathComponent("todos")
            let pages = try await withThrowingTaskGroup(of: HostedPagesBrowser.Page.self) { group in
                for _ in 0..<6 { group.addTask { try await browser.navigate(todos) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(pages.allSatisfy { $0.url.path == "/todos" && $0.status == 200 })
            // Had two of them redeemed the same refresh token, the family would now be revoked.
            try await Self.editSessions(system) { entry in entry["accessTokens"] = [[String: Any]]() }
            #expect(try await browser.navigate(todos).url.path == "/todos")
        }
    }

    /// Changes every token-cache entry of every stored session. Rows are sealed with the data key
    /// (no token in clear); the changed ones are written back in clear, the form rows had before
    /// sealing, which the web app must still read.
    static func editSessions(_ system: LiveSystem, _ change: (inout [String: Any]) -> Void) async throws {
        let rows = try await system.database.read { sql in try await sql.select().columns("id_hash", "data").from("web_sessions").all() }
        #expect(!rows.isEmpty)
        for row in rows {
            let key = try row.decode(column: "id_hash", as: String.self)
            let stored = try row.decode(column: "data", as: String.self)
            #expect(stored.hasPrefix("sealed:v1:") && !stored.contains("refreshToken"), "a web session is stored in clear")
            let (clear, wasClear) = try system.dataKey.open(stored, context: "web_sessions:\(key)")
            #expect(!wasClear)
            var json = try JSONSerialization.jsonObject(with: Data(clear.utf8)) as! [String: Any]
            var tokens = json["tokens"] as! [String: Any]
            tokens["entries"] = (tokens["entries"] as! [[String: Any]]).map { entry in
                var entry = entry
                change(&entry)
                return entry
            }
            json["tokens"] = tokens
            let text = String(decoding: try JSONSerialization.data(withJSONObject: json), as: UTF8.self)
            try await system.database.transaction { sql in
                try await sql.update("web_sessions").set("data", to: SQLBind(text)).where("id_hash", .equal, key).run()
            }
        }
    }

    @Test("sessions started before sign-in live an hour and are bounded per client address; signing in gives the full lifetime")
    func anonymousSessionsBounded() async throws {
        try await LiveSystem.run(anonymousSessionsPerHour: 3) { system in
            let signIn = system.webBase.appendingPathComponent("auth/signin")
            var last: HostedPagesBrowser.Page?
            for _ in 0..<3 {
                let page = try await HostedPagesBrowser(identityBase: system.identityBase).fetch(signIn)
                #expect(page.status == 302)
                last = page
            }
            let cookie = try #require(last?.headers["set-cookie"])
            let maxAge = try #require(
                cookie.split(separator: ";").first { $0.trimmingCharacters(in: .whitespaces).lowercased().hasPrefix("max-age=") })
            #expect((Int(maxAge.split(separator: "=")[1]) ?? 0) <= 3600)
            // A fourth fresh browser from the same address is refused; nothing more is stored.
            let refused = try await HostedPagesBrowser(identityBase: system.identityBase).fetch(signIn)
            #expect(refused.status == 429 && refused.text.contains("Too many sign-ins"))
            let stored = try await system.database.read { sql in
                try await sql.select().column("expires_at").from("web_sessions").all(decodingColumn: "expires_at", as: Int64.self)
            }
            #expect(stored.count == 3)
            #expect(stored.allSatisfy { $0 <= Int64(Date().timeIntervalSince1970) + 3600 })
        }
        try await LiveSystem.run { system in
            _ = try await Self.signUp(HostedPagesBrowser(identityBase: system.identityBase), system, email: "long@example.com")
            let stored = try await system.database.read { sql in
                try await sql.select().column("expires_at").from("web_sessions").all(decodingColumn: "expires_at", as: Int64.self)
            }
            #expect(stored.count == 1)
            #expect(stored.allSatisfy { $0 > Int64(Date().timeIntervalSince1970) + 7 * 3600 })
        }
    }

    @Test("a session whose refresh token was refused sends the user to sign in again with a notice")
    func expiredSession() async throws {
        try await LiveSystem.run { system in
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            _ = try await Self.signUp(browser, system, email: "expired@example.com")
            // Age every stored session: access tokens expired, refresh tokens no longer valid.
            try await Self.editSessions(system) { entry in
                entry["refreshToken"] = "revoked"
                entry["accessTokens"] = [[String: Any]]()
            }
            let page = try await browser.navigate(system.webBase.appendingPathComponent("todos"))
            #expect(page.url.path == "/")
            #expect(page.text.contains("Your session has expired"))
        }
    }
}
