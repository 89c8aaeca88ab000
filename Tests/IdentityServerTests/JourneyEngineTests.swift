import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import Synchronization
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// The journey engine's own rules, with journeys a test changes: a new step is one more entry
/// in a journey; a step that acts for the account waits for the second factor whatever the
/// journey says; every step leaves a trace without the values it saw.
@Suite("The journey engine")
struct JourneyEngineTests {
    /// A step that acts for the account and remembers whom it ran for (say, "accept the terms").
    struct RecordingStep: OrchestrationStep {
        let seen: Recorder
        let id = "RecordTheAccount"
        var actsForUser: Bool { true }

        func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
            if let user = run.user { seen.ids.withLock { $0.append(user.id) } }
            return .next
        }
    }

    final class Recorder: Sendable {
        let ids = Mutex<[UUID]>([])
    }

    /// The catalog's journeys with `step` before the tokens, and without the second factor when
    /// `dropSecondFactor` (a journey built wrong).
    struct Adapted: JourneyProvider {
        let catalog: JourneyCatalog
        let step: RecordingStep
        let dropSecondFactor: Bool

        var passwordGrant: Journey { Journey(name: "Adapted", steps: catalog.passwordGrant.steps + [step]) }

        func journey(for flow: UserFlow) -> Journey {
            var steps = catalog.journey(for: flow).steps
            if dropSecondFactor { steps.removeAll { $0.id == catalog.secondFactor.id } }
            if let last = steps.indices.last { steps.insert(step, at: last) }
            return Journey(name: "Adapted", steps: steps)
        }
    }

    @Test(
        "a new step is one more entry in a journey: it runs once, in order, for the signed-in account; the trace names every step and no value",
        arguments: TestDatabase.engines)
    func addedStep(engine: DatabaseEngine) async throws {
        let recorder = Recorder()
        try await IdentityHarness.run(
            engine, journeys: { Adapted(catalog: $0, step: RecordingStep(seen: recorder), dropSecondFactor: false) }
        ) { h, driver in
            let alice = try await h.addUser()
            let done = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "alice@example.com")
            #expect(done.redirectParameters["code"] != nil)
            #expect(recorder.ids.withLock { $0 } == [alice.id])

            let stored = try await h.database.read { sql in
                try await sql.raw("SELECT journey FROM authorization_requests").all(decodingColumn: "journey", as: String.self)
            }
            let text = try #require(stored.first)
            let state = try JSONDecoder().decode(JourneyState.self, from: Data(text.utf8))
            let ran = state.trace.filter { $0.result != .skipped }.map { "\($0.step):\($0.result.rawValue)" }
            #expect(
                ran == [
                    "DevelopmentFault:completed", "SingleSignOn:completed", "CombinedSignInAndSignUp:interacting",
                    "CombinedSignInAndSignUp:completed",
                    "RecordTheAccount:completed", "JwtIssuer:finished",
                ], "\(ran)")
            #expect(state.trace.contains { $0.step == "CombinedSignInAndSignUp" && $0.claims.contains("objectId") })
            #expect(state.trace.contains { $0.step == "MultiFactorAuthentication" && $0.result == .skipped })
            #expect(state.correlationID != nil)
            // Names of claims, never their values: no address, password or code is kept.
            #expect(!text.contains("alice@example.com") && !text.contains("Passw0rd!"))
        }
    }

    @Test(
        "a step that acts for the account is not entered before the second factor, even in a journey built without it",
        arguments: TestDatabase.engines)
    func secondFactorIsTheEnginesRule(engine: DatabaseEngine) async throws {
        let recorder = Recorder()
        try await IdentityHarness.run(
            engine, journeys: { Adapted(catalog: $0, step: RecordingStep(seen: recorder), dropSecondFactor: true) }
        ) { h, driver in
            _ = try await h.addUser()
            let refused = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_susi_mfa"), email: "alice@example.com")
            #expect(refused.status == .forbidden)
            #expect(refused.redirectParameters["code"] == nil)
            #expect(recorder.ids.withLock { $0 }.isEmpty)
            // Without MFA in the flow, the same journey runs through.
            let done = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "alice@example.com")
            #expect(done.redirectParameters["code"] != nil)
            #expect(recorder.ids.withLock { $0 }.count == 1)
        }
    }

    @Test(
        "two requests racing on one journey cannot both move it: the second is told the sign-in moved on", arguments: TestDatabase.engines)
    func racingSaves(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let page = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            let tx = try SecondFactorBoundaryTests.transactionID(page)
            let record = try #require(try await h.server.service.interactions.interaction(id: tx))
            var moved = record.journey
            moved.claims.pendingEmail = "first@example.com"
            #expect(try await h.server.service.interactions.saveJourney(id: tx, state: moved, revision: record.journeyRevision))
            moved.claims.pendingEmail = "second@example.com"
            #expect(!(try await h.server.service.interactions.saveJourney(id: tx, state: moved, revision: record.journeyRevision)))
            let kept = try #require(try await h.server.service.interactions.interaction(id: tx))
            #expect(kept.journey.claims.pendingEmail == "first@example.com")
        }
    }

    @Test("the development surface's faults are a journey step only where the surface is on", arguments: [true, false])
    func faultStepOnlyInDevelopment(development: Bool) async throws {
        try await IdentityHarness.run(
            .sqlite, configuration: .init(passwordHashCost: 4, developmentMailbox: development, simulatedFacebook: true)
        ) { h, _ in
            let flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_susi"))
            let steps = h.server.service.journeyEngine().catalog.journey(for: flow).steps.map(\.id)
            #expect(steps.contains("DevelopmentFault") == development, "\(steps)")
        }
    }

    @Test(
        "the browser's back button: after \"Sign up now\" or a provider's button, the first page's forms work again",
        arguments: TestDatabase.engines)
    func backToTheFirstPage(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let first = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            // "Sign up now", then back: the cached sign-in form is posted.
            let signUp = try await driver.follow(try await driver.get(try #require(first.link(id: "createAccount"))))
            #expect(signUp.text.contains("email_ver_but_send"))
            let done = try await driver.submit(first, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(done.redirectParameters["code"] != nil, "\(done.status)")

            // Facebook's button, then back before answering there: the password still signs in.
            driver.cookies = [:]
            let again = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            let facebookURL = try #require(again.link(id: "FacebookExchange"))
            let toFacebook = try await driver.get(facebookURL)
            #expect(toFacebook.location?.contains("/facebook.com/dialog/oauth") == true, "\(toFacebook.status)")
            let viaPassword = try await driver.submit(again, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(viaPassword.redirectParameters["code"] != nil, "\(viaPassword.status)")
        }
    }

    @Test("consent continues only a session that still exists: one revoked meanwhile gets nothing", arguments: TestDatabase.engines)
    func consentNeedsALiveSession(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            let consent = try await driver.signIn(h, attempt: EntraFaceTests.attempt(h), email: "alice@example.com")
            #expect(consent.text.contains("consentForm"))
            // The victim resets their password (or an admin revokes the sessions) while this
            // browser sits on the consent page.
            try await h.server.administration.revokeSessions(alice)
            let refused = try await driver.submit(consent, [("decision", "accept")])
            #expect(refused.status == .forbidden && refused.redirectParameters["code"] == nil)
            #expect(try await h.server.service.consents.granted(userID: alice.id, clientID: h.clientID).isEmpty)
        }
    }

    @Test(
        "a journey answers once: cancelling after it finished sends no error, only the answer it gave", arguments: TestDatabase.engines)
    func cancelAfterFinish(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            let cancelAction = try #require(
                page.text.range(of: "<form method=\"post\" action=\"", options: .backwards).map {
                    Form.unescapeHTML(String(page.text[$0.upperBound...].prefix { $0 != "\"" }))
                })
            let done = try await driver.submit(page, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(done.redirectParameters["code"] != nil)
            let late = try await driver.post(cancelAction, [("csrf_token", page.field("csrf_token") ?? "")])
            #expect(late.redirectParameters["error"] == nil && late.redirectParameters["code"] == done.redirectParameters["code"])
        }
    }

    @Test(
        "prompt=none with a provider's domain_hint fails with AADB2C90077 before anything is sent to the provider",
        arguments: TestDatabase.engines)
    func silentWithHint(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var silent = AuthorizationAttempt(harness: h)
            silent.extra = [("prompt", "none"), ("domain_hint", "facebook.com")]
            let answer = try await driver.start(silent, harness: h)
            #expect(b2cCode(redirect: answer) == "AADB2C90077")
        }
    }

    @Test(
        "the password grant runs a journey too: its steps, the engine's rules, and what it cannot ask refused in the protocol's form",
        arguments: TestDatabase.engines)
    func passwordGrantJourney(engine: DatabaseEngine) async throws {
        let recorder = Recorder()
        try await IdentityHarness.run(
            engine, journeys: { Adapted(catalog: $0, step: RecordingStep(seen: recorder), dropSecondFactor: false) }
        ) { h, driver in
            let alice = try await h.addUser()
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)
            #expect(recorder.ids.withLock { $0 } == [alice.id])
            // A wrong password ends the journey before any step acts for the account.
            #expect(b2cCode(try await driver.ropc(h, username: "alice@example.com", password: "wrong")) == "AADB2C90225")
            #expect(recorder.ids.withLock { $0 }.count == 1)
        }
    }

    @Test("a profile edit that continues an SSO session saves nothing once that session has ended", arguments: TestDatabase.engines)
    func profileNeedsALiveSession(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            #expect(
                try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "alice@example.com").redirectParameters["code"]
                    != nil)
            // Single sign-on straight to the profile page.
            let profile = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_edit_profile"), harness: h)
            #expect(profile.text.contains("value=\"Alice\""), "\(profile.status)")
            try await h.server.administration.revokeSessions(alice)
            let refused = try await driver.submit(profile, [("displayName", "Mallory")])
            #expect(refused.status == .forbidden && refused.redirectParameters["code"] == nil)
            #expect(try await h.server.users.user(id: alice.id)?.displayName == "Alice")
        }
    }

    @Test(
        "once an account has signed in, the first page's form no longer answers: the journey is not taken back",
        arguments: TestDatabase.engines)
    func noReturnAfterSignIn(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            _ = try await h.addUser("bob@example.com", name: "Bob")
            let first = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_susi_mfa"), harness: h)
            let mfa = try await driver.submit(first, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(mfa.text.contains("id=\"otpCode\""))
            let again = try await driver.submit(first, [("email", "bob@example.com"), ("password", "Passw0rd!")])
            #expect(again.status == .forbidden && again.redirectParameters["code"] == nil)
        }
    }
}
