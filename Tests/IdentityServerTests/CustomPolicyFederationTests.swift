import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
import WireCoding
@testable import TrustFramework

@testable import IdentityServer
@testable import UserJourneys

/// A custom policy's OpenID Connect identity provider (SPEC §2.12): a button on the unified page
/// sends the browser to a provider on loopback; its ID token, verified as the built-in flows
/// verify it, becomes the profile's output claims, `CreateAlternativeSecurityId` turns it into
/// the key the directory profiles read and write by, and only that verified key signs in.
@Suite("Custom policies: OpenID Connect identity providers")
struct CustomPolicyFederationTests {
    @Test("a provider button signs up a new account by its verified identity, then signs the same account in; the secret goes client_secret_post")
    func signUpThenSignIn() async throws {
        try await Self.withLoopbackProvider { h, driver, script, port in
        let first = try await Self.signIn(h, driver, script: script)
        let code = try #require(first.response.redirectParameters["code"], "\(first.response.status) \(first.response.location ?? first.response.text.prefix(300).description)")
        let users = try await h.server.users.users(tenantID: h.tenant.id)
        #expect(users.count == 1)
        let user = try #require(users.first)
        #expect(user.identityProvider.rawValue == "http://127.0.0.1:\(port)" && user.signInName == "s1" && user.passwordHash == nil)
        #expect(user.displayName == "Loopback Person")
        let tokens = try await driver.redeem(h, attempt: first.attempt, code: code)
        let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String, "\(tokens.text)")).claims
        #expect(claims["sub"] as? String == user.objectID && claims["newUser"] as? Bool == true)
        // B2C's default client authentication for an OpenID Connect provider.
        let call = try #require(await script.tokenCalls.last)
        #expect(call.authorization == nil && call.body.contains("client_secret=loopback-secret") && call.body.contains("client_id=local-client"))

        let second = try await Self.signIn(h, driver, script: script)
        #expect(second.response.redirectParameters["code"] != nil)
        #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
        }
    }

    @Test("a forged ID token ends the sign-in with AADB2C90273 and creates nothing; the state cannot be replayed")
    func forgedTokenRefused() async throws {
        try await Self.withLoopbackProvider { h, driver, script, port in
        let (back, state, _) = try await Self.signIn(h, driver, script: script, flavour: "forged")
        #expect(b2cCode(redirect: back) == "AADB2C90273", "\(back.status) \(back.location ?? back.text.prefix(300).description)")
        #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        let replay = try await driver.get(
            "/\(h.tenant.name)/oauth2/authresp/Loopback-OIDC?" + Form.encode([("code", "again"), ("state", state)]))
        #expect(replay.redirectParameters["code"] == nil)
        }
    }

    @Test("an alternativeSecurityId the journey did not verify signs no one in and creates no one")
    func unverifiedIdentityRefused() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            try await Self.upload(h, port: 1)
            let existing = UserAccount(
                tenantID: h.tenant.id, identityProvider: IdentityProviderKind(rawValue: "https://idp.example")!, signInName: "victim",
                email: nil, displayName: "Victim", createdAt: Date(), emailVerified: false)
            try await h.server.users.create(existing)
            let directory = PolicyDirectoryProvider(users: h.server.users, hasher: h.server.service.hasher, passwords: h.server.service.passwords)
            let key = #"{"issuer":"https://idp.example","issuerUserId":"\#(Data("victim".utf8).base64EncodedString())"}"#
            let policy = try #require(try await h.server.service.customPolicies.program(tenantID: h.tenant.id, id: "B2C_1A_test_susi"))
            let read = try #require(policy.profile("Directory-ReadBySecurityId"))
            let write = try #require(policy.profile("Directory-WriteBySecurityId"))
            var claims = PolicyClaims(["alternativeSecurityId": .string(key)])
            let found = try await directory.run(
                read, claims: &claims, tenant: h.tenant, now: Date(), journeyUser: nil, provenEmail: nil, provenAlternativeSecurityIds: [])
            #expect(found?.account.id == existing.id && found?.proves == false)
            let proven = try await directory.run(
                read, claims: &claims, tenant: h.tenant, now: Date(), journeyUser: nil, provenEmail: nil, provenAlternativeSecurityIds: [key])
            #expect(proven?.proves == true)
            let other = #"{"issuer":"https://idp.example","issuerUserId":"\#(Data("newcomer".utf8).base64EncodedString())"}"#
            var newcomer = PolicyClaims(["alternativeSecurityId": .string(other)])
            await #expect(throws: PolicyProfileFailure.self) {
                _ = try await directory.run(
                    write, claims: &newcomer, tenant: h.tenant, now: Date(),
                    journeyUser: nil, provenEmail: nil, provenAlternativeSecurityIds: [key])
            }
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
        }
    }

    @Test(
        "B2C's default response_types id_token: the provider posts the ID token back (form_post), a cross-site post is relayed once from this origin, a forged, replayed or code answer is refused"
    )
    func postedIDToken() async throws {
        let script = UpstreamProviderTests.Script()
        let box = UpstreamProviderTests.PortBox()
        try await UpstreamProviderTests.provider(script, port: { box.value }).test(.live) { idp in
            box.value = try #require(idp.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: box.value, responseTypes: nil)
                /// The provider's button; the authorization request's parameters.
                func toProvider() async throws -> [String: String] {
                    let unified = try await driver.follow(try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi"), harness: h))
                    let sent = try await driver.submit(unified, [("action", "provider"), ("exchange", "LoopbackExchange")])
                    let url = try #require(sent.location.flatMap(URLComponents.init(string:)), "\(sent.status) \(sent.text.prefix(300))")
                    return Dictionary((url.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { a, _ in a })
                }
                /// An ID token the provider makes for `nonce` (its token endpoint's, as its implicit answer would carry).
                func idToken(_ flavour: String, nonce: String) async throws -> String {
                    await script.set(flavour, nonce: nonce)
                    let answer = try await UpstreamProviderTests.send("POST", "http://127.0.0.1:\(box.value)/token", form: "grant_type=implicit")
                    let json = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
                    return try #require(json?["id_token"] as? String)
                }
                let callback = "/\(h.tenant.name)/oauth2/authresp/Loopback-OIDC"
                let request = try await toProvider()
                #expect(request["response_type"] == "id_token" && request["response_mode"] == "form_post", "\(request)")
                #expect(request["code_challenge"] == nil && request["nonce"] != nil)
                let state = try #require(request["state"])
                let token = try await idToken("good", nonce: try #require(request["nonce"]))

                // The provider's page on another site posts without the transaction cookie: the
                // answer is posted once more from this origin, where the browser sends it.
                let cookies = driver.cookies
                driver.cookies = [:]
                // Posted as relayed but without the cookie: another browser's, refused before
                // the state is looked up (it stays usable by the browser that started the sign-in).
                let forgedRelay = try await driver.post(callback, [("id_token", token), ("state", state), ("relayed", "1")])
                #expect(forgedRelay.status == .forbidden, "\(forgedRelay.status)")
                let relay = try await driver.post(callback, [("id_token", token), ("state", state)])
                // A `//host/…` path reaches the same route; the relay still posts to this server's own path.
                let offsite = try await driver.post("/" + callback, [("id_token", token), ("state", state)])
                driver.cookies = cookies
                #expect(relay.status == .ok && relay.text.contains(#"name="relayed" value="1""#), "\(relay.status) \(relay.text.prefix(400))")
                #expect(relay.formAction == callback && offsite.formAction == callback, "\(relay.formAction ?? "") \(offsite.formAction ?? "")")
                // The browser submits the relay form as it stands: its hidden fields, nothing else.
                let relayed = ["id_token", "state", "relayed"].map { ($0, relay.field($0) ?? "") }
                #expect(relayed.map(\.1) == [token, state, "1"])
                let done = try await driver.follow(try await driver.post(try #require(relay.formAction), relayed))
                #expect(done.redirectParameters["code"] != nil, "\(done.status) \(done.location ?? "") \(done.text.prefix(1500))")
                #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1, "the provider's identity made one account")
                let replayed = try await driver.post(callback, [("id_token", token), ("state", state)])
                #expect(replayed.status == .badRequest && replayed.text.contains("expired"), "the state is spent: \(replayed.status)")

                // Another key's token, or a code where an ID token was asked for, ends the sign-in.
                let second = try await toProvider()
                let forged = try await idToken("forged", nonce: second["nonce"] ?? "")
                let refused = try await driver.follow(try await driver.post(callback, [("id_token", forged), ("state", second["state"] ?? "")]))
                #expect(refused.redirectParameters["error_description"]?.contains("AADB2C90273") == true, "\(refused.status) \(refused.redirectParameters)")
                let third = try await toProvider()
                let coded = try await driver.follow(try await driver.get(callback + "?" + Form.encode([("code", "c-good"), ("state", third["state"] ?? "")])))
                #expect(coded.redirectParameters["error_description"]?.contains("AADB2C90273") == true, "\(coded.status) \(coded.redirectParameters)")
                #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
            }
        }
    }

    @Test("an OpenID Connect profile this service cannot run is refused at upload, naming it, and nothing is stored")
    func refusedAtUpload() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            let error = await #expect(throws: PolicyRejection.self) {
                try await Self.upload(h, port: 1, extraMetadata: #"<Item Key="token_endpoint_auth_method">private_key_jwt</Item>"#)
            }
            #expect(error?.problems.contains { $0.contains("'Loopback-OIDC'") && $0.contains("private_key_jwt") } == true, "\(String(describing: error))")
            let stored = try await h.server.service.customPolicies.policies(tenantID: h.tenant.id)
            #expect(stored.isEmpty)
        }
    }

    @Test("Facebook's OAuth2 profile is answered by the simulated Facebook: an account by Facebook's id, the same one next time; without it, AADB2C90037")
    func facebookProfile() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.upload(h, port: 1, facebook: true)
            var oids: [String] = []
            for _ in 0..<2 {
                driver.cookies = [:]
                let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
                let unified = try await driver.start(attempt, harness: h)
                let dialog = try await driver.submit(unified, [("action", "provider"), ("exchange", "LoopbackExchange")])
                #expect(dialog.text.contains("fbContinue"), "\(dialog.status) \(dialog.text.prefix(300))")
                let back = try await driver.submit(
                    dialog,
                    [("email", "fay@example.com"), ("name", "Fay Book"), ("state", dialog.field("state") ?? ""),
                     ("redirect_uri", dialog.field("redirect_uri") ?? "")])
                let code = try #require(back.redirectParameters["code"], "\(back.status) \(back.location ?? back.text.prefix(300).description)")
                let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)).claims
                #expect(claims["name"] as? String == "Fay Book")
                oids.append(try #require(claims["sub"] as? String))
            }
            #expect(oids[0] == oids[1])
            let users = try await h.server.users.users(tenantID: h.tenant.id)
            #expect(users.count == 1 && users.first?.identityProvider == .facebook)
        }
        try await IdentityHarness.run(.sqlite, configuration: .init(passwordHashCost: 4)) { h, driver in
            try await Self.upload(h, port: 1, facebook: true)
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
            let unified = try await driver.start(attempt, harness: h)
            let refused = try await driver.submit(unified, [("action", "provider"), ("exchange", "LoopbackExchange")])
            #expect(b2cCode(redirect: refused) == "AADB2C90037", "\(refused.status) \(refused.location ?? "")")
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("through oidc-provider-mock, a provider nobody here wrote: the button, the mock's consent, an account by its subject, the same one next time")
    func mockProvider() async throws {
        if ProcessInfo.processInfo.environment["TODO_REQUIRE_OIDC_MOCK"] == "1" { #expect(UpstreamProviderTests.mock != nil) }
        guard let mock = UpstreamProviderTests.mock else { return }
        try await IdentityHarness.run(.sqlite) { h, driver in
            let client = try await Self.mockClient(h, mock: mock, user: "pia", name: "Pia Policy")
            let subject = client.subject
            try await Self.upload(h, metadata: "\(mock)/.well-known/openid-configuration", clientID: client.id, secret: client.secret)
            var oids: [String] = []
            for _ in 0..<2 { oids.append(try #require(try await Self.mockSignIn(h, driver, mock: mock, subject: subject)["sub"] as? String)) }
            #expect(oids[0] == oids[1])
            let account = try #require(
                try await h.server.users.user(tenantID: h.tenant.id, provider: .upstream(issuer: mock.lowercased()), signInName: subject))
            #expect(account.objectID == oids[0] && account.passwordHash == nil)
        }
    }

    @Test("a ClaimsProviderSelection step is a page of buttons only: one per target, the provider's and the local sign-up's, each leading to its exchange")
    func selectionPage() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.upload(h, facebook: true, selectionPage: true)
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
            let page = try await driver.start(attempt, harness: h)
            #expect(page.text.contains(#"id="LoopbackExchange""#) && page.text.contains(#"id="SignUpExchange""#), "\(page.status) \(page.text.prefix(400))")
            #expect(!page.text.contains(#"id="signInName""#) && !page.text.contains(#"id="password""#))
            let refused = try await driver.submit(page, [("action", "provider"), ("exchange", "SomeOtherExchange")])
            #expect(refused.status == .badRequest)
            let signUp = try await driver.submit(page, [("action", "provider"), ("exchange", "SignUpExchange")])
            #expect(signUp.text.contains("email_ver_but_send"), "\(signUp.status) \(signUp.text.prefix(300))")
            driver.cookies = [:]
            let again = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi"), harness: h)
            let dialog = try await driver.submit(again, [("action", "provider"), ("exchange", "LoopbackExchange")])
            #expect(dialog.text.contains("fbContinue"))
        }
    }

    @Test("only an alternativeSecurityId naming the verified user id is proven: not one already in the bag for someone else, not a local account, not Facebook from another provider")
    func provenBinding() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            try await Self.upload(h)
            let policy = try #require(try await h.server.service.customPolicies.program(tenantID: h.tenant.id, id: "B2C_1A_test_susi"))
            func key(_ issuer: String, _ subject: String) -> String {
                #"{"issuer":"\#(issuer)","issuerUserId":"\#(Data(subject.utf8).base64EncodedString())"}"#
            }
            let identity = FederatedIdentity(
                provider: IdentityProviderKind(rawValue: "https://idp.example")!, subject: "s1", email: nil, displayName: "Someone",
                claims: ["sub": "s1", "iss": "https://idp.example"])
            let profile = try #require(policy.profile("Loopback-OIDC"))
            func proven(_ text: String, by answer: FederatedIdentity = identity) -> [String] {
                PolicyFederation.proven(PolicyClaims(["alternativeSecurityId": .string(text)]), by: answer, policy: policy, profile: profile)
            }
            let own = key("https://idp.example", "s1")
            #expect(proven(own) == [own])
            #expect(proven(key("https://idp.example", "victim")).isEmpty)
            #expect(proven(key("local", "s1")).isEmpty)
            #expect(proven(key("facebook.com", "s1")).isEmpty)
            // Another provider's users: the answer's subject under an issuer that is not its own.
            #expect(proven(key("https://other-idp.example", "s1")).isEmpty)
            // An answer counts only for the profile whose request it answers.
            var answer = FederatedIdentity(
                provider: IdentityProviderKind(rawValue: "http://127.0.0.1:1")!, subject: "s1", email: nil, displayName: "Someone")
            #expect(!PolicyFederation.answers(answer, profile), "no request recorded")
            answer.via = "Another-Profile"
            #expect(!PolicyFederation.answers(answer, profile), "another profile's request")
            answer.via = "loopback-oidc"
            #expect(PolicyFederation.answers(answer, profile))
        }
    }

    @Test("a domain_hint naming a claims provider's Domain goes straight to its provider, on the combined page and the selection page; another hint shows the page")
    func domainHint() async throws {
        for selection in [false, true] {
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, facebook: true, selectionPage: selection)
                var attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
                attempt.extra = [("domain_hint", "Facebook.com")]
                let straight = try await driver.start(attempt, harness: h)
                #expect(straight.text.contains("fbContinue"), "\(selection): \(straight.status) \(straight.text.prefix(300))")
                driver.cookies = [:]
                attempt.extra = [("domain_hint", "elsewhere.example")]
                let page = try await driver.start(attempt, harness: h)
                #expect(page.text.contains(#"id="LoopbackExchange""#) && !page.text.contains("fbContinue"))
            }
        }
    }

    @Test("a Facebook profile takes only the simulated Facebook's answer, never an OpenID Connect provider's")
    func facebookAnswersOnly() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            try await Self.upload(h, facebook: true)
            let policy = try #require(try await h.server.service.customPolicies.program(tenantID: h.tenant.id, id: "B2C_1A_test_susi"))
            let profile = try #require(policy.profile("Loopback-OIDC"))
            var answer = FederatedIdentity(provider: .facebook, subject: "1", email: nil, displayName: "Fay")
            #expect(PolicyFederation.answers(answer, profile))
            answer.via = "loopback-oidc"
            #expect(!PolicyFederation.answers(answer, profile), "an upstream provider's answer, whatever it calls itself")
            #expect(policy.hasFacebookProfile)
        }
    }
}
