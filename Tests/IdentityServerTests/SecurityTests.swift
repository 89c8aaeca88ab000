import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Logging
import SQLKit
import Storage
import Synchronization
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// Collects every log line (message and metadata) so a test can search them.
final class LogRecorder: Sendable {
    let lines = Mutex<[String]>([])

    var logger: Logger {
        var logger = Logger(label: "recorded") { _ in RecordingHandler(recorder: self) }
        logger.logLevel = .trace
        return logger
    }

    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    struct RecordingHandler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var all = metadata
            for (key, value) in event.metadata ?? [:] { all[key] = value }
            let line =
                "\(event.level) \(event.message) \(all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))"
            recorder.lines.withLock { $0.append(line) }
        }
    }
}

@Suite("Security rules")
struct SecurityTests {
    @Test("no password, code, token or secret reaches the log; correlation ids do", arguments: TestDatabase.engines)
    func logsCarryNoSecrets(engine: DatabaseEngine) async throws {
        let recorder = LogRecorder()
        try await IdentityHarness.run(engine, logger: recorder.logger) { h, driver in
            let password = "Log-Secret-Pw1"
            _ = try await h.addUser("logger@example.com", password: password)
            let ropc = try await driver.ropc(h, username: "logger@example.com", password: password).json
            let wrong = try await driver.ropc(h, username: "logger@example.com", password: "Wrong-Secret-Pw2")
            #expect(wrong.status == .badRequest)
            let refresh = try await driver.refresh(h, token: ropc["refresh_token"] as! String).json
            let attempt = AuthorizationAttempt(harness: h)
            let signUp = try await driver.signUp(h, attempt: attempt, email: "pages@example.com", password: password)
            let code = try #require(signUp.redirectParameters["code"])
            let tokens = try await driver.redeem(h, attempt: attempt, code: code).json
            _ = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [
                    ("grant_type", "client_credentials"), ("client_id", h.webClientID), ("client_secret", h.webSecret),
                    ("scope", "https://\(h.tenant.name)/tasks/.default"),
                ])

            let reset = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            _ = try await driver.submit(reset, [("step", "send"), ("email", "logger@example.com")])
            let resetBody = try #require(try await h.server.outbox(tenantID: h.tenant.id).first?.body)
            let resetCode = try #require(resetBody.split(whereSeparator: { !$0.isNumber }).first { $0.count == 6 }.map(String.init))

            let log = recorder.text
            #expect(!log.isEmpty)
            // As a number of its own (six digits can occur inside a longer one, such as a timestamp).
            #expect(log.range(of: "(?<![0-9])\(resetCode)(?![0-9])", options: .regularExpression) == nil, "a reset code reached the log")
            let secrets: [String] = [
                password, "Wrong-Secret-Pw2", code, h.webSecret, attempt.pkce.verifier,
                ropc["refresh_token"] as! String, ropc["access_token"] as! String, ropc["id_token"] as! String,
                refresh["refresh_token"] as! String, tokens["access_token"] as! String, tokens["refresh_token"] as! String,
            ]
            for secret in secrets { #expect(!log.contains(secret), "a secret reached the log") }
            #expect(log.contains("correlation_id="))
            #expect(log.contains("sign-in failed: wrong password"))
        }
    }

    @Test(
        "stored secrets are hashes: no refresh token, code, session id, client secret or password in the database",
        arguments: TestDatabase.engines)
    func storedSecretsAreHashed(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            let server = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: database, dataKey: .generate(), logger: TestDatabase.logger)
            let seed = try await server.seedDevelopmentTenant(apiPort: 3000)
            let app = Application(router: server.buildRouter(), logger: TestDatabase.logger)
            let (refresh, code, password) = try await app.test(.router) { client -> (String, String, String) in
                let driver = Driver(client: client)
                let h = IdentityHarness(
                    server: server, clock: ManualClock(), seed: seed, webSecret: seed.webAppSecret ?? "", database: database)
                let password = "Stored-Pass1"
                _ = try await h.addUser("stored@example.com", password: password)
                let refresh = try await driver.ropc(h, username: "stored@example.com", password: password).json["refresh_token"] as! String
                let attempt = AuthorizationAttempt(harness: h)
                let code =
                    try await driver.signIn(h, attempt: attempt, email: "stored@example.com", password: password).redirectParameters["code"]
                    ?? ""
                return (refresh, code, password)
            }
            try await server.shutdown()
            let dump = try await database.read { sql -> String in
                var text = ""
                for table in [
                    "users", "refresh_tokens", "authorization_codes", "sso_sessions", "application_secrets", "authorization_requests",
                ] {
                    let rows = try await sql.raw("SELECT * FROM \(unsafeRaw: table)").all()
                    for row in rows {
                        for column in row.allColumns {
                            if let value = try? row.decode(column: column, as: String?.self) { text += (value ?? "") + "\n" }
                        }
                    }
                }
                return text
            }
            #expect(!dump.isEmpty)
            for secret in [refresh, code, password, seed.webAppSecret ?? "missing"] {
                #expect(!dump.contains(secret), "a secret is stored in clear")
            }
            #expect(
                dump.contains("$2b$04$") || dump.contains("$2a$04$") || dump.contains("$2y$04$"),
                "passwords are bcrypt hashes with their cost")
        }
    }

    @Test("hosted pages send no-store, deny framing and restrict scripts", arguments: TestDatabase.engines)
    func pageHeaders(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            #expect(page.status == .ok)
            #expect(page.headers[.cacheControl] == "no-store")
            #expect(page.headers[.contentSecurityPolicy]?.contains("frame-ancestors 'none'") == true)
            #expect(page.headers[.contentSecurityPolicy]?.contains("script-src 'none'") == true)
            let setCookie = driver.cookies.keys.contains("x-ms-cpim-csrf")
            #expect(setCookie)
        }
    }

    @Test("the SSO cookie is HttpOnly and SameSite=Lax; a hash of its value is what the store keeps", arguments: TestDatabase.engines)
    func ssoCookie(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            let action = try #require(page.formAction)
            let response = try await driver.post(
                action, [("csrf_token", page.field("csrf_token") ?? ""), ("email", "alice@example.com"), ("password", "Passw0rd!")])
            let cookie = try #require(response.headers[values: .setCookie].first { $0.hasPrefix("x-ms-cpim-sso-") })
            #expect(cookie.contains("HttpOnly"))
            #expect(cookie.contains("SameSite=Lax"))
            #expect(!cookie.contains("Secure"), "plain HTTP in this test; Secure is set under TLS")
            // The store keys the session by the value's SHA-256, computed here; the value itself is nowhere.
            let value = String(cookie.split(separator: ";")[0].split(separator: "=", maxSplits: 1)[1])
            let hashes = try await h.database.read { sql in
                try await sql.raw("SELECT id_hash FROM sso_sessions").all(decodingColumn: "id_hash", as: String.self)
            }
            let expected = SHA256.hash(data: Data(value.utf8)).map { String(format: "%02x", $0) }.joined()
            #expect(hashes == [expected])
            #expect(!hashes.contains(value))
        }
    }

    @Test("cookies are Secure under TLS", arguments: TestDatabase.engines)
    func secureCookies(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine, configuration: .init(scheme: "https", passwordHashCost: 4)) { h, driver in
            var attempt = AuthorizationAttempt(harness: h)
            attempt.redirectURI = IdentityHarness.redirect
            let response = try await driver.get(attempt.url(harness: h))
            let cookie = try #require(response.headers[values: .setCookie].first { $0.hasPrefix("x-ms-cpim-csrf=") })
            #expect(cookie.contains("Secure"))
        }
    }

    @Test("an app that allows implicit gets an ID token with nonce and c_hash from /authorize (hybrid)", arguments: TestDatabase.engines)
    func hybrid(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var app = h.seed.publicApp
            app.allowImplicit = true
            try await h.server.tenants.save(app, now: h.clock.now)
            var attempt = AuthorizationAttempt(harness: h)
            attempt.responseType = "code id_token"
            let redirect = try await driver.signIn(h, attempt: attempt, email: "alice@example.com")
            let parameters = redirect.redirectParameters
            #expect(redirect.location?.contains("#") == true, "hybrid responses default to the fragment")
            let code = try #require(parameters["code"])
            let claims = DecodedJWT(try #require(parameters["id_token"])).claims
            #expect(claims["nonce"] as? String == attempt.nonce)
            #expect(claims["c_hash"] as? String == TokenIssuer.halfHash(code))
        }
    }

    @Test("a tenant declared in YAML serves its flows, apps and its own page templates", arguments: TestDatabase.engines)
    func declaredTenant(engine: DatabaseEngine) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("declared-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("pages"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "{{> header}}<p id=\"custom\">Welcome to Fabrikam</p><form method=\"post\" action=\"{{action}}\"></form>{{> footer}}"
            .write(to: directory.appendingPathComponent("pages/signin.mustache"), atomically: true, encoding: .utf8)
        try "body { color: rebeccapurple; }".write(
            to: directory.appendingPathComponent("pages/style.css"), atomically: true, encoding: .utf8)
        let clientID = UUID()
        try """
        tenant: { name: fabrikam.onmicrosoft.com, displayName: Fabrikam, defaultPolicy: B2C_1_signin, pageTemplates: pages }
        userFlows:
          - { name: B2C_1_signin, type: signIn, lifetimes: { accessTokenMinutes: 15 } }
        applications:
          - { name: Fabrikam app, clientId: \(clientID.uuidString), kind: public, redirectUris: ["http://localhost"] }
        """.write(to: directory.appendingPathComponent("tenant.yaml"), atomically: true, encoding: .utf8)
        try await IdentityHarness.run(engine) { h, driver in
            let declaration = try TenantDeclaration.load(path: directory.appendingPathComponent("tenant.yaml").path)
            let tenant = try await declaration.apply(to: h.server.administration, baseDirectory: directory)
            #expect(try await h.server.tenants.defaultTenant()?.id == tenant.id)
            let document = try await driver.get("/fabrikam.onmicrosoft.com/B2C_1_signin/v2.0/.well-known/openid-configuration")
            #expect(document.json["issuer"] as? String == "\(IdentityHarness.origin)/\(tenant.guid)/v2.0/")
            let pkce = PKCEPair()
            let page = try await driver.follow(
                try await driver.get(
                    "/fabrikam.onmicrosoft.com/B2C_1_signin/oauth2/v2.0/authorize?"
                        + Form.encode([
                            ("client_id", clientID.uuidString), ("response_type", "code"), ("redirect_uri", "http://localhost:1234"),
                            ("scope", "openid"), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"),
                        ])))
            #expect(page.text.contains("Welcome to Fabrikam"))
            #expect(page.text.contains("/static/tenants/\(tenant.guid)/style.css"))
            let css = try await driver.get("/static/tenants/\(tenant.guid)/style.css")
            #expect(css.text.contains("rebeccapurple"))
            // Applying the declaration again (every restart does) keeps the tenant's accounts.
            let user = try await h.server.administration.createLocalUser(
                tenantID: tenant.id, email: "kept@fabrikam.com", displayName: "Kept", password: "Kept-Pass1")
            try await h.server.service.consents.grant(["openid"], userID: user.id, clientID: clientID.uuidString, now: Date())
            _ = try await declaration.apply(to: h.server.administration, baseDirectory: directory)
            #expect(try await h.server.users.user(id: user.id) != nil)
            // …and what hangs off its apps: a user's consent survives (the app is updated in place).
            #expect(try await h.server.service.consents.granted(userID: user.id, clientID: clientID.uuidString) == ["openid"])
            // The dev tenant's app is not registered in the declared tenant.
            let foreign = try await driver.get(
                "/fabrikam.onmicrosoft.com/B2C_1_signin/oauth2/v2.0/authorize?client_id=\(h.clientID)&response_type=code&redirect_uri=http://localhost&scope=openid"
            )
            #expect(foreign.text.contains("AADB2C90018"))
        }
    }

    @Test(
        "Facebook is refused in local-only flows, and its callback must come from the browser that started", arguments: TestDatabase.engines
    )
    func federationBoundaries(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            // A local-only flow: going straight to the simulated provider is refused.
            let page = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in"), harness: h)
            let tx = try #require(page.formAction.flatMap { URLComponents(string: $0)?.queryItems?.first { $0.name == "tx" }?.value })
            let callback = "\(IdentityHarness.origin)/\(h.tenant.name)/oauth2/authresp"
            let direct = try await driver.get("/facebook.com/dialog/oauth?" + Form.encode([("state", tx), ("redirect_uri", callback)]))
            #expect(direct.status == .badRequest)
            #expect(direct.text.contains("does not offer Facebook"))

            // A callback link finished in another browser (no CSRF cookie) is refused.
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_facebook")
            let dialog = try await driver.start(attempt, harness: h)
            let back = try await driver.post(
                try #require(dialog.formAction),
                [
                    ("csrf_token", dialog.field("csrf_token") ?? ""), ("email", "fb@example.com"), ("name", "Fb User"),
                    ("state", dialog.field("state") ?? ""), ("redirect_uri", dialog.field("redirect_uri") ?? ""),
                ])
            let link = try #require(back.location)
            let victim = Driver(client: driver.client)
            let refused = try await victim.get(link)
            #expect(refused.status == .forbidden)
            #expect(refused.location == nil)
        }
    }

    @Test(
        "the simulated Facebook is not served behind a balancer, and answers loopback Hosts only (the second outside attack's F-2)")
    func simulatedFacebookMachineLocal() async throws {
        for published in [(proxies: ["127.0.0.1"], origin: String?.none), ([], "https://id.example.com")] {
            var configuration = IdentityServerConfiguration(passwordHashCost: 4, simulatedFacebook: true)
            configuration.trustedProxies = published.proxies
            configuration.publicOrigin = published.origin
            try await IdentityHarness.run(.sqlite, configuration: configuration) { h, driver in
                let dialog = try await driver.get(
                    "/facebook.com/dialog/oauth?state=x&redirect_uri=\(IdentityHarness.origin)/\(h.tenant.name)/oauth2/authresp")
                #expect(dialog.status == .notFound, "\(published)")
                let facebookOnly = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_facebook"), harness: h)
                #expect(
                    (facebookOnly.formAction ?? facebookOnly.location ?? "").contains("pages/signin"),
                    "local accounts instead: \(facebookOnly.status) \(facebookOnly.location ?? "")")
            }
        }
        // Loopback `Host`s only: Hummingbird's test client always sends localhost, so the
        // interop suite's test_host_header.py sends the others to a live server.
    }

    @Test("the simulated Facebook is off unless switched on: no route, no button, domain_hint ignored", arguments: TestDatabase.engines)
    func simulatedFacebookOff(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine, configuration: .init(passwordHashCost: 4)) { h, driver in
            var attempt = AuthorizationAttempt(harness: h)
            attempt.extra = [("domain_hint", "facebook.com")]
            let page = try await driver.start(attempt, harness: h)
            #expect(page.status == .ok)
            #expect(page.formAction?.contains("pages/signin") == true, "the local sign-in page, not Facebook")
            #expect(!page.text.contains("FacebookExchange"))
            let dialog = try await driver.get(
                "/facebook.com/dialog/oauth?state=x&redirect_uri=\(IdentityHarness.origin)/\(h.tenant.name)/oauth2/authresp")
            #expect(dialog.status == .notFound)
            // A Facebook-only flow falls back to local accounts.
            let facebookOnly = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_facebook"), harness: h)
            #expect(facebookOnly.formAction?.contains("pages/signin") == true)
        }
    }

    @Test("switched on, the simulated Facebook says on its page that it is for development only", arguments: TestDatabase.engines)
    func simulatedFacebookWarns(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let dialog = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_facebook"), harness: h)
            #expect(dialog.text.contains("id=\"simulatedWarning\""))
            #expect(dialog.text.contains("Development only"))
        }
    }

    @Test("the sign-in page exists only in flows that sign in", arguments: TestDatabase.engines)
    func signInOnlyWhereItBelongs(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let reset = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            let tx = try #require(reset.formAction.flatMap { URLComponents(string: $0)?.queryItems?.first { $0.name == "tx" }?.value })
            let signInURL = h.path("B2C_1_reset", "pages/signin") + "?tx=\(tx)"
            #expect(try await driver.get(signInURL).status == .notFound)
            let post = try await driver.post(
                signInURL, [("csrf_token", reset.field("csrf_token") ?? ""), ("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(post.location == nil, "no code for a password-reset flow that reset nothing")
        }
    }

    @Test("a new password (what reset, Graph and the CLI all store through) ends SSO sessions elsewhere", arguments: TestDatabase.engines)
    func resetEndsSessions(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            _ = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "alice@example.com")
            var none = AuthorizationAttempt(harness: h)
            none.extra = [("prompt", "none")]
            #expect(try await driver.start(none, harness: h).redirectParameters["code"] != nil)
            try await h.server.users.setPassword(
                id: user.id, hash: try await h.server.hasher.hash("Other-Pass1"), emailProven: false, forceChange: false, now: h.clock.now)
            let after = try await driver.start(none, harness: h)
            #expect(b2cCode(redirect: after) == "AADB2C90077")
        }
    }

    @Test("a code presented by another client is refused and stays usable by its own client", arguments: TestDatabase.engines)
    func codeBinding(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let attempt = AuthorizationAttempt(harness: h)
            let code = try #require(try await driver.signIn(h, attempt: attempt, email: "alice@example.com").redirectParameters["code"])
            let stolen = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [
                    ("grant_type", "authorization_code"), ("client_id", h.webClientID), ("client_secret", h.webSecret), ("code", code),
                    ("redirect_uri", attempt.redirectURI), ("code_verifier", attempt.pkce.verifier),
                ])
            #expect(b2cCode(stolen) == "AADB2C90088")
            let otherPolicy = try await driver.post(
                h.path("B2C_1_sign_in", "oauth2/v2.0/token"),
                [
                    ("grant_type", "authorization_code"), ("client_id", h.clientID), ("code", code), ("redirect_uri", attempt.redirectURI),
                    ("code_verifier", attempt.pkce.verifier),
                ])
            #expect(b2cCode(otherPolicy) == "AADB2C90088")
            #expect(try await driver.redeem(h, attempt: attempt, code: code).status == .ok)
        }
    }

    @Test("URLs and the dev outbox follow the Host header only for allowed host names (DNS rebinding)")
    func allowedHosts() {
        let allowed: Set<String> = ["localhost", "127.0.0.1", "::1"]
        #expect(HostPolicy.isAllowed(authority: "localhost:5080", in: allowed))
        #expect(HostPolicy.isAllowed(authority: "LOCALHOST", in: allowed))
        #expect(HostPolicy.isAllowed(authority: "[::1]:5080", in: allowed))
        #expect(HostPolicy.isAllowed(authority: "127.0.0.1:5080", in: allowed))
        #expect(!HostPolicy.isAllowed(authority: "attacker.example:5080", in: allowed))
        #expect(!HostPolicy.isAllowed(authority: "localhost.attacker.example", in: allowed))
        #expect(!HostPolicy.isAllowed(authority: "localhost:5080/evil", in: allowed))
        #expect(!HostPolicy.isAllowed(authority: "", in: allowed))
        // The port, when given, must be the service's own.
        #expect(HostPolicy.isAllowed(authority: "localhost:5080", in: allowed, port: 5080))
        #expect(HostPolicy.isAllowed(authority: "[::1]:5080", in: allowed, port: 5080))
        #expect(HostPolicy.isAllowed(authority: "localhost", in: allowed, port: 5080))
        #expect(!HostPolicy.isAllowed(authority: "localhost:6666", in: allowed, port: 5080))
        #expect(!HostPolicy.isAllowed(authority: "[::1]:6666", in: allowed, port: 5080))
        #expect(!HostPolicy.isAllowed(authority: "localhost:99999", in: allowed))
        #expect(!HostPolicy.isAllowed(authority: "[::1]x", in: allowed))
    }

    @Test("wrong verification codes count across re-sends", arguments: TestDatabase.engines)
    func verificationAttempts(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let emailStep = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            var codeStep = try await driver.submit(emailStep, [("step", "send"), ("email", "alice@example.com")])
            for _ in 0..<5 { _ = try await driver.submit(codeStep, [("step", "verify"), ("code", "999999x")]) }
            let restart = try await driver.submit(codeStep, [("step", "restart")])
            codeStep = try await driver.submit(restart, [("step", "send"), ("email", "alice@example.com")])
            let code = try #require(
                try await h.server.outbox(tenantID: h.tenant.id).first?.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 6 }
            )
            let blocked = try await driver.submit(codeStep, [("step", "verify"), ("code", String(code))])
            #expect(blocked.text.contains("incorrect"), "the sixth try fails even with the right code")
        }
    }

    /// A new reset attempt for `email` in a new browser: the code page after "send".
    static func resetAttempt(_ h: IdentityHarness, _ driver: Driver, _ email: String) async throws -> TestResponse {
        driver.cookies = [:]
        let emailStep = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
        return try await driver.submit(emailStep, [("step", "send"), ("email", email)])
    }

    @Test(
        "wrong reset and sign-up codes count per address across transactions: past the limit the right code proves nothing until the window has passed (F-3)",
        arguments: TestDatabase.engines)
    func codesPerAddress(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            // Two attempts of 5 wrong codes each: the address's 10 in the window.
            for _ in 0..<2 {
                let codeStep = try await Self.resetAttempt(h, driver, "alice@example.com")
                for _ in 0..<5 { _ = try await driver.submit(codeStep, [("step", "verify"), ("code", "000000")]) }
            }
            let codeStep = try await Self.resetAttempt(h, driver, "alice@example.com")
            let right = try await h.latestCode()
            let throttled = try await driver.submit(codeStep, [("step", "verify"), ("code", right)])
            #expect(throttled.status == .tooManyRequests)
            #expect(throttled.text.contains("too many incorrect attempts"))
            #expect(try await h.server.users.user(id: alice.id)?.passwordHash == alice.passwordHash)
            // Another address is not affected; the window passing frees this one.
            _ = try await h.addUser("bob@example.com")
            let bob = try await Self.resetAttempt(h, driver, "bob@example.com")
            let bobProven = try await driver.submit(bob, [("step", "verify"), ("code", try await h.latestCode())])
            #expect(bobProven.status == .ok && bobProven.text.contains("reenterPassword"), "the new-password step")
            h.clock.advance(by: 3601)
            let later = try await Self.resetAttempt(h, driver, "alice@example.com")
            let proven = try await driver.submit(later, [("step", "verify"), ("code", try await h.latestCode())])
            #expect(proven.status == .ok && proven.text.contains("reenterPassword"), "\(proven.status) \(proven.text.prefix(200))")

            // Sign-up codes count the same way, by canonical address.
            for round in 0..<2 {
                driver.cookies = [:]
                let first = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_sign_up"), harness: h)
                let address = round == 0 ? "new@example.com" : "NEW@Example.com"
                let codePage = try await driver.submit(first, [("step", "send"), ("email", address)])
                for _ in 0..<5 { _ = try await driver.submit(codePage, [("step", "verify"), ("code", "000000")]) }
            }
            driver.cookies = [:]
            let first = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_sign_up"), harness: h)
            let codePage = try await driver.submit(first, [("step", "send"), ("email", "new@example.com")])
            let signUpThrottled = try await driver.submit(codePage, [("step", "verify"), ("code", try await h.latestCode())])
            #expect(signUpThrottled.status == .tooManyRequests)
        }
    }

    @Test(
        "an address is sent at most its share of codes in the window, with or without an account; the outbox keeps a day (F-4)",
        arguments: TestDatabase.engines)
    func sendsPerAddress(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            for email in ["alice@example.com", "nobody@example.com"] {
                let emailStep = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
                var statuses: [HTTPResponse.Status] = []
                for _ in 0..<12 {
                    let sent = try await driver.submit(emailStep, [("step", "send"), ("email", email)])
                    statuses.append(sent.status)
                    if sent.status == .tooManyRequests { #expect(sent.text.contains("too many requests")) }
                }
                // The same answers whether or not the address has an account.
                #expect(statuses == Array(repeating: .ok, count: 10) + [.tooManyRequests, .tooManyRequests], "\(email)")
            }
            #expect(try await h.server.outbox(tenantID: h.tenant.id).count == 10, "mail only to the account, 10 of 12")
            h.clock.advance(by: 86_401)
            try await h.server.service.interactions.sweep(now: h.clock.now)
            #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)
        }
    }
}

@Suite("Protocol rules without a home elsewhere")
struct ProtocolRuleTests {
    @Test("tokens never travel in a query string, and a client authenticates one way only", arguments: TestDatabase.engines)
    func queryAndCredentials(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var app = h.seed.publicApp
            app.allowImplicit = true
            try await h.server.tenants.save(app, now: h.clock.now)
            var attempt = AuthorizationAttempt(harness: h)
            attempt.responseType = "code id_token"
            attempt.extra = [("response_mode", "query")]
            let refused = try await driver.get(attempt.url(harness: h))
            #expect(b2cCode(redirect: refused) == "AADB2C90014")

            let basic = Data("\(h.webClientID):\(h.webSecret)".utf8).base64EncodedString()
            let both = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [("grant_type", "refresh_token"), ("client_secret", h.webSecret), ("refresh_token", "x")],
                headers: [.authorization: "Basic \(basic)"])
            #expect(both.status == .badRequest)
            #expect(both.json["error"] as? String == "invalid_request")
        }
    }
}

@Suite("Signing keys: only published keys verify")
struct KeyRevocationTests {
    @Test("a revoked key leaves the JWKS and verifies nothing more; a new key signs", arguments: TestDatabase.engines)
    func revokedKey(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let graph = try await driver.ropc(
                h, username: "alice@example.com", password: "Passw0rd!", scope: "openid https://graph.microsoft.com/User.Read")
            let token = try #require(graph.json["access_token"] as? String)
            #expect(try await driver.get("/v1.0/me", headers: [.authorization: "Bearer \(token)"]).status == .ok)
            let old = try await h.server.keys.activeKey()

            let replacement = try #require(try await h.server.keys.revoke(kid: old.kid))

            #expect(replacement.kid != old.kid)
            let jwks = try await driver.get(h.path("B2C_1_susi", "discovery/v2.0/keys")).text
            #expect(!jwks.contains(old.kid))
            #expect(jwks.contains(replacement.kid))
            #expect(try await driver.get("/v1.0/me", headers: [.authorization: "Bearer \(token)"]).status == .unauthorized)
            await #expect(throws: SigningKeyRing.KeyRingError.noSuchKey("nope")) { try await h.server.keys.revoke(kid: "nope") }
        }
    }
}

@Suite("Logout by GET needs the session's own ID token")
struct LogoutConfirmationTests {
    @Test("with this session's ID token a GET signs out at once; with another user's it asks first", arguments: TestDatabase.engines)
    func hintDecides(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            _ = try await h.addUser("bob@example.com", name: "Bob")
            let bobsToken = try await driver.ropc(h, username: "bob@example.com", password: "Passw0rd!").json["id_token"] as! String
            let attempt = AuthorizationAttempt(harness: h)
            let code = try #require(try await driver.signIn(h, attempt: attempt, email: "alice@example.com").redirectParameters["code"])
            let alicesToken = try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)
            let logout = h.path("B2C_1_susi", "oauth2/v2.0/logout") + "?post_logout_redirect_uri=\(IdentityHarness.redirect)&id_token_hint="

            let foreign = try await driver.get(logout + bobsToken)
            #expect(foreign.location == nil)
            #expect(foreign.text.contains("id=\"confirmSignOut\""))
            let own = try await driver.get(logout + alicesToken)
            #expect(own.location == IdentityHarness.redirect)
            var none = AuthorizationAttempt(harness: h)
            none.extra = [("prompt", "none")]
            #expect(try await b2cCode(redirect: driver.start(none, harness: h)) == "AADB2C90077")
        }
    }
}

extension LogoutConfirmationTests {
    @Test(
        "an ID token from the tenant's Entra face is a hint too: it signs its own session out and vouches for its app's return URI",
        arguments: TestDatabase.engines)
    func entraHint(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let idToken = try #require(try await EntraFaceTests.consentedTokens(h, driver)["id_token"] as? String)
            // Before: one of the hint's two checks knew only B2C's issuer, and the return URI was
            // refused (AADB2C90067) for an Entra hint that the other check accepted.
            let logout = "/\(h.tenant.guid)/oauth2/v2.0/logout?post_logout_redirect_uri=\(IdentityHarness.redirect)&id_token_hint="
            let done = try await driver.get(logout + idToken)
            #expect(done.location == IdentityHarness.redirect, "\(done.status) \(done.text.prefix(300))")
            #expect(done.headers[values: .setCookie].contains { $0.hasPrefix("x-ms-cpim-sso-") && $0.contains("Max-Age=0") }, "\(done.headers)")
        }
    }
}

@Suite("Stored sign-in transactions are bounded")
struct TransactionBoundTests {
    @Test("an oversized value is refused before anything is stored", arguments: TestDatabase.engines)
    func oversized(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var attempt = AuthorizationAttempt(harness: h)
            attempt.state = String(repeating: "s", count: 5000)
            let refused = try await driver.get(attempt.url(harness: h))
            #expect(b2cCode(redirect: refused) == "AADB2C90037")
            let stored = try await h.transactionCount()
            #expect(stored == 0)
        }
    }

    @Test("one client address starts at most the configured number of sign-ins an hour", arguments: TestDatabase.engines)
    func perAddress(engine: DatabaseEngine) async throws {
        var configuration = IdentityServerConfiguration(passwordHashCost: 4, simulatedFacebook: true)
        configuration.transactionsPerAddressPerHour = 3
        try await IdentityHarness.run(engine, configuration: configuration) { h, driver in
            for _ in 0..<3 { #expect(try await driver.start(AuthorizationAttempt(harness: h), harness: h).status == .ok) }
            let fourth = try await driver.get(AuthorizationAttempt(harness: h).url(harness: h))
            #expect(fourth.status == .tooManyRequests)
            #expect(try await h.transactionCount() == 3)
            h.clock.advance(by: 3601)
            #expect(try await driver.start(AuthorizationAttempt(harness: h), harness: h).status == .ok, "an hour later it may again")
        }
    }
}

extension SecurityTests {
    @Test(
        "every hosted page answers only the browser that started the sign-in: a ?tx= link alone shows nothing (F-9)",
        arguments: TestDatabase.engines)
    func pagesBoundToBrowser(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            // A reset under way: the code page names the address being reset.
            let emailStep = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            let codeStep = try await driver.submit(emailStep, [("step", "send"), ("email", "alice@example.com")])
            #expect(codeStep.text.contains("alice@example.com"))
            let resetURL = try #require(codeStep.formAction.map(Form.unescapeHTML))
            // A profile edit under way, signed in.
            let profileAttempt = AuthorizationAttempt(harness: h, policy: "B2C_1_edit_profile")
            let profile = try await driver.signIn(h, attempt: profileAttempt, email: "alice@example.com")
            #expect(profile.text.contains("Alice"), "\(profile.status) \(profile.text.prefix(200))")
            let profileURL = try #require(profile.formAction.map(Form.unescapeHTML))

            let stranger = Driver(client: driver.client)
            for url in [resetURL, profileURL] {
                let page = try await stranger.get(url)
                #expect(page.status == .forbidden, "\(url): \(page.status)")
                #expect(!page.text.contains("alice@example.com") && !page.text.contains("value=\"Alice\""))
            }
            // Another browser's cookie is not this one's either.
            let other = Driver(client: driver.client)
            _ = try await other.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            #expect(try await other.get(resetURL).status == .forbidden)
            // The starting browser still gets its pages.
            #expect(try await driver.get(resetURL).status == .ok)
        }
    }
}
