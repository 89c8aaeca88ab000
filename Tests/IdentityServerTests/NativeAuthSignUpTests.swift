import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// External ID's native authentication API, sign-up and password reset (SPEC §2.15): the
/// address proven by an eight-digit code from the outbox, the password and attributes taken as
/// the flow asks for them, the account made once at the end, and a continuation token that
/// signs in; every refusal in the API's own form, nothing half-made.
@Suite("Native authentication: sign-up and password reset")
struct NativeAuthSignUpTests {
    static func path(_ h: IdentityHarness, _ endpoint: String) -> String { "/\(h.tenant.name)/\(endpoint)" }

    static func error(_ response: TestResponse) -> (String?, Int?, String?) {
        (response.json["error"] as? String, (response.json["error_codes"] as? [Int])?.first, response.json["suberror"] as? String)
    }

    static func call(_ h: IdentityHarness, _ driver: Driver, _ endpoint: String, _ fields: [(String, String)]) async throws -> TestResponse {
        try await driver.post(path(h, endpoint), [("client_id", h.clientID)] + fields)
    }

    @Test("new flows per address are limited as the pages' transactions are: past it 429 before any lookup or hash, nothing stored", arguments: TestDatabase.engines)
    func perAddressLimit(engine: DatabaseEngine) async throws {
        var configuration = IdentityServerConfiguration(passwordHashCost: 4)
        configuration.transactionsPerAddressPerHour = 3
        try await IdentityHarness.run(engine, configuration: configuration) { h, driver in
            func start(_ index: Int) async throws -> TestResponse {
                try await Self.call(h, driver, "signup/v1.0/start", [("username", "new\(index)@example.com"), ("challenge_type", "oob password redirect"), ("password", "Fresh-Passw0rd")])
            }
            for index in 0..<2 { #expect(try await start(index).json["continuation_token"] is String) }
            // Sign-in and reset starts count against the same limit.
            let initiate = try await driver.post(
                "/\(h.tenant.name)/oauth2/v2.0/initiate", [("client_id", h.clientID), ("username", "nobody@example.com"), ("challenge_type", "password redirect")])
            #expect(initiate.status != .tooManyRequests)
            let refused = try await start(3)
            #expect(refused.status == .tooManyRequests && Self.error(refused) == ("invalid_request", 90_055, nil), "\(refused.text)")
            let rows = try await h.database.rows("SELECT COUNT(*) AS n FROM native_auth_flows", [])
            #expect(try rows.first?.integer("n") == 2, "the refused start stored nothing")
            h.clock.advance(by: 3601)
            #expect(try await start(4).json["continuation_token"] is String, "an hour later it may again")
        }
    }

    static func continuation(_ response: TestResponse) throws -> String { try #require(response.json["continuation_token"] as? String, "\(response.text)") }

    static func users(_ h: IdentityHarness) async throws -> Int {
        try await h.database.read { sql in try await sql.raw("SELECT COUNT(*) AS n FROM users").first(decodingColumn: "n", as: Int.self) ?? 0 }
    }

    /// Signs in with a continuation token from a sign-up or reset; the response.
    static func signIn(_ h: IdentityHarness, _ driver: Driver, _ token: String, username: String) async throws -> TestResponse {
        try await call(
            h, driver, "oauth2/v2.0/token",
            [("continuation_token", token), ("grant_type", "continuation_token"), ("username", username), ("scope", "openid offline_access")])
    }

    @Test("sign-up with the password and attributes at start: a code from the outbox, then tokens for the new account", arguments: TestDatabase.engines)
    func signUpAllAtOnce(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let started = try await Self.call(
                h, driver, "signup/v1.0/start",
                [
                    ("username", "New.Person@Example.com"), ("challenge_type", "oob password redirect"), ("password", "Str0ng-Pass!"),
                    ("attributes", #"{"displayName":"New Person","givenName":"New","unknownThing":"ignored"}"#),
                ])
            let first = try Self.continuation(started)
            let challenged = try await Self.call(h, driver, "signup/v1.0/challenge", [("continuation_token", first), ("challenge_type", "oob password redirect")])
            #expect(challenged.json["challenge_type"] as? String == "oob" && challenged.json["code_length"] as? Int == 8, "\(challenged.text)")
            #expect(challenged.json["binding_method"] as? String == "prompt" && challenged.json["challenge_channel"] as? String == "email")
            #expect((challenged.json["challenge_target_label"] as? String)?.contains("example.com") == false, "the address is masked")
            let second = try Self.continuation(challenged)
            let code = try await h.latestCode(digits: 8)
            #expect(code.count == 8)
            #expect(try await h.server.outbox(tenantID: h.tenant.id).first?.recipient == "New.Person@Example.com")
            // A wrong code: refused, and the same token may try again.
            let wrong = try await Self.call(h, driver, "signup/v1.0/continue", [("continuation_token", second), ("grant_type", "oob"), ("oob", "00000000")])
            #expect(Self.error(wrong) == ("invalid_grant", 50_181, "invalid_oob_value"))
            #expect(try await Self.users(h) == 0)
            let done = try await Self.call(h, driver, "signup/v1.0/continue", [("continuation_token", second), ("grant_type", "oob"), ("oob", code)])
            let signedUp = try Self.continuation(done)
            #expect(done.status == .ok && done.json["error"] == nil)
            let user = try #require(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "new.person@example.com"))
            #expect(user.displayName == "New Person" && user.attributes["givenName"] == "New" && user.emailVerified && user.passwordHash != nil)
            #expect(user.email == "New.Person@Example.com")
            // The sign-up's tokens; the continuation token works once.
            let tokens = try await Self.signIn(h, driver, signedUp, username: "new.person@example.com")
            #expect(tokens.status == .ok && tokens.json["client_info"] is String && tokens.json["refresh_token"] is String, "\(tokens.text)")
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["oid"] as? String == user.objectID)
            #expect(Self.error(try await Self.signIn(h, driver, signedUp, username: "new.person@example.com")) == ("invalid_request", 55_200, nil))
            // The tokens from before each step are spent.
            for old in [first, second] {
                #expect(Self.error(try await Self.call(h, driver, "signup/v1.0/challenge", [("continuation_token", old)])).1 == 55_200)
            }
            // The new password signs in through the API too.
            let again = try await NativeAuthTests.toTokenStep(h, driver, email: "new.person@example.com")
            #expect(try await NativeAuthTests.token(h, driver, again, password: "Str0ng-Pass!").status == .ok)
        }
    }

    @Test("sign-up step by step: credential_required, a weak password, attributes_required, a refused attribute, then the account", arguments: TestDatabase.engines)
    func signUpStepByStep(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let started = try await Self.call(h, driver, "signup/v1.0/start", [("username", "bob@example.com"), ("challenge_type", "oob password redirect")])
            let challenged = try await Self.call(h, driver, "signup/v1.0/challenge", [("continuation_token", try Self.continuation(started))])
            let proved = try await Self.call(
                h, driver, "signup/v1.0/continue",
                [("continuation_token", try Self.continuation(challenged)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
            #expect(Self.error(proved) == ("credential_required", 55_103, nil))
            let passwordChallenge = try await Self.call(
                h, driver, "signup/v1.0/challenge", [("continuation_token", try Self.continuation(proved)), ("challenge_type", "oob password redirect")])
            #expect(passwordChallenge.json["challenge_type"] as? String == "password", "\(passwordChallenge.text)")
            let step = try Self.continuation(passwordChallenge)
            let weak = try await Self.call(h, driver, "signup/v1.0/continue", [("continuation_token", step), ("grant_type", "password"), ("password", "password")])
            #expect(Self.error(weak) == ("invalid_grant", 399_246, "password_too_weak"))
            let short = try await Self.call(h, driver, "signup/v1.0/continue", [("continuation_token", step), ("grant_type", "password"), ("password", "Ab1!")])
            #expect(Self.error(short).2 == "password_too_short")
            let password = try await Self.call(h, driver, "signup/v1.0/continue", [("continuation_token", step), ("grant_type", "password"), ("password", "Str0ng-Pass!")])
            #expect(Self.error(password) == ("attributes_required", 55_106, nil))
            let required = try #require(password.json["required_attributes"] as? [[String: Any]])
            #expect(required.contains { $0["name"] as? String == "displayName" && $0["required"] as? Bool == true })
            let attributesStep = try Self.continuation(password)
            let refused = try await Self.call(
                h, driver, "signup/v1.0/continue", [("continuation_token", attributesStep), ("grant_type", "attributes"), ("attributes", #"{"displayName":"   "}"#)])
            #expect(Self.error(refused) == ("invalid_grant", 55_107, "attribute_validation_failed"))
            #expect((refused.json["invalid_attributes"] as? [[String: Any]])?.first?["name"] as? String == "displayName")
            #expect(try await Self.users(h) == 0, "nothing made before the last step")
            let notJSON = try await Self.call(
                h, driver, "signup/v1.0/continue", [("continuation_token", attributesStep), ("grant_type", "attributes"), ("attributes", "[1,2")])
            #expect(Self.error(notJSON).0 == "invalid_request")
            let done = try await Self.call(
                h, driver, "signup/v1.0/continue", [("continuation_token", attributesStep), ("grant_type", "attributes"), ("attributes", #"{"displayName":"Bob"}"#)])
            let tokens = try await Self.signIn(h, driver, try Self.continuation(done), username: "bob@example.com")
            #expect(tokens.status == .ok, "\(tokens.text)")
            #expect(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "bob@example.com")?.displayName == "Bob")
        }
    }

    @Test("sign-up refusals: an existing account, a name that is not an address, no code offered, an app that did not opt in, another account's name at the token", arguments: TestDatabase.engines)
    func signUpRefusals(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let existing = try await Self.call(h, driver, "signup/v1.0/start", [("username", "ALICE@example.com"), ("challenge_type", "oob password redirect")])
            #expect(Self.error(existing) == ("user_already_exists", 1_003_037, nil))
            #expect(Self.error(try await Self.call(h, driver, "signup/v1.0/start", [("username", "alice"), ("challenge_type", "oob redirect")])).1 == 90_100)
            let noCode = try await Self.call(h, driver, "signup/v1.0/start", [("username", "carol@example.com"), ("challenge_type", "password redirect")])
            #expect(noCode.status == .ok && noCode.json["challenge_type"] as? String == "redirect")
            // The tenant's local accounts have passwords: a client that cannot give one is sent to the browser.
            let noPassword = try await Self.call(h, driver, "signup/v1.0/start", [("username", "carol@example.com"), ("challenge_type", "oob redirect")])
            #expect(noPassword.status == .ok && noPassword.json["challenge_type"] as? String == "redirect")
            #expect(Self.error(try await Self.call(h, driver, "signup/v1.0/start", [("username", "carol@example.com"), ("challenge_type", "oob")])).1 == 901_007)
            let plain = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "No native", kind: .public, redirectURIs: [])
            try await h.server.tenants.save(plain, now: Date())
            let off = try await driver.post(
                Self.path(h, "signup/v1.0/start"), [("client_id", plain.clientIDString), ("username", "carol@example.com"), ("challenge_type", "oob redirect")])
            #expect(Self.error(off) == ("invalid_client", 500_208, "nativeauthapi_disabled"))
            // A weak password at start: refused before any code is sent.
            let weak = try await Self.call(
                h, driver, "signup/v1.0/start", [("username", "carol@example.com"), ("challenge_type", "oob password redirect"), ("password", "weakweak")])
            #expect(Self.error(weak).2 == "password_too_weak")
            #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)
            // The account finished by a sign-up is the only one its token signs in.
            let token = try await Self.signUp(h, driver, "dave@example.com", password: "Str0ng-Pass!")
            #expect(Self.error(try await Self.signIn(h, driver, token, username: "alice@example.com")).1 == 90_100)
            // Two sign-ups for one address: the second to finish finds the account made.
            let first = try await Self.call(
                h, driver, "signup/v1.0/start",
                [("username", "erin@example.com"), ("challenge_type", "oob password redirect"), ("password", "Str0ng-Pass!"), ("attributes", #"{"displayName":"E"}"#)])
            let firstCode = try await Self.call(h, driver, "signup/v1.0/challenge", [("continuation_token", try Self.continuation(first))])
            let firstOOB = try await h.latestCode(digits: 8)
            _ = try await Self.signUp(h, driver, "erin@example.com", password: "Str0ng-Pass!")
            let late = try await Self.call(
                h, driver, "signup/v1.0/continue", [("continuation_token", try Self.continuation(firstCode)), ("grant_type", "oob"), ("oob", firstOOB)])
            #expect(Self.error(late).0 == "user_already_exists", "\(late.text)")
        }
    }

    /// A whole sign-up with the password and display name at start; the token that signs in.
    static func signUp(_ h: IdentityHarness, _ driver: Driver, _ email: String, password: String) async throws -> String {
        let fields = [
            ("username", email), ("challenge_type", "oob password redirect"), ("attributes", #"{"displayName":"Someone"}"#), ("password", password),
        ]
        let started = try await call(h, driver, "signup/v1.0/start", fields)
        let challenged = try await call(h, driver, "signup/v1.0/challenge", [("continuation_token", try continuation(started))])
        let done = try await call(
            h, driver, "signup/v1.0/continue", [("continuation_token", try continuation(challenged)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
        return try continuation(done)
    }

    /// A local account without a password (one imported without it): it signs in with codes.
    static func addCodeOnlyUser(_ h: IdentityHarness, _ email: String) async throws -> UserAccount {
        let user = UserAccount(
            tenantID: h.tenant.id, identityProvider: .local, signInName: email, email: email, displayName: "Codes", createdAt: Date(),
            emailVerified: true)
        try await h.server.users.create(user)
        return user
    }

    @Test("an account without a password signs in with a mailed code: a wrong one refused, the right one once", arguments: TestDatabase.engines)
    func codeOnlyAccount(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await Self.addCodeOnlyUser(h, "otp@example.com")
            let started = try await Self.call(h, driver, "oauth2/v2.0/initiate", [("username", "otp@example.com"), ("challenge_type", "oob redirect")])
            let challenged = try await Self.call(
                h, driver, "oauth2/v2.0/challenge", [("continuation_token", try Self.continuation(started)), ("challenge_type", "oob redirect")])
            #expect(challenged.json["challenge_type"] as? String == "oob", "\(challenged.text)")
            let step = try Self.continuation(challenged)
            func token(_ code: String) async throws -> TestResponse {
                try await Self.call(h, driver, "oauth2/v2.0/token", [("continuation_token", step), ("grant_type", "oob"), ("oob", code), ("scope", "openid")])
            }
            #expect(Self.error(try await token("12345678")) == ("invalid_grant", 50_181, "invalid_oob_value"))
            // A password grant on a code flow is not this flow's proof.
            let password = try await Self.call(
                h, driver, "oauth2/v2.0/token", [("continuation_token", step), ("grant_type", "password"), ("password", "x"), ("scope", "openid")])
            #expect(Self.error(password).0 == "unsupported_grant_type")
            let code = try await h.latestCode(digits: 8)
            let tokens = try await token(code)
            #expect(tokens.status == .ok && tokens.json["id_token"] is String, "\(tokens.text)")
            #expect(Self.error(try await token(code)).1 == 55_200)
            // It has no password to reset.
            let reset = try await Self.call(h, driver, "resetpassword/v1.0/start", [("username", "otp@example.com"), ("challenge_type", "oob redirect")])
            #expect(Self.error(reset) == ("invalid_request", 500_222, nil))
        }
    }

    @Test("the sign-in log keeps each native sign-in's end: a sign-up's tokens as signUp, a wrong code with its number and the account; nothing secret")
    func signInLog() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let token = try await Self.signUp(h, driver, "logged@example.com", password: "Str0ng-Pass!")
            #expect(try await Self.signIn(h, driver, token, username: "logged@example.com").status == .ok)
            let user = try #require(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "logged@example.com"))
            let codes = try await Self.addCodeOnlyUser(h, "codes@example.com")
            let started = try await Self.call(h, driver, "oauth2/v2.0/initiate", [("username", "codes@example.com"), ("challenge_type", "oob redirect")])
            let challenged = try await Self.call(h, driver, "oauth2/v2.0/challenge", [("continuation_token", try Self.continuation(started)), ("challenge_type", "oob redirect")])
            let code = try await h.latestCode(digits: 8)
            let wrong = code == "12345678" ? "87654321" : "12345678"
            _ = try await Self.call(
                h, driver, "oauth2/v2.0/token", [("continuation_token", try Self.continuation(challenged)), ("grant_type", "oob"), ("oob", wrong), ("scope", "openid")])
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["AuditLog.Read.All"])
            let response = try await SignInLogTests.list(driver, auth)
            let all = SignInLogTests.values(response)
            let records = all.filter { ($0["userId"] as? String) == user.objectID }
            func details(_ record: [String: Any]) -> String { ((record["status"] as? [String: Any])?["additionalDetails"] as? String) ?? "" }
            func errorCode(_ record: [String: Any]) -> Int? { (record["status"] as? [String: Any])?["errorCode"] as? Int }
            #expect(records.count == 1, "\(response.text)")
            #expect(records.contains { errorCode($0) == 0 && details($0).hasPrefix("signUp with B2C_1_susi") && details($0).contains("grant_type native_continuation_token") })
            #expect(
                all.contains {
                    $0["userId"] as? String == codes.objectID && errorCode($0) == 50_181 && details($0).contains("grant_type native_oob")
                        && $0["appId"] as? String == h.clientID
                })
            #expect(!response.text.contains(code) && !response.text.contains(wrong))
        }
    }

    @Test("a flow whose accounts sign in with one-time codes: sign-up takes no password (one given is refused), and the account signs in with a code", arguments: TestDatabase.engines)
    func oneTimePasscodeFlow(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var flow = UserFlow(tenantID: h.tenant.id, name: "B2C_1_susi_otp", type: .signUpOrSignIn, identityProviders: [.local])
            flow.emailSignIn = .oneTimePasscode
            try await h.server.tenants.save(flow)
            var app = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "Codes", kind: .public, redirectURIs: [])
            app.nativeAuthentication = true
            app.userFlow = flow.name
            try await h.server.tenants.save(app, now: Date())
            func call(_ endpoint: String, _ fields: [(String, String)]) async throws -> TestResponse {
                try await driver.post(Self.path(h, endpoint), [("client_id", app.clientIDString)] + fields)
            }
            let withPassword = try await call(
                "signup/v1.0/start", [("username", "otp@example.com"), ("challenge_type", "oob password redirect"), ("password", "Str0ng-Pass!")])
            #expect(Self.error(withPassword) == ("invalid_request", 90_100, nil))
            let started = try await call(
                "signup/v1.0/start", [("username", "otp@example.com"), ("challenge_type", "oob redirect"), ("attributes", #"{"displayName":"Otp"}"#)])
            let challenged = try await call("signup/v1.0/challenge", [("continuation_token", try Self.continuation(started))])
            // The password path is not this flow's, at continue either.
            let sneaked = try await call(
                "signup/v1.0/continue", [("continuation_token", try Self.continuation(challenged)), ("grant_type", "password"), ("password", "Str0ng-Pass!")])
            #expect(Self.error(sneaked).1 == 55_200, "\(sneaked.text)")
            let done = try await call(
                "signup/v1.0/continue", [("continuation_token", try Self.continuation(challenged)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
            #expect(done.status == .ok && done.json["continuation_token"] is String, "\(done.text)")
            let user = try #require(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "otp@example.com"))
            #expect(user.passwordHash == nil && user.emailVerified)
            let initiated = try await call("oauth2/v2.0/initiate", [("username", "otp@example.com"), ("challenge_type", "oob password redirect")])
            let code = try await call("oauth2/v2.0/challenge", [("continuation_token", try Self.continuation(initiated)), ("challenge_type", "oob password redirect")])
            #expect(code.json["challenge_type"] as? String == "oob", "\(code.text)")
            let tokens = try await call(
                "oauth2/v2.0/token",
                [("continuation_token", try Self.continuation(code)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8)), ("scope", "openid")])
            #expect(tokens.status == .ok && tokens.json["id_token"] is String, "\(tokens.text)")
        }
    }

    @Test("too many codes for one address: refused with 429 and nothing sent, whatever flow asks")
    func tooManyCodes() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let started = try await Self.call(h, driver, "signup/v1.0/start", [("username", "many@example.com"), ("challenge_type", "oob password redirect")])
            var token = try Self.continuation(started)
            for _ in 0..<CodeLimits.default.sendsPerAddress {
                let sent = try await Self.call(h, driver, "signup/v1.0/challenge", [("continuation_token", token)])
                token = try Self.continuation(sent)
            }
            let refused = try await Self.call(h, driver, "signup/v1.0/challenge", [("continuation_token", token)])
            #expect(refused.status == .tooManyRequests && Self.error(refused) == ("invalid_request", 90_055, nil), "\(refused.text)")
            #expect(try await h.server.outbox(tenantID: h.tenant.id).count == Int(CodeLimits.default.sendsPerAddress))
        }
    }
}
