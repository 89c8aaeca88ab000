import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// The ways around a second factor a red team tried (SPEC §2.11), each shut: the consent page,
/// the profile and password pages reached before the factor, `prompt=none`, the enrolment page
/// from another browser, and a flood of mailed codes.
@Suite("Multi-factor authentication: no way around it")
struct SecondFactorBoundaryTests {
    static func withMFA(_ h: IdentityHarness, flow name: String, methods: [MFAPolicy.Method] = [.totp]) async throws {
        var flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: name))
        flow.mfa = MFAPolicy(methods: methods, enforcement: .always)
        try await h.server.tenants.save(flow)
    }

    static func transactionID(_ page: TestResponse) throws -> String {
        let action = try #require(page.formAction)
        return try #require(URLComponents(string: action)?.queryItems?.first { $0.name == "tx" }?.value)
    }

    @Test("the consent page finishes only with the session the sign-in itself produced")
    func consentNeedsItsOwnSession() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let alice = try await h.addUser("alice@example.com")
            // A session from another flow of the tenant.
            #expect(
                try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in"), email: "alice@example.com")
                    .redirectParameters["code"] != nil)
            // An Entra sign-in that has not finished, its journey forged to stand at the consent
            // step for alice (as a page before the second factor once named a pending user).
            var attempt = EntraFaceTests.attempt(h)
            attempt.extra.append(("prompt", "login"))
            let signIn = try await driver.start(attempt, harness: h)
            let tx = try Self.transactionID(signIn)
            let journey = try await h.journey(flow: "B2C_1_susi")
            let consentStep = try #require(journey.index(of: "Consent"))
            try await h.forgeJourney(tx) { state in
                state.claims.userID = alice.id
                state.move(to: consentStep, in: journey)
            }
            let consentURL = try #require(signIn.formAction).replacingOccurrences(of: "/pages/signin", with: "/pages/consent")
            let forged = try await driver.post(consentURL, [("csrf_token", signIn.field("csrf_token") ?? ""), ("decision", "accept")])
            #expect(forged.status == .forbidden)
            #expect(forged.redirectParameters["code"] == nil)
        }
    }

    @Test("with MFA on, the profile and forced-password pages wait for the factor; prompt=none gets AADB2C90077")
    func pagesWaitForTheFactor() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.withMFA(h, flow: "B2C_1_edit_profile")
            try await Self.withMFA(h, flow: "B2C_1_sign_in")
            var bob = try await h.addUser("bob@example.com", name: "Bob")
            // Profile edit: the password leads to the second factor, not to the profile page.
            let mfaPage = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_edit_profile"), email: "bob@example.com")
            #expect(mfaPage.text.contains("id=\"otpCode\""))
            let profileURL = try #require(mfaPage.formAction).replacingOccurrences(of: "/pages/mfa", with: "/pages/profile")
            #expect(try await driver.get(profileURL).status == .forbidden)
            // Even a journey forged to stand at the profile step for bob (as pages before the
            // factor once named a pending user) does not open the profile page without the factor:
            // the engine's rule, not the page's.
            let profileJourney = try await h.journey(flow: "B2C_1_edit_profile")
            let profileStep = try #require(profileJourney.index(of: "SelfAsserted-ProfileUpdate"))
            try await h.forgeJourney(try Self.transactionID(mfaPage)) { state in state.move(to: profileStep, in: profileJourney) }
            #expect(try await driver.get(profileURL).status == .forbidden)
            let saved = try await driver.post(
                profileURL, [("csrf_token", mfaPage.field("csrf_token") ?? ""), ("displayName", "Mallory")])
            #expect(saved.status == .forbidden)
            #expect(try await h.server.users.user(id: bob.id)?.displayName == "Bob")

            // A temporary password: the second factor comes before the new password.
            try await h.server.users.setPassword(
                id: bob.id, hash: try await h.server.hasher.hash("Temp-Pass1"), emailProven: false, forceChange: true, now: Date())
            bob = try #require(try await h.server.users.user(id: bob.id))
            driver.cookies = [:]
            let asked = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in"), email: "bob@example.com", password: "Temp-Pass1")
            #expect(asked.text.contains("id=\"otpCode\""))
            let changeURL = try #require(asked.formAction).replacingOccurrences(of: "/pages/mfa", with: "/pages/changepassword")
            #expect(try await driver.get(changeURL).status == .forbidden)
            let signInJourney = try await h.journey(flow: "B2C_1_sign_in")
            let changeStep = try #require(signInJourney.index(of: "ForcedPasswordChange"))
            try await h.forgeJourney(try Self.transactionID(asked)) { state in state.move(to: changeStep, in: signInJourney) }
            #expect(try await driver.get(changeURL).status == .forbidden)

            // prompt=none with a session that has no second factor behind it: no page, an error.
            driver.cookies = [:]
            _ = try await h.addUser("carol@example.com")
            #expect(
                try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_susi"), email: "carol@example.com")
                    .redirectParameters["code"] != nil)
            var silent = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in")
            silent.extra = [("prompt", "none")]
            let refused = try await driver.start(silent, harness: h)
            #expect(b2cCode(redirect: refused) == "AADB2C90077", "\(refused.status) \(refused.location ?? "")")
        }
    }

    @Test("the enrolment secret is shown only to the browser that signed in; reset-mfa makes the account enrol again")
    func enrolmentPageAndReset() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let dora = try await h.addUser("dora@example.com")
            let page = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_susi_mfa"), email: "dora@example.com")
            let pageURL = try #require(page.formAction)
            let stranger = Driver(client: driver.client)
            let seen = try await stranger.get(pageURL)
            #expect(seen.status == .forbidden && !seen.text.contains("otpauth://"))

            let secret = try SecondFactorTests.secret(from: page)
            let done = try await driver.submit(page, [("step", "verify"), ("code", SecondFactorTests.code(secret, at: h.clock.now))])
            #expect(done.redirectParameters["code"] != nil)
            #expect(try await h.server.administration.resetSecondFactor(userID: dora.id))
            driver.cookies = [:]
            let again = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_susi_mfa"), email: "dora@example.com")
            #expect(again.text.contains("Set up your authenticator app"))
            #expect(try SecondFactorTests.secret(from: again) != secret)
        }
    }

    @Test("mailed codes: one per 30 seconds and five per sign-in")
    func sendLimits() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.withMFA(h, flow: "B2C_1_sign_in", methods: [.email])
            _ = try await h.addUser("eve@example.com")
            var page = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in"), email: "eve@example.com")
            page = try await driver.submit(page, [("step", "send")])
            #expect(page.status == .ok)
            let sent = try await h.server.outbox(tenantID: h.tenant.id).count
            let tooSoon = try await driver.submit(page, [("step", "send")])
            #expect(tooSoon.status == .tooManyRequests)
            #expect(try await h.server.outbox(tenantID: h.tenant.id).count == sent)
            for _ in 0..<4 {
                h.clock.advance(by: 31)
                page = try await driver.submit(page, [("step", "send")])
                #expect(page.status == .ok)
            }
            h.clock.advance(by: 31)
            #expect(try await driver.submit(page, [("step", "send")]).status == .tooManyRequests)
            #expect(try await h.server.outbox(tenantID: h.tenant.id).count == sent + 4)
        }
    }
}
