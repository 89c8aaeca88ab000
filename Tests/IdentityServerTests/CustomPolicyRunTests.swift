import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@testable import IdentityServer

/// A custom policy run by the journey engine (SPEC §2.12): sign in through the combined page,
/// sign up with a verified email through a self-asserted page, tokens with the relying party's
/// claims, on the policy's own URL.
@Suite("Custom policies: running a sign-up-or-sign-in policy")
struct CustomPolicyRunTests {
    static let policy = "B2C_1A_test_susi"

    static func upload(_ h: IdentityHarness) async throws {
        try await h.server.administration.uploadCustomPolicies(try PolicyFixtures.localAccounts(), tenant: h.tenant)
    }

    @Test("discovery answers on the policy's URL; a base policy is not a relying party", arguments: TestDatabase.engines)
    func discovery(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            let document = try await driver.get(h.path(Self.policy, "v2.0/.well-known/openid-configuration"))
            #expect(document.status == .ok, "\(document.text)")
            #expect((document.json["authorization_endpoint"] as? String)?.contains(Self.policy) == true)
            try await h.server.administration.uploadCustomPolicies([Data(PolicyFixtures.base().utf8)], tenant: h.tenant)
            let base = try await driver.get(h.path("B2C_1A_TestBase", "v2.0/.well-known/openid-configuration"))
            #expect(base.status == .notFound)
        }
    }

    @Test("sign in through the combined page: the password checked in-process, the token has the relying party's claims", arguments: TestDatabase.engines)
    func signIn(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            let user = try await h.addUser("carol@example.com", name: "Carol")
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            let page = try await driver.start(attempt, harness: h)
            #expect(page.status == .ok && page.text.contains("id=\"signInName\""), "\(page.text)")
            let wrong = try await driver.submit(page, [("signInName", "carol@example.com"), ("password", "wrong-Passw0rd")])
            #expect(wrong.status == .badRequest && wrong.text.contains("Your password is incorrect."))
            let done = try await driver.submit(wrong, [("signInName", "carol@example.com"), ("password", "Passw0rd!")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text)")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(tokens.status == .ok, "\(tokens.text)")
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["sub"] as? String == user.objectID)
            #expect(claims["name"] as? String == "Carol")
            #expect(claims["greeting"] as? String == "Hello Carol", "the read profile's output transformation ran")
            #expect(claims["tid"] as? String == h.tenant.guid, "{Policy:TenantObjectId}")
            #expect(claims["tfp"] as? String == Self.policy)
            #expect(claims["email"] as? String == "carol@example.com")
            #expect(claims["newUser"] == nil, "no new user on a sign-in")
            #expect(tokens.json["expires_in"] as? Int == 1800, "the issuer's token_lifetime_secs")
            // The journey's trace names each orchestration step and the policy claims it changed (never their values).
            let journeys = try await h.database.rows("SELECT journey FROM authorization_requests WHERE journey IS NOT NULL", [])
            let stored = try journeys.map { try $0.text("journey") }
            let traces = try stored.map { text in
                let state = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                return String(decoding: try JSONSerialization.data(withJSONObject: state?["trace"] ?? []), as: UTF8.self)
            }.joined()
            #expect(traces.contains("SignUpOrSignIn#3") && traces.contains("greeting"), "\(traces)")
            #expect(!traces.contains("Hello Carol"), "names, never values, in the trace")
            #expect(!stored.joined().contains("wrong-Passw0rd") && !stored.joined().contains("Passw0rd!"), "no typed password is stored with the journey")
        }
    }

    @Test("sign up: the email proven with a code, the account written, newUser in the token; a taken address refused", arguments: TestDatabase.engines)
    func signUp(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            var page = try await driver.start(attempt, harness: h)
            // The combined page's first form is the sign-in; "Sign up now" is its own form.
            page = try await driver.follow(try await driver.post(page.formAction ?? "", [("csrf_token", page.field("csrf_token") ?? ""), ("action", "signup")]))
            #expect(page.text.contains("email_ver_but_send"), "\(page.status) \(page.text)")
            page = try await driver.submit(page, [("action", "send"), ("email", "dave@example.com")])
            #expect(page.text.contains("email_ver_input"), "\(page.text)")
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            #expect(page.text.contains("email_success"), "\(page.text)")
            let mismatch = try await driver.submit(page, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Other-Passw0rd"), ("displayName", "Dave")])
            #expect(mismatch.status == .badRequest)
            let kept = try await h.database.rows("SELECT journey FROM authorization_requests WHERE journey IS NOT NULL", [])
            #expect(try kept.allSatisfy { try !$0.text("journey").contains("Other-Passw0rd") }, "a refused form's passwords are not stored")
            let done = try await driver.submit(mismatch, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "Dave")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text)")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["newUser"] as? Bool == true)
            #expect(claims["email"] as? String == "dave@example.com" && claims["greeting"] as? String == "Hello Dave")
            let account = try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "dave@example.com")
            #expect(account?.displayName == "Dave" && account?.emailVerified == true)
            #expect(claims["sub"] as? String == account?.objectID)

            // The same address again: the directory write refuses it on the form.
            let again = AuthorizationAttempt(harness: h, policy: Self.policy)
            var second = try await driver.start(again, harness: h)
            second = try await driver.follow(try await driver.post(second.formAction ?? "", [("csrf_token", second.field("csrf_token") ?? ""), ("action", "signup")]))
            second = try await driver.submit(second, [("action", "send"), ("email", "DAVE@example.com")])
            second = try await driver.submit(second, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            let taken = try await driver.submit(second, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "Twin")])
            #expect(taken.status == .badRequest && taken.text.contains("already exists"), "\(taken.text)")
        }
    }

    @Test("password reset: the address proven, the account found by it, the new password written; an unknown address is told so", arguments: TestDatabase.engines)
    func passwordReset(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.upload(h)
            _ = try await h.addUser("gina@example.com", name: "Gina")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_reset")
            var page = try await driver.start(attempt, harness: h)
            page = try await driver.submit(page, [("action", "send"), ("email", "nobody@example.com")])
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            let unknown = try await driver.submit(page, [("action", "continue")])
            #expect(unknown.status == .badRequest && unknown.text.contains("No account uses this email address."), "\(unknown.text)")

            let again = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_reset")
            page = try await driver.start(again, harness: h)
            page = try await driver.submit(page, [("action", "send"), ("email", "gina@example.com")])
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", "000000")])
            #expect(page.status == .badRequest, "a wrong code proves nothing")
            page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
            page = try await driver.submit(page, [("action", "continue")])
            #expect(page.text.contains("newPassword"), "\(page.text)")
            let done = try await driver.submit(page, [("action", "continue"), ("newPassword", "Reset-Passw0rd"), ("reenterPassword", "Reset-Passw0rd")])
            #expect(done.redirectParameters["code"] != nil, "\(done.status) \(done.text)")

            let signIn = AuthorizationAttempt(harness: h, policy: Self.policy)
            let form = try await driver.start(signIn, harness: h)
            let old = try await driver.submit(form, [("signInName", "gina@example.com"), ("password", "Passw0rd!")])
            #expect(old.status == .badRequest, "the old password no longer works")
            let new = try await driver.submit(old, [("signInName", "gina@example.com"), ("password", "Reset-Passw0rd")])
            #expect(new.redirectParameters["code"] != nil)
        }
    }
}
