import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdOTP
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// Multi-factor authentication in user flows (SPEC §2.11): TOTP enrolment and sign-in, a code
/// used once, ±1 step, too many tries (AADB2C90151) counted even when guesses run in parallel,
/// email codes, `conditional` enforcement, and SSO sessions that remember the second factor.
@Suite("Multi-factor authentication")
struct SecondFactorTests {
    static let policy = "B2C_1_susi_mfa"

    /// The key of an `otpauth://` URI on the page: base32 (RFC 4648 §6) decoded to the text the
    /// HMAC key is made of.
    static func secret(from page: TestResponse) throws -> String {
        let text = Form.unescapeHTML(page.text)
        let start = try #require(text.range(of: "otpauth://totp/"))
        let uri = String(text[start.lowerBound...].prefix { $0 != "\"" && $0 != "<" })
        let base32 = try #require(URLComponents(string: uri)?.queryItems?.first { $0.name == "secret" }?.value)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var bits = 0
        var value = 0
        var bytes: [UInt8] = []
        for character in base32 {
            let index = try #require(alphabet.firstIndex(of: character))
            value = (value << 5) | index
            bits += 5
            if bits >= 8 {
                bytes.append(UInt8((value >> (bits - 8)) & 0xFF))
                bits -= 8
            }
        }
        return try #require(String(bytes: bytes, encoding: .utf8))
    }

    static func code(_ secret: String, at date: Date) -> String {
        String(format: "%06d", TOTP(secret: secret).compute(date: date))
    }

    /// Signs in with the password on `attempt`'s flow and returns the page that follows.
    static func signIn(_ h: IdentityHarness, _ driver: Driver, _ attempt: AuthorizationAttempt, email: String) async throws
        -> TestResponse
    {
        try await driver.signIn(h, attempt: attempt, email: email)
    }

    @Test("first sign-in enrols an authenticator; a code works once, ±1 step; SSO keeps the second factor", arguments: TestDatabase.engines)
    func enrolAndSignIn(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("mfa@example.com")
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            let enrol = try await Self.signIn(h, driver, attempt, email: "mfa@example.com")
            #expect(enrol.status == .ok)
            #expect(enrol.text.contains("Set up your authenticator app"))
            #expect(enrol.text.contains("<svg") && enrol.text.contains("id=\"otpCode\""))
            #expect(enrol.text.contains("otpauth://totp/TodoB2C:mfa@example.com?secret="))
            let secret = try Self.secret(from: enrol)
            // No code yet: the app has nothing, and the account is not enrolled by a wrong code.
            #expect(enrol.redirectParameters["code"] == nil)
            let wrong = try await driver.submit(
                enrol, [("step", "verify"), ("code", "000000" == Self.code(secret, at: h.clock.now) ? "111111" : "000000")])
            #expect(wrong.status == .badRequest && wrong.text.contains("does not match"))
            let account = try #require(
                try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "mfa@example.com"))
            let enrolledEarly = try await h.server.service.secondFactors.hasAuthenticator(userID: account.id)
            #expect(!enrolledEarly)

            let first = Self.code(secret, at: h.clock.now)
            let done = try await driver.submit(wrong, [("step", "verify"), ("code", first)])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text.prefix(300))")
            #expect(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] != nil)

            // SSO in the same browser: the session was backed by the second factor.
            let sso = try await driver.start(AuthorizationAttempt(harness: h, policy: Self.policy), harness: h)
            #expect(sso.redirectParameters["code"] != nil, "\(sso.text.prefix(300))")

            // A new sign-in (prompt=login): the same code again is refused, even within its step.
            var again = AuthorizationAttempt(harness: h, policy: Self.policy)
            again.extra = [("prompt", "login")]
            let ask = try await Self.signIn(h, driver, again, email: "mfa@example.com")
            #expect(ask.text.contains("Enter the 6-digit code") && !ask.text.contains("<svg"))
            let replayed = try await driver.submit(ask, [("step", "verify"), ("code", first)])
            #expect(replayed.status == .badRequest)
            // 30 s later the previous step's code is refused as used, the current one is accepted,
            // and so is one from the step before it (clock skew), but not two steps back.
            h.clock.advance(by: 30)
            let tooOld = Self.code(secret, at: h.clock.now.addingTimeInterval(-60))
            #expect(try await driver.submit(replayed, [("step", "verify"), ("code", tooOld)]).status == .badRequest)
            let late = try await driver.submit(replayed, [("step", "verify"), ("code", Self.code(secret, at: h.clock.now))])
            #expect(late.redirectParameters["code"] != nil)

            h.clock.advance(by: 30)
            var third = AuthorizationAttempt(harness: h, policy: Self.policy)
            third.extra = [("prompt", "login")]
            let ask3 = try await Self.signIn(h, driver, third, email: "mfa@example.com")
            let previousStep = Self.code(secret, at: h.clock.now.addingTimeInterval(-30))
            // The previous step was used above: refused. The next step (a fast clock) is accepted.
            #expect(try await driver.submit(ask3, [("step", "verify"), ("code", previousStep)]).status == .badRequest)
            let ahead = try await driver.submit(
                ask3, [("step", "verify"), ("code", Self.code(secret, at: h.clock.now.addingTimeInterval(30)))])
            #expect(ahead.redirectParameters["code"] != nil)

            // A flow without MFA never asks.
            var plain = AuthorizationAttempt(harness: h, policy: "B2C_1_susi")
            plain.extra = [("prompt", "login")]
            #expect(try await Self.signIn(h, driver, plain, email: "mfa@example.com").redirectParameters["code"] != nil)
        }
    }

    @Test("wrong codes end the sign-in with AADB2C90151 after five tries, parallel guesses included", arguments: TestDatabase.engines)
    func tooManyTries(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("guess@example.com")
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            let enrol = try await Self.signIn(h, driver, attempt, email: "guess@example.com")
            let secret = try Self.secret(from: enrol)
            let right = Self.code(secret, at: h.clock.now)
            let wrongCode = right == "123456" ? "654321" : "123456"
            // Twenty guesses at once: at most five are checked, the rest end the transaction.
            let action = try #require(enrol.formAction)
            let target = action.replacingOccurrences(of: IdentityHarness.origin, with: "")
            let form = [("csrf_token", enrol.field("csrf_token") ?? ""), ("step", "verify"), ("code", wrongCode)]
            let cookies = driver.cookies
            let outcomes = try await withThrowingTaskGroup(of: (checked: Bool, location: String?).self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let browser = Driver(client: driver.client)
                        browser.cookies = cookies
                        let response = try await browser.post(target, form)
                        return (response.text.contains("does not match"), response.location)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter(\.checked).count <= 5)
            #expect(outcomes.contains { $0.location?.contains("AADB2C90151") == true }, "\(outcomes)")
            // The transaction is over: even the right code now gets the app no code.
            let after = try await driver.submit(enrol, [("step", "verify"), ("code", right)])
            #expect(after.redirectParameters["code"] == nil)
        }
    }

    @Test("the account's tries are counted across sign-ins: ten in fifteen minutes, then AADB2C90151")
    func accountWindow() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser("window@example.com")
            var secret: String?
            var last: TestResponse?
            for round in 0..<3 {
                var attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
                attempt.extra = [("prompt", "login")]
                var page = try await Self.signIn(h, driver, attempt, email: "window@example.com")
                if secret == nil { secret = try Self.secret(from: page) }
                let wrongCode = Self.code(secret!, at: h.clock.now) == "999999" ? "888888" : "999999"
                for _ in 0..<4 where page.formAction != nil {
                    page = try await driver.submit(page, [("step", "verify"), ("code", wrongCode)])
                    if round < 2 { #expect(page.status == .badRequest) }
                }
                last = page
            }
            // 8 tries in two sign-ins; the third sign-in's third try is the eleventh: refused.
            let refused = try #require(last)
            #expect(b2cCode(redirect: refused) == "AADB2C90151", "\(refused.status) \(refused.location ?? "")")
            // After the window the account may try again (and a right code works).
            h.clock.advance(by: 16 * 60)
            var attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            attempt.extra = [("prompt", "login")]
            let page = try await Self.signIn(h, driver, attempt, email: "window@example.com")
            // Never enrolled (every code was wrong): a new sign-in offers a new secret.
            let offered = try Self.secret(from: page)
            #expect(offered != secret)
            let ok = try await driver.submit(page, [("step", "verify"), ("code", Self.code(offered, at: h.clock.now))])
            #expect(ok.redirectParameters["code"] != nil, "\(ok.text.prefix(300))")
        }
    }

    @Test("email codes through the outbox; conditional MFA asks once per browser", arguments: TestDatabase.engines)
    func emailConditional(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_sign_in"))
            flow.mfa = MFAPolicy(methods: [.email], enforcement: .conditional)
            try await h.server.tenants.save(flow)
            _ = try await h.addUser("mail@example.com")
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in")
            var page = try await Self.signIn(h, driver, attempt, email: "mail@example.com")
            #expect(page.text.contains("id=\"email_ver_but_send\""))
            page = try await driver.submit(page, [("step", "send")])
            #expect(page.text.contains("id=\"email_ver_input\""))
            let code = try await h.latestCode()
            let wrong = try await driver.submit(page, [("step", "verify"), ("code", code == "000000" ? "000001" : "000000")])
            #expect(wrong.status == .badRequest)
            let done = try await driver.submit(wrong, [("step", "verify"), ("code", code)])
            #expect(done.redirectParameters["code"] != nil)
            #expect(driver.cookies.keys.contains(TransactionCookies.knownBrowser(for: h.tenant)))

            // The same browser, a new password sign-in: no second factor.
            var again = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in")
            again.extra = [("prompt", "login")]
            #expect(try await Self.signIn(h, driver, again, email: "mail@example.com").redirectParameters["code"] != nil)
            // Another browser (no cookies): asked again.
            driver.cookies = [:]
            let elsewhere = try await Self.signIn(
                h, driver, AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in"), email: "mail@example.com")
            #expect(elsewhere.text.contains("id=\"email_ver_but_send\""))
            // An expired code is refused.
            let sent = try await driver.submit(elsewhere, [("step", "send")])
            let fresh = try await h.latestCode()
            h.clock.advance(by: 11 * 60)
            #expect(try await driver.submit(sent, [("step", "verify"), ("code", fresh)]).status == .badRequest)
        }
    }

    @Test("a sign-up in an MFA flow enrols before the app gets its code, as a new user")
    func signUpEnrols() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
            let page = try await driver.signUp(h, attempt: attempt, email: "new@example.com")
            #expect(page.text.contains("Set up your authenticator app"))
            let secret = try Self.secret(from: page)
            let done = try await driver.submit(page, [("step", "verify"), ("code", Self.code(secret, at: h.clock.now))])
            let code = try #require(done.redirectParameters["code"])
            let token = try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)
            #expect(DecodedJWT(token).claims["newUser"] as? Bool == true)
        }
    }

    @Test("the QR code has the finder patterns, the timing patterns and level M format bits of its version")
    func qrStructure() throws {
        let uri =
            "otpauth://totp/TodoB2C:alice%40example.com?secret=MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43UOV3HO6DZPIYTEMZUGU3DOOBZ&issuer=TodoB2C"
        let qr = try QRCode(text: uri)
        #expect(qr.size == qr.version * 4 + 17 && qr.version >= 5)
        let m = qr.modules
        for (x0, y0) in [(0, 0), (qr.size - 7, 0), (0, qr.size - 7)] {
            for d in 0..<7 {
                #expect(m[y0][x0 + d] && m[y0 + 6][x0 + d] && m[y0 + d][x0] && m[y0 + d][x0 + 6])
            }
            #expect(m[y0 + 3][x0 + 3] && !m[y0 + 1][x0 + 1])
        }
        for i in 8..<(qr.size - 8) { #expect(m[6][i] == (i % 2 == 0) && m[i][6] == (i % 2 == 0)) }
        // Format bits read back from around the top-left finder are a valid BCH(15,5) word for M.
        var bits = 0
        let positions = (0...5).map { (8, $0) } + [(8, 7), (8, 8), (7, 8)] + (9..<15).map { (14 - $0, 8) }
        for (index, (x, y)) in positions.enumerated() where m[y][x] { bits |= 1 << index }
        let word = bits ^ 0x5412
        #expect(word >> 13 == 0b00)
        var remainder = word >> 10
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        #expect(remainder == word & 0x3FF)
        #expect(throws: QRCode.EncodingError.self) { try QRCode(text: String(repeating: "x", count: 300)) }
        #expect(qr.svg().hasPrefix("<svg") && qr.svg().contains("viewBox=\"0 0 \(qr.size + 8) \(qr.size + 8)\""))
    }
}
