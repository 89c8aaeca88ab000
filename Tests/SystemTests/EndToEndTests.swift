import Foundation
import IdentityClient
@testable import IdentityDirectory
import Synchronization
import TaskClient
import Testing
import TodoModels
@testable import UserJourneys

/// The SDK against the live identity service and Task API: what an app built on it does.
@Suite("SDK end to end against the live identity service and Task API")
struct SDKEndToEndTests {
    @Test("interactive sign-up, then sign-in, through the hosted pages; tasks through TaskClient")
    func interactiveSignUpAndSignIn() async throws {
        try await LiveSystem.run { system in
            let app = try system.app()
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let signUp = ScriptedWebAuthenticator { url in
                try await browser.signUp(url, email: "new@example.com", password: "Sign-Up-Pass1", name: "Newton")
            }
            let created = try await app.acquireTokenInteractively(InteractiveParameters(scopes: [system.clientID]), authenticator: signUp)
            #expect(created.account.username == "new@example.com")
            #expect(created.account.name == "Newton")
            #expect(created.account.policy == "B2C_1_susi")
            // client_info gives MSAL's home account id: "<oid>-<policy>.<tenant id>".
            #expect(created.account.homeAccountID.hasSuffix("-b2c_1_susi.\(system.seed.tenant.guid)"))
            #expect(created.account.homeAccountID.hasPrefix(created.account.objectID ?? "missing"))
            #expect(!created.accessToken.isEmpty)

            let tasks = system.tasks(app, account: created.account)
            let task = try await tasks.create(title: "From the SDK 🎉").task
            #expect(try await tasks.list().items.map(\.id) == [task.id])

            // A second app (a new process) signs the same user in with the password form.
            let again = try system.app()
            let signIn = ScriptedWebAuthenticator { url in
                try await HostedPagesBrowser(identityBase: system.identityBase).signIn(
                    url, email: "new@example.com", password: "Sign-Up-Pass1")
            }
            let result = try await again.acquireTokenInteractively(InteractiveParameters(scopes: [system.clientID]), authenticator: signIn)
            #expect(result.account.objectID == created.account.objectID)
            #expect(try await system.tasks(again, account: result.account).get(task.id).task.title == "From the SDK 🎉")
        }
    }

    @Test("a redirect with another state, a cancel and a forgotten password each end in their own error")
    func interactiveErrors() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("alice@example.com")
            let app = try system.app()
            let forged = ScriptedWebAuthenticator { url in
                var parameters = try await HostedPagesBrowser(identityBase: system.identityBase).signIn(
                    url, email: "alice@example.com", password: "Passw0rd!")
                parameters["state"] = "forged"
                return parameters
            }
            await #expect(throws: IdentityError.stateMismatch) {
                try await app.acquireTokenInteractively(InteractiveParameters(scopes: [system.clientID]), authenticator: forged)
            }
            let cancel = ScriptedWebAuthenticator { url in try await HostedPagesBrowser(identityBase: system.identityBase).cancel(url) }
            await #expect(throws: IdentityError.userCanceled) {
                try await app.acquireTokenInteractively(InteractiveParameters(scopes: [system.clientID]), authenticator: cancel)
            }
            let forgot = ScriptedWebAuthenticator { url in
                try await HostedPagesBrowser(identityBase: system.identityBase).forgotPassword(url)
            }
            await #expect(throws: IdentityError.passwordResetRequested) {
                try await app.acquireTokenInteractively(InteractiveParameters(scopes: [system.clientID]), authenticator: forgot)
            }
            // A nonce that is not ours: the script redeems nothing itself, so swap the request's
            // nonce by signing in through a URL with another nonce.
            let replay = ScriptedWebAuthenticator { url in
                var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
                components.queryItems = components.queryItems!.map { $0.name == "nonce" ? URLQueryItem(name: "nonce", value: "other") : $0 }
                return try await HostedPagesBrowser(identityBase: system.identityBase).signIn(
                    components.url!, email: "alice@example.com", password: "Passw0rd!")
            }
            await #expect(throws: IdentityError.nonceMismatch) {
                try await app.acquireTokenInteractively(InteractiveParameters(scopes: [system.clientID]), authenticator: replay)
            }
            #expect(try await app.accounts().isEmpty)
        }
    }

    @Test("silent: from the cache while valid, one refresh for many callers once due, the rotated token stored")
    func silentRefresh() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("alice@example.com")
            let clock = TestClock()
            let store = InMemoryTokenStore()
            let transport = CountingTransport()
            let app = try system.app(store: store, clock: clock, transport: transport)
            let signedIn = try await app.acquireToken(
                username: "alice@example.com", password: "Passw0rd!", scopes: [system.clientID], policy: "B2C_1_ROPC")
            let cached = try await app.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account)
            #expect(cached.fromCache)
            #expect(cached.accessToken == signedIn.accessToken)
            #expect(transport.count("refresh_token") == 0)

            let before = await store.read().entries.first?.refreshToken
            clock.advance(3400)  // within five minutes of the access token's expiry
            let results = try await withThrowingTaskGroup(of: AuthenticationResult.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await app.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(transport.count("refresh_token") == 1)
            #expect(Set(results.map(\.accessToken)).count == 1)
            #expect(results.allSatisfy { !$0.fromCache || $0.accessToken == results[0].accessToken })
            let after = await store.read().entries.first?.refreshToken
            #expect(after != nil && after != before)
            #expect(try await system.tasks(app, account: signedIn.account).list().items.isEmpty)
        }
    }

    @Test("two processes sharing one token file refresh once between them (the refresh lock), both get a token")
    func twoProcessesOneRefresh() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("alice@example.com")
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-two-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("cache.json")
            let clock = TestClock()
            let transport = CountingTransport()
            // Two applications with their own brokers over two store values: two `todo` processes.
            let first = try system.app(store: FileTokenStore(url: file), clock: clock, transport: transport)
            let second = try system.app(store: FileTokenStore(url: file), clock: clock, transport: transport)
            let signedIn = try await first.acquireToken(
                username: "alice@example.com", password: "Passw0rd!", scopes: [system.clientID], policy: "B2C_1_ROPC")
            clock.advance(3400)
            async let a = first.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account)
            async let b = second.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account)
            let (one, two) = try await (a, b)
            #expect(one.accessToken == two.accessToken)
            #expect(transport.count("refresh_token") == 1)
            // The family is intact: a forced refresh still works.
            _ = try await second.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account, forceRefresh: true)
        }
    }

    @Test("a refresh token the server revoked (reuse detected) gives interactionRequired, and is forgotten")
    func revokedRefreshToken() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("alice@example.com")
            let store = InMemoryTokenStore()
            let app = try system.app(store: store)
            let signedIn = try await app.acquireToken(
                username: "alice@example.com", password: "Passw0rd!", scopes: [system.clientID], policy: "B2C_1_ROPC")
            let stale = await store.read()
            _ = try await app.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account, forceRefresh: true)
            // The client moves on (its successor is used), so the stale token is no longer a race
            // the reuse interval forgives.
            _ = try await app.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account, forceRefresh: true)
            // Put the spent refresh token back, as a stolen copy would be: redeeming it again
            // revokes the whole family (RFC 9700 §4.14.2).
            try await store.modify { $0 = stale }
            await #expect {
                try await app.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account, forceRefresh: true)
            } throws: { error in
                guard case IdentityError.interactionRequired(_, let code, _) = error else { return false }
                return code != nil
            }
            #expect(await store.read().entries.first?.refreshToken == nil)
            await #expect {
                try await app.acquireTokenSilently(scopes: [system.clientID], account: signedIn.account)
            } throws: { error in
                if case IdentityError.interactionRequired = error { return true }
                return false
            }
        }
    }

    @Test("two accounts, switching, a policy switch (profile edit) and removal")
    func accountsAndPolicies() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("ann@example.com", name: "Ann")
            try await system.addUser("ben@example.com", name: "Ben")
            let app = try system.app()
            let ann = try await app.acquireToken(
                username: "ann@example.com", password: "Passw0rd!", scopes: [system.clientID], policy: "B2C_1_ROPC")
            let ben = try await app.acquireToken(
                username: "ben@example.com", password: "Passw0rd!", scopes: [system.clientID], policy: "B2C_1_ROPC")
            #expect(Set(try await app.accounts().map(\.username)) == ["ann@example.com", "ben@example.com"])
            #expect(try await app.currentAccount()?.username == "ben@example.com")
            try await app.setCurrentAccount(ann.account)
            #expect(try await app.currentAccount()?.username == "ann@example.com")
            #expect(try await app.account(matching: "BEN@example.com")?.homeAccountID == ben.account.homeAccountID)

            // Each user's tasks stay theirs through the SDK too.
            _ = try await system.tasks(app, account: ann.account).create(title: "Ann's")
            #expect(try await system.tasks(app, account: ben.account).list().items.isEmpty)

            // Profile edit runs another user flow: its tokens are bound to that policy.
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            _ = try await app.acquireTokenInteractively(
                InteractiveParameters(scopes: [system.clientID]),
                authenticator: ScriptedWebAuthenticator { url in
                    try await browser.signIn(url, email: "ann@example.com", password: "Passw0rd!")
                })
            let edit = ScriptedWebAuthenticator { url in
                let page = try await browser.open(url)
                return try HostedPagesBrowser.appParameters(try await browser.submit(page, [("displayName", "Ann Edited")]))
            }
            let edited = try await app.acquireTokenInteractively(
                InteractiveParameters(scopes: [system.clientID], policy: "B2C_1_edit_profile"), authenticator: edit)
            #expect(edited.account.policy == "B2C_1_edit_profile")
            #expect(edited.account.name == "Ann Edited")
            #expect(edited.account.homeAccountID.contains("-b2c_1_edit_profile."))

            try await app.signOut(ben.account)
            #expect(try await app.accounts().contains { $0.username == "ben@example.com" } == false)
            await #expect(throws: IdentityError.self) {
                try await app.acquireTokenSilently(scopes: [system.clientID], account: ben.account)
            }
        }
    }

    @Test("browser sign-out ends the identity service's session: prompt=none then needs a sign-in")
    func browserSignOut() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("alice@example.com")
            let app = try system.app()
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            let signedIn = try await app.acquireTokenInteractively(
                InteractiveParameters(scopes: [system.clientID]),
                authenticator: ScriptedWebAuthenticator { url in
                    try await browser.signIn(url, email: "alice@example.com", password: "Passw0rd!")
                })
            // With the SSO cookie, prompt=none signs in without a page.
            let silentPage = ScriptedWebAuthenticator { url in try await browser.straightThrough(url) }
            let sso = try await app.acquireTokenInteractively(
                InteractiveParameters(scopes: [system.clientID], prompt: Prompt.none), authenticator: silentPage)
            #expect(sso.account.homeAccountID == signedIn.account.homeAccountID)

            try await app.signOut(signedIn.account, browser: ScriptedWebAuthenticator { url in try await browser.straightThrough(url) })
            #expect(try await app.accounts().isEmpty)
            await #expect {
                try await app.acquireTokenInteractively(
                    InteractiveParameters(scopes: [system.clientID], prompt: Prompt.none), authenticator: silentPage)
            } throws: { error in
                if case IdentityError.interactionRequired(_, let code, _) = error { return code == "AADB2C90077" }
                return false
            }
        }
    }

    @Test("the loopback authenticator receives a form_post response on a real socket")
    func loopbackFormPost() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("alice@example.com")
            let app = try system.app()
            let browser = HostedPagesBrowser(identityBase: system.identityBase)
            // The "system browser": fills in the sign-in page, then posts the form_post page's
            // hidden fields to the loopback address, as Chromium's auto-submit would.
            // Its answer is checked here, once the task is awaited.
            let posting = Mutex<Task<TransportResponse, any Error>?>(nil)
            let loopback = LoopbackWebAuthenticator(responseMode: .formPost, timeout: .seconds(30)) { url in
                posting.withLock {
                    $0 = Task {
                        let page = try await browser.open(url)
                        let answer = try await browser.submit(page, [("email", "alice@example.com"), ("password", "Passw0rd!")])
                        let action = answer.formAction()!
                        let body = FormBody.encode(answer.hiddenFields.map { ($0.key, $0.value) })
                        return try await URLSessionTransport().send(
                            TransportRequest(
                                method: "POST", url: URL(string: action)!, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                body: Data(body.utf8)))
                    }
                }
            }
            let result = try await app.acquireTokenInteractively(InteractiveParameters(scopes: [system.clientID]), authenticator: loopback)
            #expect(result.account.username == "alice@example.com")
            let response = try await #require(posting.withLock { $0 }).value
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self).contains("You can close this tab"))
        }
    }

    @Test("TaskClient retries once with a fresh token after 401 invalid_token, and maps problems to typed errors")
    func taskClientRetryAndErrors() async throws {
        try await LiveSystem.run { system in
            try await system.addUser("alice@example.com")
            let app = try system.app()
            let signedIn = try await app.acquireToken(
                username: "alice@example.com", password: "Passw0rd!", scopes: [system.clientID], policy: "B2C_1_ROPC")
            let calls = CallLog()
            let tasks = TaskClient(baseURL: system.apiBase) { force in
                await calls.record(force)
                // The first token is one the API refuses (revoked, say); a forced refresh fixes it.
                return force ? signedIn.accessToken : "not-a-token"
            }
            let created = try await tasks.create(title: "retried")
            #expect(await calls.forced == [false, true])
            #expect(created.etag != nil)

            let good = system.tasks(app, account: signedIn.account)
            await #expect(throws: TaskClientError.notFound) { try await good.get(UUID()) }
            await #expect(throws: TaskClientError.versionMismatch) {
                try await good.update(created.task.id, TaskPatch(completed: true), ifMatch: "\"999\"")
            }
            await #expect {
                try await good.create(title: "   ")
            } throws: { error in
                if case TaskClientError.invalid(let problem) = error { return problem.status == 422 }
                return false
            }
            let updated = try await good.update(created.task.id, TaskPatch(title: "renamed"), ifMatch: created.etag)
            #expect(updated.task.title == "renamed")
            try await good.delete(created.task.id, ifMatch: updated.etag)
            #expect(try await good.all().isEmpty)

            let never = TaskClient(baseURL: system.apiBase) { _ in "not-a-token" }
            await #expect {
                try await never.list()
            } throws: { error in
                if case TaskClientError.unauthorized = error { return true }
                return false
            }
        }
    }
}

actor CallLog {
    var forced: [Bool] = []
    func record(_ force: Bool) { forced.append(force) }
}
