import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// External ID's native authentication API, password reset and the second factor (SPEC
/// §2.15): a reset proven by a code sets the password as the hosted reset does and signs in by
/// its continuation token; a flow's emailed second factor is `mfa_required`, `introspect`, a
/// challenge by method id and `mfa_oob`, or the browser for a client that cannot answer it.
@Suite("Native authentication: password reset and second factor")
struct NativeAuthResetTests {
    typealias S = NativeAuthSignUpTests

    @Test("a reset: code, a weak password refused, the new one set, poll succeeded, signed in; the old password no longer works", arguments: TestDatabase.engines)
    func passwordReset(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            #expect(Self.error(try await S.call(h, driver, "resetpassword/v1.0/start", [("username", "nobody@example.com"), ("challenge_type", "oob redirect")])) == ("user_not_found", 50_034, nil))
            let started = try await S.call(h, driver, "resetpassword/v1.0/start", [("username", "alice@example.com"), ("challenge_type", "oob redirect")])
            let challenged = try await S.call(h, driver, "resetpassword/v1.0/challenge", [("continuation_token", try S.continuation(started)), ("challenge_type", "oob redirect")])
            #expect(challenged.json["challenge_type"] as? String == "oob" && challenged.json["code_length"] as? Int == 8, "\(challenged.text)")
            let codeStep = try S.continuation(challenged)
            // Submitting before the code is proven: not this step's token.
            #expect(Self.error(try await S.call(h, driver, "resetpassword/v1.0/submit", [("continuation_token", codeStep), ("new_password", "N3w-Passw0rd!")])).1 == 55_200)
            #expect(Self.error(try await S.call(h, driver, "resetpassword/v1.0/continue", [("continuation_token", codeStep), ("grant_type", "oob"), ("oob", "99999999")])).2 == "invalid_oob_value")
            let proven = try await S.call(
                h, driver, "resetpassword/v1.0/continue", [("continuation_token", codeStep), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
            let expiresIn = try #require(proven.json["expires_in"] as? Int, "\(proven.text)")
            #expect(expiresIn > 0 && expiresIn <= 600)
            let submitStep = try S.continuation(proven)
            #expect(Self.error(try await S.call(h, driver, "resetpassword/v1.0/submit", [("continuation_token", submitStep), ("new_password", "short")])).2 == "password_too_short")
            let submitted = try await S.call(h, driver, "resetpassword/v1.0/submit", [("continuation_token", submitStep), ("new_password", "N3w-Passw0rd!")])
            #expect(submitted.json["poll_interval"] as? Int == 1, "\(submitted.text)")
            let polled = try await S.call(h, driver, "resetpassword/v1.0/poll_completion", [("continuation_token", try S.continuation(submitted))])
            #expect(polled.json["status"] as? String == "succeeded", "\(polled.text)")
            let tokens = try await S.signIn(h, driver, try S.continuation(polled), username: "alice@example.com")
            #expect(tokens.status == .ok && tokens.json["refresh_token"] is String, "\(tokens.text)")
            #expect(DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims["oid"] as? String == user.objectID)
            let old = try await NativeAuthTests.toTokenStep(h, driver)
            #expect(Self.error(try await NativeAuthTests.token(h, driver, old)) == ("invalid_grant", 50_126, nil))
            let new = try await NativeAuthTests.toTokenStep(h, driver)
            #expect(try await NativeAuthTests.token(h, driver, new, password: "N3w-Passw0rd!").status == .ok)
        }
    }

    static func error(_ response: TestResponse) -> (String?, Int?, String?) { S.error(response) }

    /// An app bound to a flow whose second factor is a mailed code, always.
    static func emailMFAApp(_ h: IdentityHarness, methods: [MFAPolicy.Method] = [.email]) async throws -> AppRegistration {
        var flow = UserFlow(tenantID: h.tenant.id, name: "B2C_1_susi_email_mfa", type: .signUpOrSignIn, identityProviders: [.local], signUpAttributes: [.displayName])
        flow.mfa = MFAPolicy(methods: methods, enforcement: .always)
        try await h.server.tenants.save(flow)
        var app = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "MFA native", kind: .public, redirectURIs: [])
        app.nativeAuthentication = true
        app.userFlow = flow.name
        try await h.server.tenants.save(app, now: Date())
        return app
    }

    @Test("the second factor: redirect without the capability; with it mfa_required, introspect, challenge by id, mfa_oob", arguments: TestDatabase.engines)
    func secondFactor(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let app = try await Self.emailMFAApp(h)
            let client = app.clientIDString
            func call(_ endpoint: String, _ fields: [(String, String)]) async throws -> TestResponse {
                try await driver.post(S.path(h, endpoint), [("client_id", client)] + fields)
            }
            func passwordStep(capabilities: String?) async throws -> String {
                var fields = [("username", "alice@example.com"), ("challenge_type", "password oob redirect")]
                if let capabilities { fields.append(("capabilities", capabilities)) }
                let started = try await call("oauth2/v2.0/initiate", fields)
                let challenged = try await call("oauth2/v2.0/challenge", [("continuation_token", try S.continuation(started)), ("challenge_type", "password oob redirect")])
                return try S.continuation(challenged)
            }
            func password(_ step: String) async throws -> TestResponse {
                try await call("oauth2/v2.0/token", [("continuation_token", step), ("grant_type", "password"), ("password", "Passw0rd!"), ("scope", "openid offline_access")])
            }
            let browser = try await password(try await passwordStep(capabilities: nil))
            #expect(browser.status == .ok && browser.json["challenge_type"] as? String == "redirect" && browser.json["access_token"] == nil)
            #expect((browser.json["redirect_reason"] as? String)?.contains("mfa_required") == true)

            let stopped = try await password(try await passwordStep(capabilities: "registration_required mfa_required"))
            #expect(Self.error(stopped) == ("invalid_grant", 50_076, "mfa_required"), "\(stopped.text)")
            let mfaToken = try S.continuation(stopped)
            // The MFA step's token is nothing at the token endpoint before its code.
            #expect(Self.error(try await call("oauth2/v2.0/token", [("continuation_token", mfaToken), ("grant_type", "mfa_oob"), ("oob", "1"), ("scope", "openid")])).1 == 55_200)
            let introspected = try await call("oauth2/v2.0/introspect", [("continuation_token", mfaToken)])
            let method = try #require((introspected.json["methods"] as? [[String: Any]])?.first, "\(introspected.text)")
            #expect(method["challenge_type"] as? String == "oob" && method["challenge_channel"] as? String == "email")
            #expect((method["login_hint"] as? String)?.contains("***") == true)
            let id = try #require(method["id"] as? String)
            let afterIntrospect = try S.continuation(introspected)
            #expect(Self.error(try await call("oauth2/v2.0/challenge", [("continuation_token", afterIntrospect), ("id", UUID().uuidString)])).0 == "invalid_request")
            let challenged = try await call("oauth2/v2.0/challenge", [("continuation_token", afterIntrospect), ("id", id), ("challenge_type", "oob redirect")])
            #expect(challenged.json["challenge_type"] as? String == "oob", "\(challenged.text)")
            let codeStep = try S.continuation(challenged)
            func mfa(_ code: String) async throws -> TestResponse {
                try await call("oauth2/v2.0/token", [("continuation_token", codeStep), ("grant_type", "mfa_oob"), ("oob", code), ("scope", "openid offline_access")])
            }
            #expect(Self.error(try await mfa("00000000")).2 == "invalid_oob_value")
            let tokens = try await mfa(try await h.latestCode(digits: 8))
            #expect(tokens.status == .ok && tokens.json["refresh_token"] is String, "\(tokens.text)")

            // An authenticator-app flow needs the browser even with the capability.
            var totp = try await Self.emailMFAApp(h, methods: [.totp])
            totp.userFlow = "B2C_1_susi_mfa"
            try await h.server.tenants.save(totp, now: Date())
            let started = try await driver.post(
                S.path(h, "oauth2/v2.0/initiate"),
                [("client_id", totp.clientIDString), ("username", "alice@example.com"), ("challenge_type", "password redirect"), ("capabilities", "mfa_required")])
            let challenged2 = try await driver.post(
                S.path(h, "oauth2/v2.0/challenge"),
                [("client_id", totp.clientIDString), ("continuation_token", try S.continuation(started)), ("challenge_type", "password redirect")])
            let redirected = try await driver.post(
                S.path(h, "oauth2/v2.0/token"),
                [("client_id", totp.clientIDString), ("continuation_token", try S.continuation(challenged2)), ("grant_type", "password"), ("password", "Passw0rd!"), ("scope", "openid")])
            #expect(redirected.json["challenge_type"] as? String == "redirect" && redirected.json["access_token"] == nil, "\(redirected.text)")
        }
    }

    @Test("after a sign-up, the second factor still holds for the new account", arguments: TestDatabase.engines)
    func secondFactorAfterSignUp(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let app = try await Self.emailMFAApp(h)
            func call(_ endpoint: String, _ fields: [(String, String)]) async throws -> TestResponse {
                try await driver.post(S.path(h, endpoint), [("client_id", app.clientIDString)] + fields)
            }
            let started = try await call(
                "signup/v1.0/start",
                [("username", "new@example.com"), ("challenge_type", "oob password redirect"), ("password", "Str0ng-Pass!"), ("attributes", #"{"displayName":"N"}"#),
                 ("capabilities", "mfa_required")])
            let challenged = try await call("signup/v1.0/challenge", [("continuation_token", try S.continuation(started))])
            let done = try await call("signup/v1.0/continue", [("continuation_token", try S.continuation(challenged)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
            let stopped = try await call("oauth2/v2.0/token", [("continuation_token", try S.continuation(done)), ("grant_type", "continuation_token"), ("scope", "openid")])
            #expect(Self.error(stopped).2 == "mfa_required", "\(stopped.text)")
            #expect(stopped.json["access_token"] == nil)
        }
    }

    @Test("an address no code has proven is registered first: registration_required, register introspect, challenge, continue, then signed in", arguments: TestDatabase.engines)
    func registration(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let app = try await Self.emailMFAApp(h)
            let hash = try await h.server.service.hasher.hash("Passw0rd!")
            let unproven = UserAccount(
                tenantID: h.tenant.id, identityProvider: .local, signInName: "imported@example.com", email: "Imported@example.com",
                displayName: "Imported", passwordHash: hash, createdAt: Date(), emailVerified: false)
            try await h.server.users.create(unproven)
            func call(_ endpoint: String, _ fields: [(String, String)]) async throws -> TestResponse {
                try await driver.post(S.path(h, endpoint), [("client_id", app.clientIDString)] + fields)
            }
            func signIn(capabilities: String) async throws -> TestResponse {
                let started = try await call(
                    "oauth2/v2.0/initiate", [("username", "imported@example.com"), ("challenge_type", "password redirect"), ("capabilities", capabilities)])
                let challenged = try await call("oauth2/v2.0/challenge", [("continuation_token", try S.continuation(started)), ("challenge_type", "password redirect")])
                return try await call(
                    "oauth2/v2.0/token",
                    [("continuation_token", try S.continuation(challenged)), ("grant_type", "password"), ("password", "Passw0rd!"), ("scope", "openid")])
            }
            let browser = try await signIn(capabilities: "mfa_required")
            #expect((browser.json["redirect_reason"] as? String)?.contains("registration_required") == true, "\(browser.text)")
            let stopped = try await signIn(capabilities: "mfa_required registration_required")
            #expect(Self.error(stopped) == ("invalid_grant", 50_079, "registration_required"), "\(stopped.text)")
            // The registration's token is not the second factor's.
            #expect(Self.error(try await call("oauth2/v2.0/introspect", [("continuation_token", try S.continuation(stopped))])).1 == 55_200)
            let introspected = try await call("register/v1.0/introspect", [("continuation_token", try S.continuation(stopped))])
            let method = try #require((introspected.json["methods"] as? [[String: Any]])?.first, "\(introspected.text)")
            #expect(method["id"] as? String == "email" && method["login_hint"] as? String == "Imported@example.com")
            let step = try S.continuation(introspected)
            let elsewhere = try await call(
                "register/v1.0/challenge", [("continuation_token", step), ("challenge_type", "oob"), ("challenge_target", "attacker@example.com")])
            #expect(Self.error(elsewhere).1 == 90_100)
            #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty, "no code to another address")
            let challenged = try await call(
                "register/v1.0/challenge",
                [("continuation_token", step), ("challenge_type", "oob"), ("challenge_target", "imported@example.com"), ("challenge_channel", "email")])
            #expect(challenged.json["challenge_target"] as? String == "Imported@example.com" && challenged.json["code_length"] as? Int == 8, "\(challenged.text)")
            let codeStep = try S.continuation(challenged)
            #expect(Self.error(try await call("register/v1.0/continue", [("continuation_token", codeStep), ("grant_type", "oob"), ("oob", "11111111")])).2 == "invalid_oob_value")
            #expect(try await h.server.users.user(id: unproven.id)?.emailVerified == false)
            let registered = try await call(
                "register/v1.0/continue", [("continuation_token", codeStep), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
            let tokens = try await call(
                "oauth2/v2.0/token", [("continuation_token", try S.continuation(registered)), ("grant_type", "continuation_token"), ("scope", "openid")])
            #expect(tokens.status == .ok && tokens.json["id_token"] is String, "\(tokens.text)")
            #expect(try await h.server.users.user(id: unproven.id)?.emailVerified == true)
            // Registered: the next sign-in asks for the second factor itself.
            #expect(Self.error(try await signIn(capabilities: "mfa_required registration_required")).2 == "mfa_required")
        }
    }

    @Test("the rules of the app's flow hold: no sign-up where the flow has none, no local accounts where it offers none; a disabled account gets nothing, not even a reset; a confidential app is refused", arguments: TestDatabase.engines)
    func flowRulesAndDisabledAccounts(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            func app(flow: String, kind: ClientKind = .public) async throws -> String {
                var app = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "Bound \(flow)", kind: kind, redirectURIs: [])
                app.nativeAuthentication = true
                app.userFlow = flow
                try await h.server.tenants.save(app, now: Date())
                return app.clientIDString
            }
            func redirected(_ response: TestResponse) -> Bool { response.status == .ok && response.json["challenge_type"] as? String == "redirect" }
            let signInOnly = try await app(flow: "B2C_1_sign_in")
            let signUp: [(String, String)] = [("username", "new@example.com"), ("challenge_type", "oob password redirect"), ("password", "Str0ng-Pass!")]
            #expect(redirected(try await driver.post(S.path(h, "signup/v1.0/start"), [("client_id", signInOnly)] + signUp)))
            let facebookOnly = try await app(flow: "B2C_1_facebook")
            #expect(redirected(try await driver.post(
                S.path(h, "oauth2/v2.0/initiate"), [("client_id", facebookOnly), ("username", "alice@example.com"), ("challenge_type", "password redirect")])))
            let confidential = try await app(flow: "B2C_1_susi", kind: .confidential)
            #expect(Self.error(try await driver.post(S.path(h, "signup/v1.0/start"), [("client_id", confidential)] + signUp)).0 == "unauthorized_client")
            #expect(try await S.users(h) == 0)

            // A disabled account: no reset, and a reset's or sign-up's token signs it in no more.
            let user = try await h.addUser()
            let started = try await S.call(h, driver, "resetpassword/v1.0/start", [("username", "alice@example.com"), ("challenge_type", "oob redirect")])
            let challenged = try await S.call(h, driver, "resetpassword/v1.0/challenge", [("continuation_token", try S.continuation(started))])
            let proven = try await S.call(
                h, driver, "resetpassword/v1.0/continue",
                [("continuation_token", try S.continuation(challenged)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
            try await h.server.users.setAccountState(id: user.id, enabled: false, passwordPolicies: nil, now: Date())
            let submitted = try await S.call(h, driver, "resetpassword/v1.0/submit", [("continuation_token", try S.continuation(proven)), ("new_password", "N3w-Passw0rd!")])
            #expect(Self.error(submitted) == ("invalid_grant", 50_057, nil))
            #expect(Self.error(try await S.call(h, driver, "resetpassword/v1.0/start", [("username", "alice@example.com"), ("challenge_type", "oob redirect")])).1 == 50_057)
            let token = try await S.signUp(h, driver, "bob@example.com", password: "Str0ng-Pass!")
            let bob = try #require(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "bob@example.com"))
            try await h.server.users.setAccountState(id: bob.id, enabled: false, passwordPolicies: nil, now: Date())
            let refused = try await S.signIn(h, driver, token, username: "bob@example.com")
            #expect(Self.error(refused) == ("invalid_grant", 50_057, nil), "\(refused.text)")
        }
    }

    @Test("a reset where the second factor is an authenticator app goes to the browser, which asks for it first", arguments: TestDatabase.engines)
    func resetWithAuthenticator(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var app = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "TOTP", kind: .public, redirectURIs: [])
            app.nativeAuthentication = true
            app.userFlow = "B2C_1_susi_mfa"
            try await h.server.tenants.save(app, now: Date())
            let started = try await driver.post(
                S.path(h, "resetpassword/v1.0/start"), [("client_id", app.clientIDString), ("username", "alice@example.com"), ("challenge_type", "oob redirect")])
            #expect(started.status == .ok && started.json["challenge_type"] as? String == "redirect", "\(started.text)")
            #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("the second factor's codes have their own window: resets asked for by anyone who knows the address do not use it up")
    func secondFactorWindow() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser()
            let started = try await S.call(h, driver, "resetpassword/v1.0/start", [("username", "alice@example.com"), ("challenge_type", "oob redirect")])
            var token = try S.continuation(started)
            for _ in 0..<CodeLimits.default.sendsPerAddress {
                token = try S.continuation(try await S.call(h, driver, "resetpassword/v1.0/challenge", [("continuation_token", token)]))
            }
            #expect(try await S.call(h, driver, "resetpassword/v1.0/challenge", [("continuation_token", token)]).status == .tooManyRequests)
            let app = try await Self.emailMFAApp(h)
            func call(_ endpoint: String, _ fields: [(String, String)]) async throws -> TestResponse {
                try await driver.post(S.path(h, endpoint), [("client_id", app.clientIDString)] + fields)
            }
            let initiated = try await call(
                "oauth2/v2.0/initiate", [("username", "alice@example.com"), ("challenge_type", "password redirect"), ("capabilities", "mfa_required")])
            let challenged = try await call("oauth2/v2.0/challenge", [("continuation_token", try S.continuation(initiated)), ("challenge_type", "password redirect")])
            let stopped = try await call(
                "oauth2/v2.0/token",
                [("continuation_token", try S.continuation(challenged)), ("grant_type", "password"), ("password", "Passw0rd!"), ("scope", "openid")])
            let introspected = try await call("oauth2/v2.0/introspect", [("continuation_token", try S.continuation(stopped))])
            let id = try #require((introspected.json["methods"] as? [[String: Any]])?.first?["id"] as? String)
            let sent = try await call("oauth2/v2.0/challenge", [("continuation_token", try S.continuation(introspected)), ("id", id)])
            #expect(sent.status == .ok && sent.json["challenge_type"] as? String == "oob", "\(sent.text)")
        }
    }
}
