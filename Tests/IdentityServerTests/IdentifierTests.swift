import Foundation
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
import TodoModels

@testable import IdentityServer
@testable import UserJourneys

@Suite("Identifiers: one canonical form, no controls or look-alikes")
struct IdentifierRuleTests {
    @Test("an email's canonical form: width-mapped, lower case, NFC (RFC 8265 UsernameCaseMapped)")
    func canonicalEmail() throws {
        #expect(EmailAddress.canonical("  Alice@Example.COM ") == "alice@example.com")
        #expect(EmailAddress.canonical("ａｌｉｃｅ＠ｅｘａｍｐｌｅ．ｃｏｍ") == "alice@example.com")
        #expect(EmailAddress.canonical("jose\u{301}@example.com") == "jos\u{E9}@example.com")
        #expect(EmailAddress.canonical("jos\u{E9}@example.com") == "jos\u{E9}@example.com")
        #expect(EmailAddress.canonical("иван@пример.рф") == "иван@пример.рф")
        #expect(EmailAddress.canonical("o'brien+todo@mail.example.co.uk") == "o'brien+todo@mail.example.co.uk")
        let address = try #require(EmailAddress("Bob@Example.com"))
        #expect(address.display == "Bob@Example.com", "the address keeps its case for display and mail")
    }

    @Test(
        "emails with controls, format characters, spaces, symbols or mixed scripts are refused",
        arguments: [
            "bob@example.com\u{0}", "bob@example.com\u{0}.attacker.example", "bob\u{1B}[31m@example.com", "bob@exa\u{200B}mple.com",
            "b\u{202E}ob@example.com", "bob@example.com\u{7F}", "bob@example.com\u{200B}", "bo b@example.com", "bob\u{A0}@example.com",
            "p\u{430}ypal@example.com",
            "bob@\u{3B1}lpha.example", "bob@@example.com", "bob@example", "@example.com", "bob@.example.com", "bob.@example.com",
            "<bob>@example.com", "bob@exam_ple.com", "bob@exa\nmple.com", "bob\u{E000}@example.com", "☃@example.com",
            String(repeating: "a", count: 65) + "@example.com", "ali\u{307}ce@example.com", "alic\u{301}\u{301}e@example.com",
        ])
    func refusedEmails(raw: String) {
        #expect(EmailAddress(raw) == nil, "\(TextRules.printable(raw)) should be refused")
    }

    @Test("names: every kind of space becomes one U+0020, NFC; controls and format characters refused")
    func names() throws {
        #expect(try TextRules.name("  Ada\u{3000}\u{A0} Lovelace\t", maximumLength: 256).get() == "Ada Lovelace")
        #expect(try TextRules.name("Jose\u{301}", maximumLength: 256).get() == "Jos\u{E9}")
        #expect(TextRules.name("Bob\u{0}", maximumLength: 256) == .failure(.forbiddenCharacter("\u{0}")))
        #expect(TextRules.name("\u{1B}]0;pwned\u{7}", maximumLength: 256) == .failure(.forbiddenCharacter("\u{1B}")))
        #expect(TextRules.name("Ali\u{200B}ce", maximumLength: 256) == .failure(.forbiddenCharacter("\u{200B}")))
        #expect(TextRules.name("Bob\u{2028}", maximumLength: 256) == .failure(.forbiddenCharacter("\u{2028}")))
        #expect(TextRules.name("   ", maximumLength: 256) == .failure(.empty))
        #expect(TextRules.name("abcd", maximumLength: 3) == .failure(.tooLong(maximum: 3)))
    }

    @Test("task titles: NUL, controls and bidi overrides refused; emoji sequences kept")
    func titles() {
        #expect(TaskLimits.normalizedTitle("  Buy milk ") == "Buy milk")
        #expect(TaskLimits.normalizedTitle("family 👩‍👩‍👧") == "family 👩‍👩‍👧")
        #expect(TaskLimits.normalizedTitle("milk\u{0}") == nil)
        #expect(TaskLimits.normalizedTitle("pay \u{202E}001$\u{202C}") == nil)
        #expect(TaskLimits.normalizedTitle("line\nbreak") == nil)
        #expect(TaskLimits.normalizedTitle("\u{1B}[2J") == nil)
    }

    @Test("the admin commands' account creation applies the same rules")
    func administration() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            await #expect(throws: IdentityAdministration.AdministrationError.invalidEmail("eve@example.com\u{0}")) {
                _ = try await h.addUser("eve@example.com\u{0}")
            }
            await #expect(throws: IdentityAdministration.AdministrationError.self) {
                _ = try await h.addUser("eve@example.com", name: "Eve\u{1B}[2J")
            }
            let user = try await h.addUser("Eve@Example.com", name: " Eve  Adams ")
            #expect(user.signInName == "eve@example.com")
            #expect(user.displayName == "Eve Adams")
            await #expect(throws: IdentityAdministration.AdministrationError.duplicate("ｅｖｅ@example.com")) {
                _ = try await h.addUser("ｅｖｅ@example.com")
            }
        }
    }
}

@Suite("Identifiers over HTTP: no account can shadow another")
struct IdentifierFlowTests {
    @Test("sign-up with a NUL after an existing address is refused and creates nothing", arguments: TestDatabase.engines)
    func nulSignUp(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let bob = try await h.addUser("bob@example.com", name: "Bob")
            let refused = try await driver.signUp(
                h, attempt: AuthorizationAttempt(harness: h), email: "bob@example.com\u{0}", password: "Attack3r-pass", name: "Mallory")
            #expect(refused.status == .badRequest)
            #expect(refused.text.contains("Please enter a valid email address."))
            #expect(refused.location == nil)
            let accounts = try await h.server.users.users(tenantID: h.tenant.id)
            #expect(accounts.map(\.id) == [bob.id])
        }
    }

    @Test(
        "look-alikes of an existing address (case, fullwidth, NFD) are the same account; sign-in works with any of them",
        arguments: TestDatabase.engines)
    func lookAlikes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("jos\u{E9}@example.com", name: "José")
            for variant in ["JOS\u{C9}@EXAMPLE.COM", "ｊｏｓé@example.com", "jose\u{301}@example.com"] {
                let page = try await driver.signUp(h, attempt: AuthorizationAttempt(harness: h), email: variant, password: "Other-pass1")
                #expect(page.status == .conflict, "\(variant) is the same account")
            }
            #expect(try await driver.ropc(h, username: "jose\u{301}@EXAMPLE.com", password: "Passw0rd!").status == .ok)
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
        }
    }

    @Test(
        "Latin look-alikes of an existing address (ı, ɑ, ǀ, ɡ, Cyrillic о) are refused as that account's duplicate at sign-up and in account administration (F-7)",
        arguments: TestDatabase.engines)
    func confusableSkeletons(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("alice@example.com", name: "Alice")
            _ = try await h.addUser("glory@example.com", name: "Glory")
            for variant in [
                "al\u{131}ce@example.com", "\u{251}lice@example.com", "a\u{1C0}ice@example.com", "\u{261}lory@example.com",
                // Small capitals, which Unicode's data has as prototypes of their own.
                "\u{1D00}lice@example.com", "a\u{29F}ice@example.com", "alic\u{1D07}@example.com", "\u{262}lory@example.com",
                // From Unicode's data: the Latin capital iota; a small capital in the domain.
                "al\u{196}ce@example.com", "alice@exampl\u{1D07}.com",
            ] {
                let address = try #require(EmailAddress(variant), "\(variant) is a well-formed address")
                #expect(address.canonical != "alice@example.com" && address.canonical != "glory@example.com")
                await #expect(throws: IdentityAdministration.AdministrationError.self, "\(variant)") { _ = try await h.addUser(variant) }
            }
            // Through the sign-up page, with its verified code: the page's "already exists".
            let page = try await driver.signUp(
                h, attempt: AuthorizationAttempt(harness: h), email: "al\u{131}ce@example.com", password: "Other-pass1")
            #expect(page.status == .conflict, "\(page.status)")
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 2)
            // Different letters are different accounts; ASCII is never folded (rn, m; l, 1).
            for other in ["alicia@example.com", "arnold@example.com", "amold@example.com", "l1nda@example.com", "llnda@example.com"] {
                _ = try await h.addUser(other)
            }
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 7)
        }
    }

    @Test("accounts made before skeletons get theirs at start; two that already looked alike both stay", arguments: TestDatabase.engines)
    func skeletonBackfill(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, _ in
            let first = try await h.addUser("alice@example.com")
            let second = try await h.addUser("bob@example.com")
            // As the rows were before migration 30: no skeleton, and one already a look-alike.
            try await h.database.transaction { sql in
                try await sql.raw("UPDATE users SET sign_in_skeleton = NULL").run()
                try await sql.raw(
                    "UPDATE users SET sign_in_name = \(bind: "al\u{131}ce@example.com") WHERE id = \(bind: second.objectID)"
                ).run()
            }
            // A server starting on that database (as `serve` does) gives them their skeletons.
            let restarted = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: h.database, dataKey: .generate(), logger: TestDatabase.logger)
            try await restarted.shutdown()
            let skeletons = try await h.database.rows("SELECT id, sign_in_skeleton FROM users ORDER BY sign_in_name", [])
            let filled = try skeletons.map { (try $0.text("id"), try $0.optionalText("sign_in_skeleton")) }
            #expect(filled.filter { $0.1 == "alice@example.com" }.count == 1)
            #expect(filled.contains { $0.0 == first.objectID } && filled.count == 2)
            await #expect(throws: IdentityAdministration.AdministrationError.self) { _ = try await h.addUser("\u{251}lice@example.com") }
        }
    }

    @Test("display names with controls are refused at sign-up and profile edit", arguments: TestDatabase.engines)
    func controlNames(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let refused = try await driver.signUp(
                h, attempt: AuthorizationAttempt(harness: h), email: "new@example.com", name: "New\u{1B}]0;owned\u{7}")
            #expect(refused.status == .badRequest)
            #expect(refused.text.contains("cannot be used"))
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("the simulated Facebook refuses profiles with invisible or control characters", arguments: TestDatabase.engines)
    func facebookProfile(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            for (email, name) in [("fb@example.com", "Mallory\u{202E}"), ("fb@exa\u{200B}mple.com", "Mallory")] {
                let dialog = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_facebook"), harness: h)
                let refused = try await driver.submit(
                    dialog,
                    [
                        ("email", email), ("name", name), ("state", dialog.field("state") ?? ""),
                        ("redirect_uri", dialog.field("redirect_uri") ?? ""),
                    ])
                #expect(refused.status == .badRequest)
                #expect(refused.location == nil)
            }
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("ROPC: a NUL in the username or password never matches an account", arguments: TestDatabase.engines)
    func nulCredentials(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("bob@example.com")
            let nulUser = try await driver.ropc(h, username: "bob@example.com\u{0}", password: "Passw0rd!")
            #expect(b2cCode(nulUser) == "AADB2C90225")
            // bcrypt stops at a NUL: without the check this would sign in as Passw0rd!.
            let nulPassword = try await driver.ropc(h, username: "bob@example.com", password: "Passw0rd!\u{0}anything")
            #expect(b2cCode(nulPassword) == "AADB2C90225")
            #expect(try await driver.ropc(h, username: "bob@example.com", password: "Passw0rd!").status == .ok)
        }
    }

    @Test("a NUL in a lookup key is a B2C 400, not a server error", arguments: TestDatabase.engines)
    func nulInPath(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let response = try await driver.get("/\(h.tenant.name)%00/B2C_1_susi/v2.0/.well-known/openid-configuration")
            #expect(response.status.code < 500)
            let page = try await driver.get(h.path("B2C_1_susi", "pages/signin") + "?tx=abc%00def")
            #expect(page.status.code < 500)
        }
    }
}

@Suite("Password reset is bound to the account the code went to")
struct ResetBindingTests {
    /// The reset flow up to the password step, for `typed`; the code read from the outbox.
    private func verify(_ h: IdentityHarness, _ driver: Driver, typed: String) async throws -> TestResponse {
        let emailStep = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
        let codeStep = try await driver.submit(emailStep, [("step", "send"), ("email", typed)])
        let body = try #require(try await h.server.outbox(tenantID: h.tenant.id).first?.body)
        let code = try #require(body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 6 }.map(String.init))
        return try await driver.submit(codeStep, [("step", "verify"), ("code", code)])
    }

    @Test("a NUL-suffixed address gets no code and no outbox message", arguments: TestDatabase.engines)
    func nulAddressGetsNothing(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("bob@example.com")
            let emailStep = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            let refused = try await driver.submit(emailStep, [("step", "send"), ("email", "bob@example.com\u{0}.attacker.example")])
            #expect(refused.status == .badRequest)
            #expect(refused.text.contains("Please enter a valid email address."))
            #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("the code goes to the address the account holds, whatever variant was typed", arguments: TestDatabase.engines)
    func codeGoesToStoredAddress(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("bob@example.com")
            _ = try await verify(h, driver, typed: "ＢＯＢ@EXAMPLE.com")
            #expect(try await h.server.outbox(tenantID: h.tenant.id).map(\.recipient) == ["bob@example.com"])
        }
    }

    @Test(
        "a verified code changes only the account it was sent for, not a new account at the same address", arguments: TestDatabase.engines)
    func codeBindsToAccount(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let first = try await h.addUser("bob@example.com")
            let passwordStep = try await verify(h, driver, typed: "bob@example.com")
            #expect(passwordStep.text.contains("E-mail address verified"))
            // The account is replaced by another one with the same address before the change.
            #expect(try await h.server.users.delete(id: first.id))
            let second = try await h.addUser("bob@example.com", password: "Second-pass1")
            let refused = try await driver.submit(
                passwordStep, [("step", "change"), ("newPassword", "Taken-0ver!"), ("reenterPassword", "Taken-0ver!")])
            #expect(refused.status == .badRequest)
            #expect(refused.location == nil)
            #expect(try await driver.ropc(h, username: "bob@example.com", password: "Second-pass1").status == .ok)
            #expect(try await b2cCode(driver.ropc(h, username: "bob@example.com", password: "Taken-0ver!")) == "AADB2C90225")
            #expect(second.id != first.id)
        }
    }
}
