import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

@Suite("Authorize, hosted pages and the authorization-code grant")
struct InteractiveFlowTests {
    @Test(
        "sign up on the hosted page, redirect with code and state, redeem with PKCE; nonce and newUser in the ID token",
        arguments: TestDatabase.engines)
    func signUpAndRedeem(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let attempt = AuthorizationAttempt(harness: h)
            let redirect = try await driver.signUp(h, attempt: attempt, email: "Bob@Example.com", name: "Bob")
            #expect(redirect.status == .found)
            #expect(redirect.location?.hasPrefix(IdentityHarness.redirect + "?") == true)
            let parameters = redirect.redirectParameters
            #expect(parameters["state"] == attempt.state)
            let code = try #require(parameters["code"])

            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(tokens.status == .ok)
            let body = tokens.json
            let id = DecodedJWT(body["id_token"] as! String).claims
            #expect(id["nonce"] as? String == attempt.nonce)
            #expect(id["newUser"] as? Bool == true)
            #expect(id["name"] as? String == "Bob")
            #expect(id["emails"] as? [String] == ["Bob@Example.com"])
            #expect(id["tfp"] as? String == "B2C_1_susi")
            let clientInfo = DecodedJWT("x." + (body["client_info"] as! String)).claims
            #expect((clientInfo["uid"] as? String)?.hasSuffix("-b2c_1_susi") == true)
            #expect(body["refresh_token"] != nil)

            // A second redemption of the same code fails and revokes what the first issued.
            let replay = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(replay.json["error"] as? String == "invalid_grant")
            let refresh = try await driver.refresh(h, token: body["refresh_token"] as! String, policy: "B2C_1_susi")
            #expect(b2cCode(refresh) == "AADB2C90129")
        }
    }

    @Test(
        "oob: the page shows the code and sends the browser on to urn:ietf:wg:oauth:2.0:oob?code=…&state=…, for web views to catch",
        arguments: TestDatabase.engines)
    func outOfBand(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var attempt = AuthorizationAttempt(harness: h)
            attempt.redirectURI = "urn:ietf:wg:oauth:2.0:oob"

            let page = try await driver.signIn(h, attempt: attempt, email: "alice@example.com")

            #expect(page.status == .ok)
            let shown = try #require(page.text.range(of: "<pre class=\"code\" id=\"code\">").map { page.text[$0.upperBound...] })
            let code = String(shown.prefix { $0 != "<" })
            #expect(!code.isEmpty)
            let refresh = try #require(page.text.range(of: "http-equiv=\"refresh\" content=\"0;url=").map { page.text[$0.upperBound...] })
            let target = try #require(URLComponents(string: Form.unescapeHTML(String(refresh.prefix { $0 != "\"" }))))
            #expect(target.scheme == "urn" && target.path == "ietf:wg:oauth:2.0:oob")
            #expect(target.queryItems?.first { $0.name == "code" }?.value == code)
            #expect(target.queryItems?.first { $0.name == "state" }?.value == attempt.state)
            #expect(try await driver.redeem(h, attempt: attempt, code: code).status == .ok)
        }
    }

    @Test("PKCE: a wrong verifier, a missing verifier and a missing challenge are refused", arguments: TestDatabase.engines)
    func pkce(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var attempt = AuthorizationAttempt(harness: h)
            let code = try #require(try await driver.signIn(h, attempt: attempt, email: "alice@example.com").redirectParameters["code"])
            let good = attempt.pkce
            attempt.pkce = PKCEPair()
            let wrong = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(b2cCode(wrong) == "AADB2C90182")
            attempt.pkce = good
            // The code was consumed by the failed attempt: single use means single use.
            #expect(try await driver.redeem(h, attempt: attempt, code: code).status == .badRequest)

            let second = AuthorizationAttempt(harness: h)
            // The SSO session from the first sign-in answers at once.
            let code2 = try #require(try await driver.start(second, harness: h).redirectParameters["code"])
            let missing = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [("grant_type", "authorization_code"), ("client_id", h.clientID), ("code", code2), ("redirect_uri", second.redirectURI)])
            #expect(b2cCode(missing) == "AADB2C90183")

            // A public client without code_challenge is served, as B2C serves native apps
            // (SPEC §2.8): the ADAL-era apps send none. Its code redeems without a verifier.
            func noChallenge(_ clientID: String) -> String {
                h.path("B2C_1_susi", "oauth2/v2.0/authorize") + "?"
                    + Form.encode([
                        ("client_id", clientID), ("response_type", "code"), ("redirect_uri", IdentityHarness.redirect),
                        ("scope", "openid"), ("state", "s1"),
                    ])
            }
            let legacy = try await driver.follow(try await driver.get(noChallenge(h.clientID)))
            let legacyCode = try #require(legacy.redirectParameters["code"])
            let redeemed = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [
                    ("grant_type", "authorization_code"), ("client_id", h.clientID), ("code", legacyCode),
                    ("redirect_uri", IdentityHarness.redirect),
                ])
            #expect(redeemed.status == .ok)
            // An app registered with `pkce: required` gets AADB2C99059 at its redirect URI.
            let strict = AppRegistration(
                clientID: UUID(), tenantID: h.tenant.id, displayName: "Strict", kind: .public, redirectURIs: [IdentityHarness.redirect],
                requirePKCE: true)
            try await h.server.tenants.save(strict, now: Date())
            let refused = try await driver.get(noChallenge(strict.clientIDString))
            #expect(b2cCode(redirect: refused) == "AADB2C99059")
            #expect(refused.redirectParameters["state"] == "s1")
            // plain is refused unless the app opts in.
            let plain = try await driver.get(noChallenge(h.clientID) + "&code_challenge=\(good.verifier)&code_challenge_method=plain")
            #expect(b2cCode(redirect: plain) == "AADB2C90184")
        }
    }

    @Test(
        "the redirect URI must match: wrong ones get a page, never a redirect; loopback any port for public clients only",
        arguments: TestDatabase.engines)
    func redirectMatching(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var attempt = AuthorizationAttempt(harness: h)
            attempt.redirectURI = "https://evil.example/callback"
            let evil = try await driver.get(attempt.url(harness: h))
            #expect(evil.status == .badRequest)
            #expect(evil.location == nil)
            #expect(evil.text.contains("AADB2C90006"))
            attempt.redirectURI = "http://127.0.0.1:8400/other-path"
            #expect(try await driver.get(attempt.url(harness: h)).location == nil)
            attempt.redirectURI = "http://localhost:54321"
            let loopback = try await driver.get(attempt.url(harness: h))
            #expect(loopback.status == .found)
            #expect(loopback.location?.contains("/pages/signin?tx=") == true)
            attempt.clientID = UUID().uuidString
            let unknownClient = try await driver.get(attempt.url(harness: h))
            #expect(unknownClient.location == nil)
            #expect(unknownClient.text.contains("AADB2C90018"))
            // The confidential web app gets no loopback latitude.
            let web = h.seed.webApp
            #expect(web.isRegisteredRedirect("http://localhost:3000/auth/openid/return"))
            #expect(!web.isRegisteredRedirect("http://localhost:3001/auth/openid/return"))
            #expect(h.seed.publicApp.isRegisteredRedirect("http://127.0.0.1:61234"))
            #expect(!h.seed.publicApp.isRegisteredRedirect("http://127.0.0.1.evil.example:61234"))
        }
    }

    @Test(
        "SSO: a second authorize skips the password; prompt=login asks again; prompt=none without a session gives AADB2C90077",
        arguments: TestDatabase.engines)
    func singleSignOn(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var none = AuthorizationAttempt(harness: h)
            none.extra = [("prompt", "none")]
            let noSession = try await driver.start(none, harness: h)
            #expect(noSession.redirectParameters["error"] == "interaction_required")
            #expect(b2cCode(redirect: noSession) == "AADB2C90077")
            #expect(noSession.redirectParameters["state"] == none.state)

            _ = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "alice@example.com")
            let silent = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            #expect(silent.redirectParameters["code"] != nil, "the SSO cookie skipped the page")
            let noneNow = try await driver.start(none, harness: h)
            #expect(noneNow.redirectParameters["code"] != nil)
            var login = AuthorizationAttempt(harness: h)
            login.extra = [("prompt", "login")]
            let forced = try await driver.start(login, harness: h)
            #expect(forced.status == .ok)
            #expect(forced.text.contains("id=\"password\""))
            // A profile-edit flow reuses the session too.
            let profile = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_edit_profile"), harness: h)
            #expect(profile.text.contains("Edit your profile"))
            let saved = try await driver.submit(
                profile, [("displayName", "Alice Renamed"), ("givenName", "Alice"), ("surname", ""), ("city", "Oslo"), ("country", "")])
            let code = try #require(saved.redirectParameters["code"])
            var edit = AuthorizationAttempt(harness: h, policy: "B2C_1_edit_profile")
            edit.pkce = PKCEPair()
            _ = edit
            #expect(code.count > 20)
            let user = try await h.server.administration.findUser(tenantID: h.tenant.id, emailOrID: "alice@example.com")
            #expect(user.displayName == "Alice Renamed")
            #expect(user.attributes["city"] == "Oslo")

            // Logout ends the session: prompt=none fails again. A GET without an ID token of this
            // session's user asks first; the confirmation's POST signs out.
            let ask = try await driver.get(
                h.path("B2C_1_susi", "oauth2/v2.0/logout") + "?post_logout_redirect_uri=\(IdentityHarness.redirect)&state=bye")
            #expect(ask.location == nil)
            #expect(ask.text.contains("id=\"confirmSignOut\""))
            #expect(try await driver.start(none, harness: h).redirectParameters["code"] != nil, "still signed in until confirmed")
            let logout = try await driver.post(
                try #require(ask.formAction), [("post_logout_redirect_uri", IdentityHarness.redirect), ("state", "bye")])
            #expect(logout.location == "\(IdentityHarness.redirect)?state=bye")
            #expect(try await b2cCode(redirect: driver.start(none, harness: h)) == "AADB2C90077")
            let openRedirect = try await driver.get(
                h.path("B2C_1_susi", "oauth2/v2.0/logout") + "?post_logout_redirect_uri=https://evil.example/")
            #expect(openRedirect.location == nil)
            #expect(openRedirect.text.contains("AADB2C90067"))
        }
    }

    @Test("'Forgot your password?' returns AADB2C90118; Cancel returns AADB2C90091", arguments: TestDatabase.engines)
    func forgotAndCancel(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let attempt = AuthorizationAttempt(harness: h)
            let page = try await driver.start(attempt, harness: h)
            let forgot = try await driver.get(try #require(page.link(id: "forgotPassword")))
            #expect(forgot.redirectParameters["error"] == "access_denied")
            #expect(b2cCode(redirect: forgot) == "AADB2C90118")
            #expect(forgot.redirectParameters["state"] == attempt.state)
            let description = try #require(forgot.location)
            #expect(description.contains("AADB2C90118%3a+The+user+has+forgotten+their+password.%0d%0aCorrelation+ID%3a+"))
            #expect(description.contains("%0d%0aTimestamp%3a+"))

            let second = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            let cancelForm = second.text.components(separatedBy: "class=\"cancel\"")[0]
            let action = try #require(cancelForm.components(separatedBy: "action=\"").last?.components(separatedBy: "\"").first)
            let cancel = try await driver.post(Form.unescapeHTML(action), [("csrf_token", second.field("csrf_token") ?? "")])
            #expect(b2cCode(redirect: cancel) == "AADB2C90091")
            #expect(cancel.redirectParameters["error"] == "access_denied")
        }
    }

    @Test(
        "a completed sign-in's page reloaded by its own browser goes on to the app with the same code until the app redeems it; another browser is refused; a sign-in that ended in an error says Already completed",
        arguments: TestDatabase.engines)
    func reloadAfterCompletion(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let attempt = AuthorizationAttempt(harness: h)
            let page = try await driver.start(attempt, harness: h)
            let action = try #require(page.formAction)
            let form = [("csrf_token", page.field("csrf_token") ?? ""), ("email", "alice@example.com"), ("password", "Passw0rd!")]
            let answered = try await driver.follow(try await driver.post(action, form))
            let code = try #require(answered.redirectParameters["code"])
            // The answer was lost (a crash after the completion was stored): the browser posts again.
            let reloaded = try await driver.follow(try await driver.post(action, form))
            #expect(reloaded.status == .found && reloaded.location?.hasPrefix(IdentityHarness.redirect + "?") == true, "\(reloaded.text)")
            #expect(reloaded.redirectParameters["code"] == code && reloaded.redirectParameters["state"] == attempt.state)
            let shown = try await driver.get(action)
            #expect(shown.status == .found && shown.redirectParameters["code"] == code)
            // Once the app has redeemed it, a reload (the Back button) is not sent on again: the
            // redeemed code presented again would revoke the sign-in it bought.
            let redeemed = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(redeemed.status == .ok)
            let back = try await driver.get(action)
            #expect(back.status == .badRequest && back.text.contains("Already completed") && back.redirectParameters["code"] == nil)
            let refresh = try await driver.refresh(h, token: try #require(redeemed.json["refresh_token"] as? String), policy: "B2C_1_susi")
            #expect(refresh.status == .ok, "the sign-in stays: \(refresh.text)")
            // Only the browser that started it is sent on.
            let jar = driver.cookies
            driver.cookies = [:]
            let elsewhere = try await driver.get(action)
            #expect(elsewhere.status == .forbidden && elsewhere.redirectParameters["code"] == nil)
            driver.cookies = jar

            // A sign-in that ended in an error ("Forgot your password?") kept no answer to send again.
            driver.cookies = [:]  // a browser without the first sign-in's session
            let second = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            let forgot = try await driver.get(try #require(second.link(id: "forgotPassword")))
            #expect(b2cCode(redirect: forgot) == "AADB2C90118")
            let again = try await driver.get(try #require(second.formAction))
            #expect(again.status == .badRequest && again.text.contains("Already completed"))
        }
    }

    @Test("forms without the right CSRF token are refused and change nothing", arguments: TestDatabase.engines)
    func csrf(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            let signUpPage = try await driver.follow(try await driver.get(try #require(page.link(id: "createAccount"))))
            let action = try #require(signUpPage.formAction)
            let fields = [
                ("email", "mallory@example.com"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "M"),
            ]
            let forged = try await driver.post(action, [("csrf_token", "forged")] + fields)
            #expect(forged.status == .forbidden)
            let missing = try await driver.post(action, fields)
            #expect(missing.status == .forbidden)
            // The right token in the form but no cookie (a cross-site post) is refused too.
            let token = signUpPage.field("csrf_token") ?? ""
            let jar = driver.cookies
            driver.cookies = [:]
            let noCookie = try await driver.post(action, [("csrf_token", token)] + fields)
            #expect(noCookie.status == .forbidden)
            driver.cookies = jar
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test(
        "sign-up validates attributes and passwords, refuses duplicate emails case-insensitively, and writes nothing on failure",
        arguments: TestDatabase.engines)
    func signUpValidation(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("alice@example.com")
            let page = try await driver.follow(
                try await driver.get(
                    try #require(try await driver.start(AuthorizationAttempt(harness: h), harness: h).link(id: "createAccount"))))
            // The address step refuses what is not an address.
            let notAnAddress = try await driver.submit(page, [("step", "send"), ("email", "not-an-email")])
            #expect(notAnAddress.status == .badRequest && notAnAddress.text.contains("valid email"))
            // Details before any address is proven are refused.
            let unproven = try await driver.submit(
                page, [("step", "create"), ("email", "x@example.com"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!")])
            #expect(unproven.status == .badRequest && unproven.text.contains("Verify your email address first"))

            var details = try await driver.submit(page, [("step", "send"), ("email", "x@example.com")])
            details = try await driver.submit(details, [("step", "verify"), ("code", try await h.latestCode())])
            #expect(details.text.contains("email_success"))
            let cases: [([(String, String)], String)] = [
                ([("newPassword", "short"), ("reenterPassword", "short"), ("displayName", "X")], "between 8 and 64"),
                ([("newPassword", "alllowercase"), ("reenterPassword", "alllowercase"), ("displayName", "X")], "at least 3"),
                ([("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd?"), ("displayName", "X")], "do not match"),
                ([("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "")], "display name"),
                (
                    [("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", String(repeating: "n", count: 300))],
                    "at most 256"
                ),
            ]
            for (fields, message) in cases {
                let response = try await driver.submit(details, [("step", "create"), ("email", "x@example.com")] + fields)
                #expect(response.status == .badRequest, "\(message)")
                #expect(response.text.contains(message), "\(message)")
                #expect(response.location == nil)
            }
            // Typed input is kept on the re-rendered page (but never the password); the address is
            // the proven one whatever is posted.
            let kept = try await driver.submit(
                details,
                [
                    ("step", "create"), ("email", "other@example.com"), ("newPassword", "Passw0rd!"), ("reenterPassword", "nope"),
                    ("displayName", "Keeper"),
                ])
            #expect(kept.field("email") == "x@example.com")
            #expect(kept.field("displayName") == "Keeper")
            #expect(!kept.text.contains("Passw0rd!"))

            // An address that has an account gets its code like any other; "already exists" comes
            // only after the code proved the address.
            let duplicate = try await driver.signUp(h, attempt: AuthorizationAttempt(harness: h), email: "ALICE@example.com", name: "A2")
            #expect(duplicate.status == .conflict && duplicate.text.contains("already exists"))
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
        }
    }

    @Test("response modes: form_post renders an auto-submitting form; fragment puts the code after #", arguments: TestDatabase.engines)
    func responseModes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var post = AuthorizationAttempt(harness: h)
            post.extra = [("response_mode", "form_post"), ("client_info", "1"), ("x-client-SKU", "MSAL.Python")]
            let page = try await driver.signIn(h, attempt: post, email: "alice@example.com")
            #expect(page.status == .ok)
            #expect(page.text.contains("action=\"\(IdentityHarness.redirect)\""))
            #expect(page.field("state") == post.state)
            let code = try #require(page.field("code"))
            #expect(try await driver.redeem(h, attempt: post, code: code).status == .ok)

            var fragment = AuthorizationAttempt(harness: h)
            fragment.extra = [("response_mode", "fragment")]
            let redirect = try await driver.start(fragment, harness: h)
            #expect(redirect.location?.hasPrefix("\(IdentityHarness.redirect)#code=") == true)
        }
    }

    @Test("the simulated Facebook provider: a stub account with its own oid and idp facebook.com", arguments: TestDatabase.engines)
    func facebook(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_facebook")
            let dialog = try await driver.start(attempt, harness: h)
            #expect(dialog.text.contains("Facebook"))
            let back = try await driver.submit(
                dialog,
                [
                    ("email", "fbuser@example.com"), ("name", "Fay Book"), ("state", dialog.field("state") ?? ""),
                    ("redirect_uri", dialog.field("redirect_uri") ?? ""),
                ])
            let code = try #require(back.redirectParameters["code"])
            let id = DecodedJWT(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as! String).claims
            #expect(id["idp"] as? String == "facebook.com")
            #expect(id["newUser"] as? Bool == true)
            #expect(id["given_name"] as? String == "Fay")
            #expect(id["family_name"] as? String == "Book")

            // domain_hint skips the picker in the combined flow; the same Facebook account maps to the same oid.
            driver.cookies.removeValue(forKey: "x-ms-cpim-sso-\(h.tenant.guid)")
            var hinted = AuthorizationAttempt(harness: h)
            hinted.extra = [("domain_hint", "facebook.com")]
            let dialog2 = try await driver.start(hinted, harness: h)
            let back2 = try await driver.submit(
                dialog2,
                [
                    ("email", "FBuser@example.com"), ("name", "Fay Book"), ("state", dialog2.field("state") ?? ""),
                    ("redirect_uri", dialog2.field("redirect_uri") ?? ""),
                ])
            let id2 = DecodedJWT(
                try await driver.redeem(h, attempt: hinted, code: try #require(back2.redirectParameters["code"])).json["id_token"]
                    as! String
            ).claims
            #expect(id2["oid"] as? String == id["oid"] as? String)
            #expect(id2["newUser"] == nil)
        }
    }

    @Test(
        "password reset: code from the outbox, new password, old refresh tokens revoked, account unlocked", arguments: TestDatabase.engines)
    func passwordReset(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let oldRefresh = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            for attempt in 1...10 { _ = try await driver.ropc(h, username: "alice@example.com", password: "bad-\(attempt)") }
            #expect(try await b2cCode(driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")) == "AADB2C90114")

            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_reset")
            let emailStep = try await driver.start(attempt, harness: h)
            let codeStep = try await driver.submit(emailStep, [("step", "send"), ("email", "alice@example.com")])
            #expect(codeStep.text.contains("Verification code has been sent"))
            let wrongCode = try await driver.submit(codeStep, [("step", "verify"), ("code", "000000x")])
            #expect(wrongCode.text.contains("incorrect"))
            let messages = try await h.server.outbox(tenantID: h.tenant.id)
            let body = try #require(messages.first?.body)
            let code = try #require(body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 6 }.map(String.init))
            #expect(messages.first?.recipient == "alice@example.com")
            let passwordStep = try await driver.submit(codeStep, [("step", "verify"), ("code", code)])
            #expect(passwordStep.text.contains("E-mail address verified"))
            let done = try await driver.submit(
                passwordStep, [("step", "change"), ("newPassword", "Brand-n3w-pass"), ("reenterPassword", "Brand-n3w-pass")])
            #expect(done.redirectParameters["code"] != nil)
            #expect(try await b2cCode(driver.refresh(h, token: oldRefresh)) == "AADB2C90129")
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Brand-n3w-pass").status == .ok)
            #expect(try await b2cCode(driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")) == "AADB2C90225")
        }
    }

    @Test("Graph /v1.0/me answers Graph's shape for a User.Read token and refuses others", arguments: TestDatabase.engines)
    func graphMe(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            let graph = try await driver.ropc(
                h, username: "alice@example.com", password: "Passw0rd!", scope: "openid https://graph.microsoft.com/User.Read"
            ).json
            let token = try #require(graph["access_token"] as? String)
            #expect(DecodedJWT(token).claims["aud"] as? String == "00000003-0000-0000-c000-000000000000")
            let me = try await driver.get("/v1.0/me", headers: [.authorization: "Bearer \(token)"])
            #expect(me.status == .ok)
            #expect(me.json["id"] as? String == user.objectID)
            #expect(me.json["displayName"] as? String == "Alice")
            #expect(me.json["mail"] as? String == "alice@example.com")
            #expect(me.json["@odata.context"] as? String == "https://graph.microsoft.com/v1.0/$metadata#users/$entity")
            #expect(me.json.keys.contains("businessPhones"))
            let apiToken = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["access_token"] as! String
            // Refusals in Graph's error form, with its codes and the request's id.
            let refusals: [(HTTPFields, HTTPResponse.Status, String)] = [
                ([.authorization: "Bearer \(apiToken)"], .forbidden, "Authorization_RequestDenied"),
                ([:], .unauthorized, "InvalidAuthenticationToken"),
                ([.authorization: "Bearer \(token.dropLast(3))abc"], .unauthorized, "InvalidAuthenticationToken"),
            ]
            for (headers, status, code) in refusals {
                let refused = try await driver.get("/v1.0/me", headers: headers)
                #expect(refused.status == status, "\(code)")
                let error = refused.json["error"] as? [String: Any]
                #expect(error?["code"] as? String == code)
                let inner = error?["innerError"] as? [String: Any]
                #expect(inner?["request-id"] as? String == refused.headers[HTTPField.Name("client-request-id")!])
                if status == .unauthorized { #expect(refused.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true) }
            }
        }
    }

    @Test("authorize errors go to the redirect URI in B2C form", arguments: TestDatabase.engines)
    func authorizeErrors(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var attempt = AuthorizationAttempt(harness: h)
            attempt.extra = [("prompt", "bogus")]
            let r1 = try await driver.get(attempt.url(harness: h))
            #expect(b2cCode(redirect: r1) == "AADB2C90043")
            attempt.extra = []
            attempt.responseType = "token"
            let r2 = try await driver.get(attempt.url(harness: h))
            #expect(b2cCode(redirect: r2) == "AADB2C90057")
            attempt.responseType = "code"
            attempt.extra = [("response_mode", "carrier_pigeon")]
            let r3 = try await driver.get(attempt.url(harness: h))
            #expect(b2cCode(redirect: r3) == "AADB2C90014")
            attempt.extra = [("max_age", "-1")]
            let r4 = try await driver.get(attempt.url(harness: h))
            #expect(b2cCode(redirect: r4) == "AADB2C90120")
            attempt.extra = []
            attempt.scope = "offline_access"
            let r5 = try await driver.get(attempt.url(harness: h))
            #expect(b2cCode(redirect: r5) == "AADB2C90115")
            let ropcFlow = AuthorizationAttempt(harness: h, policy: "B2C_1_ROPC")
            let ropcResponse = try await driver.get(ropcFlow.url(harness: h))
            #expect(ropcResponse.redirectParameters["error"] != nil)
        }
    }
}
