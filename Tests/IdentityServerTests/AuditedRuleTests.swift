import Crypto
import Foundation
import HummingbirdTesting
import SQLKit
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// Rules of the protocol and the hosted pages that an audit of the tests found unasserted
/// (issue 14): each test here fails when its rule is taken out of the source.
@Suite("Protocol rules, each with its own test")
struct AuditedRuleTests {
    /// Signs alice in through the hosted page; the attempt and its code.
    static func code(_ h: IdentityHarness, _ driver: Driver, attempt: AuthorizationAttempt? = nil) async throws
        -> (AuthorizationAttempt, String)
    {
        let attempt = attempt ?? AuthorizationAttempt(harness: h)
        let back = try await driver.signIn(h, attempt: attempt, email: "alice@example.com")
        return (attempt, try #require(back.redirectParameters["code"], "\(back.status) \(back.text.prefix(300))"))
    }

    @Test("a password reset cannot set the password before the emailed code was verified", arguments: TestDatabase.engines)
    func resetChangeBeforeVerify(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let emailStep = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            let codeStep = try await driver.submit(emailStep, [("step", "send"), ("email", "alice@example.com")])
            #expect(codeStep.text.contains("email_ver_input") || codeStep.text.contains("Verification code has been sent"))
            // Skipping "verify": straight to "change" with the page's own CSRF token.
            let skipped = try await driver.submit(
                codeStep, [("step", "change"), ("newPassword", "Hijack3d-pass"), ("reenterPassword", "Hijack3d-pass")])
            #expect(skipped.redirectParameters["code"] == nil, "the reset finished without the code")
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Hijack3d-pass").status != .ok)
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)
        }
    }

    @Test(
        "a finished sign-in transaction posted again gets no second code: its own browser is sent the same answer again",
        arguments: TestDatabase.engines)
    func finishedTransaction(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let attempt = AuthorizationAttempt(harness: h)
            let page = try await driver.start(attempt, harness: h)
            let first = try await driver.submit(page, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(first.redirectParameters["code"] != nil)
            let again = try await driver.submit(page, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(again.redirectParameters["code"] == first.redirectParameters["code"], "a second code from a finished transaction")
            #expect(try await h.database.rows("SELECT code_hash FROM authorization_codes", []).count == 1)
        }
    }

    @Test("redeeming a code needs the redirect_uri it was issued for (RFC 6749 §4.1.3)", arguments: TestDatabase.engines)
    func redemptionRedirectURI(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let (attempt, code) = try await Self.code(h, driver)
            var other = attempt
            other.redirectURI = "http://127.0.0.1:8401"
            let refused = try await driver.redeem(h, attempt: other, code: code)
            #expect(b2cCode(refused) == "AADB2C90006" && refused.json["access_token"] == nil)
            let missing = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [
                    ("grant_type", "authorization_code"), ("client_id", h.clientID), ("code", code),
                    ("code_verifier", attempt.pkce.verifier),
                ])
            #expect(missing.status == .badRequest && missing.json["access_token"] == nil)
        }
    }

    @Test("a code expires after its lifetime, and sweep() removes expired codes and transactions", arguments: TestDatabase.engines)
    func codeExpiryAndSweep(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let (attempt, code) = try await Self.code(h, driver)
            // A transaction left open (another browser: this one's SSO would finish it at once).
            _ = try await Driver(client: driver.client).start(AuthorizationAttempt(harness: h), harness: h)
            let count = { (table: String) async throws -> Int in
                try await h.database.read { sql in
                    try await sql.raw("SELECT COUNT(*) AS n FROM \(unsafeRaw: table)").first(decodingColumn: "n", as: Int.self) ?? -1
                }
            }
            #expect(try await count("authorization_codes") == 1)
            #expect(try await count("authorization_requests") >= 2)
            h.clock.advance(by: h.server.configuration.codeLifetime + 1)
            let late = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(b2cCode(late) == "AADB2C90080" && late.json["access_token"] == nil)
            try await h.server.sweep()
            #expect(try await count("authorization_codes") == 0)
            // Transactions outlive codes: still there, until their own lifetime has passed.
            #expect(try await count("authorization_requests") >= 1)
            h.clock.advance(by: h.server.configuration.interactionLifetime + 1)
            try await h.server.sweep()
            #expect(try await count("authorization_requests") == 0)
        }
    }

    @Test("ten parallel redemptions of one code: exactly one gets tokens", arguments: TestDatabase.engines)
    func parallelRedemption(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let (attempt, code) = try await Self.code(h, driver)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await Driver(client: driver.client).redeem(h, attempt: attempt, code: code).status.code }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 400 }.count == 9, "\(statuses)")
        }
    }

    @Test("a page's CSRF token and cookie from one browser do not work on another browser's transaction")
    func csrfBoundToTransaction() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser()
            let victim = Driver(client: driver.client)
            let victimPage = try await victim.start(AuthorizationAttempt(harness: h), harness: h)
            let attacker = Driver(client: driver.client)
            let attackerPage = try await attacker.start(AuthorizationAttempt(harness: h), harness: h)
            let action = try #require(victimPage.formAction)
            #expect(action != attackerPage.formAction)
            // The attacker's own valid cookie and token, posted to the victim's transaction.
            let forged = try await attacker.follow(
                try await attacker.post(
                    action,
                    [("csrf_token", attackerPage.field("csrf_token") ?? ""), ("email", "alice@example.com"), ("password", "Passw0rd!")]))
            #expect(forged.redirectParameters["code"] == nil)
            #expect(forged.status.code >= 400)
            // The victim's transaction still works for the victim.
            let own = try await victim.submit(victimPage, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(own.redirectParameters["code"] != nil)
        }
    }

    @Test("SSO ends with its session's lifetime, and a transaction page with its own", arguments: TestDatabase.engines)
    func lifetimes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            _ = try await Self.code(h, driver)
            var silent = AuthorizationAttempt(harness: h)
            silent.extra = [("prompt", "none")]
            #expect(try await driver.start(silent, harness: h).redirectParameters["code"] != nil, "SSO within the session")
            h.clock.advance(by: h.server.configuration.sessionLifetime + 1)
            var late = AuthorizationAttempt(harness: h)
            late.extra = [("prompt", "none")]
            let ended = try await driver.start(late, harness: h)
            #expect(ended.redirectParameters["code"] == nil && b2cCode(redirect: ended) == "AADB2C90077")

            let page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            h.clock.advance(by: h.server.configuration.interactionLifetime + 1)
            let stale = try await driver.submit(page, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(stale.redirectParameters["code"] == nil && stale.status.code >= 400)
        }
    }

    @Test("max_age: an older sign-in asks again, a recent one is reused; auth_time is the sign-in's time", arguments: TestDatabase.engines)
    func maxAge(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let signedInAt = h.clock.now
            let (attempt, code) = try await Self.code(h, driver)
            let first = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String))
            #expect((first.claims["auth_time"] as? Int).map { abs($0 - Int(signedInAt.timeIntervalSince1970)) <= 1 } == true)
            h.clock.advance(by: 120)
            var recent = AuthorizationAttempt(harness: h)
            recent.extra = [("max_age", "600")]
            let reused = try await driver.start(recent, harness: h)
            let reusedCode = try #require(reused.redirectParameters["code"], "a sign-in 2 minutes old satisfies max_age=600")
            let second = DecodedJWT(try #require(try await driver.redeem(h, attempt: recent, code: reusedCode).json["id_token"] as? String))
            #expect(second.claims["auth_time"] as? Int == first.claims["auth_time"] as? Int, "SSO keeps the original auth_time")
            var strict = AuthorizationAttempt(harness: h)
            strict.extra = [("max_age", "60")]
            let asked = try await driver.start(strict, harness: h)
            #expect(asked.redirectParameters["code"] == nil && asked.text.contains("password"), "a sign-in 2 minutes old fails max_age=60")
        }
    }

    @Test("the simulated Facebook sends the browser back only to this service's own callback")
    func facebookCallbackPinned() async throws {
        try await IdentityHarness.run(.sqlite) { _, driver in
            for callback in [
                "https://attacker.example/oauth2/authresp", "http://localhost.attacker.example/oauth2/authresp",
                "http://localhost/elsewhere", "http://localhost/oauth2/authresp?next=https://attacker.example",
            ] {
                let query = Form.encode([("client_id", "facebook-app"), ("redirect_uri", callback), ("state", "s")])
                let answer = try await driver.get("/facebook.com/dialog/oauth?\(query)")
                #expect(answer.status == .badRequest, "\(callback)")
                #expect(answer.location == nil)
            }
        }
    }

    @Test("c_hash and at_hash are the left half of the SHA-256 of the code and access token, computed here (OIDC Core §3.3.2.11)")
    func halfHashes() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser()
            func leftHalf(_ value: String) -> String {
                PKCEPair.base64url(Data(Array(SHA256.hash(data: Data(value.utf8))).prefix(16)))
            }
            var app = h.seed.publicApp
            app.allowImplicit = true
            try await h.server.tenants.save(app, now: h.clock.now)
            var attempt = AuthorizationAttempt(harness: h)
            attempt.responseType = "code id_token"
            let hybrid = try await driver.signIn(h, attempt: attempt, email: "alice@example.com")
            let code = try #require(hybrid.redirectParameters["code"])
            let claims = DecodedJWT(try #require(hybrid.redirectParameters["id_token"])).claims
            #expect(claims["c_hash"] as? String == leftHalf(code))
            // at_hash: the implicit "id_token token" response carries both (SSO answers at once).
            var implicit = AuthorizationAttempt(harness: h, scope: "openid \(h.clientID)")
            implicit.responseType = "id_token token"
            let fragment = try await driver.start(implicit, harness: h).redirectParameters
            let accessToken = try #require(fragment["access_token"], "\(fragment)")
            let idToken = try #require(fragment["id_token"])
            #expect(DecodedJWT(idToken).claims["at_hash"] as? String == leftHalf(accessToken))
        }
    }
}
