import Foundation
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys
import Storage
import TestSupport
import Testing

/// The security issue's M-7: tokens assert only an email address that was proven. Sign-up
/// proves it with a code, as B2C's default user flows do (SPEC §2.11).
@Suite("Email verification at sign-up; only proven addresses in tokens")
struct EmailVerificationTests {
    static func claims(_ h: IdentityHarness, _ driver: Driver, _ attempt: AuthorizationAttempt, _ redirect: TestResponse) async throws
        -> [String: Any]
    {
        let code = try #require(redirect.redirectParameters["code"])
        let idToken = try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)
        return DecodedJWT(idToken).claims
    }

    @Test("a sign-up proves the address with a code from the outbox; the token then asserts it", arguments: TestDatabase.engines)
    func provenSignUp(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let attempt = AuthorizationAttempt(harness: h)
            let redirect = try await driver.signUp(h, attempt: attempt, email: "Proven@Example.com", name: "Pro")
            let claims = try await Self.claims(h, driver, attempt, redirect)
            #expect(claims["emails"] as? [String] == ["Proven@Example.com"])
            let message = try #require(try await h.server.outbox(tenantID: h.tenant.id).first)
            #expect(message.recipient == "Proven@Example.com")
            let account = try #require(try await h.server.users.users(tenantID: h.tenant.id).first)
            #expect(account.emailVerified)
        }
    }

    @Test("a code proves only the address it went to, and a wrong code proves nothing", arguments: TestDatabase.engines)
    func codeBoundToAddress(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            page = try await driver.follow(try await driver.get(try #require(page.link(id: "createAccount"))))
            #expect(page.text.contains("id=\"email_ver_but_send\""))
            let mine = try await driver.submit(page, [("step", "send"), ("email", "mine@example.com")])
            let myCode = try await h.latestCode()
            // The attacker switches the pending address to the victim's, then offers their own code.
            let theirs = try await driver.submit(mine, [("step", "send"), ("email", "victim@example.com")])
            #expect(theirs.text.contains("victim@example.com") && theirs.text.contains("id=\"email_ver_input\""))
            let refused = try await driver.submit(theirs, [("step", "verify"), ("code", myCode)])
            #expect(refused.status == .badRequest && refused.text.contains("does not match our records"))
            let wrong = try await driver.submit(theirs, [("step", "verify"), ("code", "000000")])
            #expect(wrong.status == .badRequest)
            let create = try await driver.submit(
                theirs,
                [
                    ("step", "create"), ("email", "victim@example.com"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"),
                    ("displayName", "Mallory"),
                ])
            #expect(create.status == .badRequest && create.text.contains("Verify your email address first"))
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("sending a code says the same whether or not the address has an account", arguments: TestDatabase.engines)
    func noEnumerationAtSend(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("taken@example.com")
            func codeStep(_ email: String) async throws -> TestResponse {
                var page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
                page = try await driver.follow(try await driver.get(try #require(page.link(id: "createAccount"))))
                return try await driver.submit(page, [("step", "send"), ("email", email)])
            }
            func normalised(_ page: TestResponse, _ email: String) -> String {
                page.text.replacingOccurrences(of: email, with: "EMAIL")
                    .replacingOccurrences(of: #"tx=[^"&]+"#, with: "tx=X", options: .regularExpression)
                    .replacingOccurrences(of: #"value="[A-Za-z0-9_-]{30,}""#, with: "value=\"X\"", options: .regularExpression)
                    .replacingOccurrences(of: #"nonce-[A-Za-z0-9+/=_-]+"#, with: "nonce-X", options: .regularExpression)
            }
            let taken = try await codeStep("taken@example.com")
            let free = try await codeStep("free@example.com")
            #expect(taken.status == free.status)
            #expect(normalised(taken, "taken@example.com") == normalised(free, "free@example.com"))
            #expect(try await h.server.outbox(tenantID: h.tenant.id).map(\.recipient) == ["free@example.com", "taken@example.com"])
        }
    }

    @Test(
        "sending a code takes the same minimum time for a known and an unknown address (reset and sign-up)",
        arguments: TestDatabase.engines)
    func sendTakesAFloor(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("known@example.com")
            for (policy, email) in [
                ("B2C_1_reset", "known@example.com"), ("B2C_1_reset", "unknown@example.com"), ("B2C_1_sign_up", "new@example.com"),
            ] {
                let page = try await driver.start(AuthorizationAttempt(harness: h, policy: policy), harness: h)
                let started = ContinuousClock.now
                let response = try await driver.submit(page, [("step", "send"), ("email", email)])
                let elapsed = ContinuousClock.now - started
                #expect(response.status == .ok)
                #expect(elapsed >= .milliseconds(40), "\(policy) \(email): \(elapsed)")
            }
        }
    }

    @Test(
        "a flow without verification stores the address unproven, and tokens leave it out until a reset proves it",
        arguments: TestDatabase.engines)
    func unverifiedIsNotAsserted(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_sign_up"))
            flow.emailVerification = false
            try await h.server.tenants.save(flow)

            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_up")
            let page = try await driver.start(attempt, harness: h)
            #expect(!page.text.contains("email_ver_but_send"))
            let redirect = try await driver.submit(
                page,
                [
                    ("email", "loose@example.com"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"),
                    ("displayName", "Loose"),
                ])
            let claims = try await Self.claims(h, driver, attempt, redirect)
            #expect(claims["emails"] == nil)
            #expect(claims["name"] as? String == "Loose")
            #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)

            // A reset sends a code to the address; using it proves the address.
            let reset = AuthorizationAttempt(harness: h, policy: "B2C_1_reset")
            var step = try await driver.start(reset, harness: h)
            step = try await driver.submit(step, [("step", "send"), ("email", "loose@example.com")])
            step = try await driver.submit(step, [("step", "verify"), ("code", try await h.latestCode())])
            let done = try await driver.submit(
                step, [("step", "change"), ("newPassword", "N3w-Passw0rd"), ("reenterPassword", "N3w-Passw0rd")])
            #expect(try await Self.claims(h, driver, reset, done)["emails"] as? [String] == ["loose@example.com"])
        }
    }
}
