import CryptoExtras
import Foundation
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
@testable import UserJourneys
import WireCoding

@testable import IdentityServer

@Suite("Protocol pieces in isolation")
struct UnitTests {
    @Test("URLs written back keep the shape the request used")
    func routeURLs() {
        let path = PolicyRoute(tenantSegment: "c", policy: "B2C_1_a", placement: .path)
        #expect(path.url(origin: "https://h:1", for: .token) == "https://h:1/c/B2C_1_a/oauth2/v2.0/token")
        let query = PolicyRoute(tenantSegment: "contoso.onmicrosoft.com", policy: "b2c_1_x", placement: .query)
        #expect(query.url(origin: "https://h", for: .keys) == "https://h/contoso.onmicrosoft.com/discovery/v2.0/keys?p=b2c_1_x")
        let tfp = PolicyRoute(tenantSegment: "c", policy: "B2C_1A_custom", placement: .tfp)
        #expect(tfp.url(origin: "https://h", for: .page(.signIn)) == "https://h/tfp/c/B2C_1A_custom/pages/signin")
        let none = PolicyRoute(tenantSegment: "common", policy: nil, placement: .none)
        #expect(none.url(origin: "https://h", for: .logout) == "https://h/common/oauth2/v2.0/logout")
        #expect(path.url(origin: "https://h", for: .federationCallback(provider: nil)) == "https://h/c/oauth2/authresp")
        #expect(path.url(origin: "https://h", for: .federationCallback(provider: "Corp-IdP")) == "https://h/c/oauth2/authresp/corp-idp")
    }

    @Test("policy names follow passport-azure-ad's rule")
    func policyNames() {
        #expect(UserFlow.isValidName("B2C_1_susi"))
        #expect(UserFlow.isValidName("b2c_1a_Sign.In-v2"))
        #expect(!UserFlow.isValidName("B2C_1_"))
        #expect(!UserFlow.isValidName("susi"))
        #expect(!UserFlow.isValidName("B2C_1_a/b"))
        #expect(!UserFlow.isValidName("B2C_1_é"))
    }

    @Test("error descriptions and redirects are byte-for-byte B2C's format")
    func errorWireFormat() {
        let date = Date(timeIntervalSince1970: 1_627_900_508)  // 2021-08-02 10:35:08Z
        let text = ProtocolFailure.forgotPassword(loginHint: nil).errorDescription(correlationID: "9cf9ee35-db9c-40e1-9958-4b758492421a", at: date)
        #expect(
            text
                == "AADB2C90118: The user has forgotten their password.\r\nCorrelation ID: 9cf9ee35-db9c-40e1-9958-4b758492421a\r\nTimestamp: 2021-08-02 10:35:08Z\r\n"
        )
        let response = RedirectResponder.error(
            .forgotPassword(loginHint: nil), redirectURI: "http://localhost:3000/callback", mode: .fragment, state: "313027",
            correlationID: "9cf9ee35-db9c-40e1-9958-4b758492421a", now: date)
        // The capture in https://github.com/AzureAD/microsoft-authentication-library-for-dotnet/issues/1881
        #expect(
            response.headers[.location]
                == "http://localhost:3000/callback#error=access_denied&error_description=AADB2C90118%3a+The+user+has+forgotten+their+password.%0d%0aCorrelation+ID%3a+9cf9ee35-db9c-40e1-9958-4b758492421a%0d%0aTimestamp%3a+2021-08-02+10%3a35%3a08Z%0d%0a&state=313027"
        )
    }

    @Test("form encoding round-trips and escapes like B2C")
    func formEncoding() {
        let pairs = [("a b", "c&d=e"), ("emoji", "✓"), ("plus", "1+1")]
        let encoded = FormEncoding.encode(pairs)
        #expect(encoded == "a+b=c%26d%3de&emoji=%e2%9c%93&plus=1%2b1")
        let decoded = FormEncoding.decode(encoded)
        #expect(decoded.map(\.0) == pairs.map(\.0))
        #expect(decoded.map(\.1) == pairs.map(\.1))
    }

    @Test("smart lockout durations grow every 10 lockouts and cap at 5 hours")
    func lockoutDurations() {
        let policy = LockoutPolicy.default
        #expect(policy.lockoutDuration(forLockout: 1) == 60)
        #expect(policy.lockoutDuration(forLockout: 10) == 60)
        #expect(policy.lockoutDuration(forLockout: 11) == 120)
        #expect(policy.lockoutDuration(forLockout: 21) == 240)
        #expect(policy.lockoutDuration(forLockout: 500) == 5 * 3600)
        let now = Date(timeIntervalSince1970: 0)
        var state = LockoutState()
        for attempt in 1...9 { state = policy.afterFailure(state, fingerprint: "f\(attempt)", now: now) }
        #expect(!state.isLocked(at: now))
        state = policy.afterFailure(state, fingerprint: "f9", now: now)
        #expect(!state.isLocked(at: now), "the same wrong password again does not count")
        state = policy.afterFailure(state, fingerprint: "f10", now: now)
        #expect(state.isLocked(at: now))
        #expect(!state.isLocked(at: now.addingTimeInterval(60)))
        #expect(policy.afterSuccess(state) == LockoutState())
    }

    @Test("PKCE verification (RFC 7636 appendix B vector)")
    func pkce() throws {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        try PKCE.verify(verifier: verifier, challenge: challenge, method: .s256)
        #expect(throws: ProtocolFailure.verifierMismatch) { try PKCE.verify(verifier: verifier + "x", challenge: challenge, method: .s256) }
        #expect(throws: ProtocolFailure.verifierInvalid) { try PKCE.verify(verifier: "short", challenge: challenge, method: .s256) }
        #expect(throws: ProtocolFailure.verifierInvalid) { try PKCE.verify(verifier: nil, challenge: challenge, method: .s256) }
        #expect(throws: ProtocolFailure.verifierInvalid) { try PKCE.verify(verifier: verifier, challenge: nil, method: nil) }
        try PKCE.verify(verifier: nil, challenge: nil, method: nil)
    }

    @Test("password complexity follows B2C's 'strong' rule and bcrypt's 72-byte limit")
    func passwords() {
        #expect(PasswordPolicy.problem(with: "Passw0rd") == nil)
        #expect(PasswordPolicy.problem(with: "password!1") == nil)
        #expect(PasswordPolicy.problem(with: "Pw1!") != nil)
        #expect(PasswordPolicy.problem(with: "onlylowercase") != nil)
        #expect(PasswordPolicy.problem(with: String(repeating: "Aa1!", count: 17)) != nil)
        #expect(PasswordPolicy.problem(with: String(repeating: "é", count: 37) + "A1") != nil, "over 72 UTF-8 bytes")
    }

    @Test("scope resolution")
    func scopes() throws {
        let tenant = UUID()
        let api = AppRegistration(
            clientID: UUID(), tenantID: tenant, displayName: "api", kind: .public, redirectURIs: [],
            appIDURI: "https://contoso.onmicrosoft.com/api", exposedScopes: ["tasks.read", "tasks.write"])
        var client = AppRegistration(clientID: UUID(), tenantID: tenant, displayName: "c", kind: .public, redirectURIs: [])
        client.apiPermissions = [APIPermission(resource: api.clientIDString, scopes: ["tasks.read", "tasks.write"])]
        let both = try GrantedScopes.resolve(
            ["https://contoso.onmicrosoft.com/api/tasks.read", "https://contoso.onmicrosoft.com/api/TASKS.WRITE", "openid", "profile"],
            client: client, tenantApps: [api, client])
        #expect(both.resource == TokenResource(audience: api.clientIDString, scopeNames: ["tasks.read", "tasks.write"]))
        #expect(both.openID)
        #expect(!both.offlineAccess)
        let trick = try GrantedScopes.resolve([client.clientIDString.uppercased()], client: client, tenantApps: [api, client])
        #expect(trick.resource == TokenResource(audience: client.clientIDString, scopeNames: []))
        #expect(throws: ProtocolFailure.self) { try GrantedScopes.resolve(["https://other.example/x"], client: client, tenantApps: [api]) }
        let partial = try GrantedScopes.resolve(["openid", "https://other.example/x"], client: client, tenantApps: [api])
        #expect(partial.granted == ["openid"])
    }

    @Test("API scopes only as far as the app's API permissions go (AADB2C90205); partial grants keep the held ones")
    func apiPermissions() throws {
        let tenant = UUID()
        let api = AppRegistration(
            clientID: UUID(), tenantID: tenant, displayName: "payroll", kind: .public, redirectURIs: [],
            appIDURI: "https://contoso.onmicrosoft.com/payroll", exposedScopes: ["payroll.read", "payroll.admin"])
        var game = AppRegistration(clientID: UUID(), tenantID: tenant, displayName: "game", kind: .public, redirectURIs: [])
        let apps = [api, game]
        // No permission at all: refused, with or without openid.
        #expect(throws: ProtocolFailure.insufficientPermissions) {
            try GrantedScopes.resolve(["openid", "https://contoso.onmicrosoft.com/payroll/payroll.admin"], client: game, tenantApps: apps)
        }
        #expect(throws: ProtocolFailure.insufficientPermissions) {
            try GrantedScopes.resolve(["https://contoso.onmicrosoft.com/payroll/.default"], client: game, tenantApps: apps)
        }
        #expect(throws: ProtocolFailure.insufficientPermissions) {
            try GrantedScopes.resolve(["openid", "User.Read"], client: game, tenantApps: apps)
        }
        // Granted payroll.read only: asking for both gets read (B2C's partial grant).
        game.apiPermissions = [
            APIPermission(resource: api.clientIDString, scopes: ["payroll.read"]),
            APIPermission(resource: APIPermission.graphResource, scopes: ["User.Read"]),
        ]
        let partial = try GrantedScopes.resolve(
            ["https://contoso.onmicrosoft.com/payroll/payroll.read", "https://contoso.onmicrosoft.com/payroll/payroll.admin"],
            client: game, tenantApps: apps)
        #expect(partial.resource?.scopeNames == ["payroll.read"])
        #expect(partial.granted == ["https://contoso.onmicrosoft.com/payroll/payroll.read"])
        let all = try GrantedScopes.resolve(["https://contoso.onmicrosoft.com/payroll/.default"], client: game, tenantApps: apps)
        #expect(all.resource?.scopeNames == ["payroll.read"])
        #expect(try GrantedScopes.resolve(["User.Read"], client: game, tenantApps: apps).resource?.audience == APIPermission.graphResource)
        // App-only: .default needs roles.
        #expect(throws: ProtocolFailure.insufficientPermissions) {
            try GrantedScopes.resolve(["https://contoso.onmicrosoft.com/payroll/.default"], client: game, tenantApps: apps, appOnly: true)
        }
    }

    @Test("a refresh asks for the original grant or less: the sign-in's scopes and the permissions consented then (RFC 6749 §6)")
    func refreshWithinGrant() throws {
        let tenant = UUID()
        let api = AppRegistration(
            clientID: UUID(), tenantID: tenant, displayName: "api", kind: .public, redirectURIs: [],
            appIDURI: "https://contoso.onmicrosoft.com/tasks", exposedScopes: ["tasks.read", "tasks.write"])
        var client = AppRegistration(clientID: UUID(), tenantID: tenant, displayName: "c", kind: .public, redirectURIs: [])
        client.apiPermissions = [
            APIPermission(resource: api.clientIDString, scopes: ["tasks.read"]),
            APIPermission(resource: APIPermission.graphResource, scopes: ["User.Read"]),
        ]
        let apps = [api, client]
        let family = RefreshTokenFamily(
            id: "f", tenantID: tenant, clientID: client.clientIDString, userID: UUID(), policy: "B2C_1_susi",
            scopes: ["https://contoso.onmicrosoft.com/tasks/tasks.read", "offline_access"], authTime: Date(), identityProvider: .local,
            createdAt: Date(), consented: client.apiPermissions)
        try GrantedScopes.checkRefresh([], family: family, client: client, tenantApps: apps)
        try GrantedScopes.checkRefresh(
            ["https://contoso.onmicrosoft.com/tasks/TASKS.READ", "profile"], family: family, client: client, tenantApps: apps)
        // Another consented API: allowed on the Entra face (its refresh tokens are multi-resource),
        // never on a B2C policy, whose refresh tokens stay with the sign-in's scopes.
        var entraFamily = family
        entraFamily.face = .entra
        try GrantedScopes.checkRefresh(["User.Read"], family: entraFamily, client: client, tenantApps: apps)
        #expect(throws: ProtocolFailure.scopeBeyondGrant("User.Read")) {
            try GrantedScopes.checkRefresh(["User.Read"], family: family, client: client, tenantApps: apps)
        }
        // Never consented, or consented only after the sign-in: refused.
        #expect(throws: ProtocolFailure.scopeBeyondGrant("https://contoso.onmicrosoft.com/tasks/tasks.write")) {
            try GrantedScopes.checkRefresh(
                ["https://contoso.onmicrosoft.com/tasks/tasks.write"], family: family, client: client, tenantApps: apps)
        }
        var later = client
        later.apiPermissions[0].scopes.append("tasks.write")
        #expect(throws: ProtocolFailure.scopeBeyondGrant("https://contoso.onmicrosoft.com/tasks/tasks.write")) {
            try GrantedScopes.checkRefresh(
                ["https://contoso.onmicrosoft.com/tasks/tasks.write"], family: family, client: later, tenantApps: apps)
        }
        // Withdrawn since: refused even though the sign-in had it.
        var withdrawn = client
        withdrawn.apiPermissions = []
        #expect(throws: ProtocolFailure.scopeBeyondGrant("https://contoso.onmicrosoft.com/tasks/tasks.read")) {
            try GrantedScopes.checkRefresh([], family: family, client: withdrawn, tenantApps: apps)
        }
        #expect(throws: ProtocolFailure.scopeBeyondGrant("openid")) {
            try GrantedScopes.checkRefresh(["openid"], family: family, client: client, tenantApps: apps)
        }
    }

    @Test("loopback redirects match any port for public clients only; everything else is exact")
    func redirects() {
        var app = AppRegistration(
            clientID: UUID(), tenantID: UUID(), displayName: "a", kind: .public,
            redirectURIs: ["http://localhost", "http://127.0.0.1/cb", "msauth.com.x://auth"])
        #expect(app.isRegisteredRedirect("http://localhost:1234"))
        #expect(app.isRegisteredRedirect("http://localhost:1234/"))
        #expect(app.isRegisteredRedirect("http://127.0.0.1:9/cb"))
        #expect(!app.isRegisteredRedirect("http://127.0.0.1:9/cb/extra"))
        #expect(!app.isRegisteredRedirect("https://localhost:1234"))
        #expect(!app.isRegisteredRedirect("http://user@localhost:1234"))
        #expect(app.isRegisteredRedirect("msauth.com.x://auth"))
        #expect(!app.isRegisteredRedirect("msauth.com.x://auth/"))
        app.kind = .confidential
        #expect(!app.isRegisteredRedirect("http://localhost:1234"))
    }

    @Test("JSON text escapes control characters and quotes")
    func jsonText() {
        let value = JSONText.object([("a\"b", .string("line\nbreak\u{1}")), ("n", .int(-3)), ("x", .null), ("l", .array([.bool(true)]))])
        #expect(value.serialized == "{\"a\\\"b\":\"line\\nbreak\\u0001\",\"n\":-3,\"x\":null,\"l\":[true]}")
        let parsed = try? JSONSerialization.jsonObject(with: Data(value.serialized.utf8)) as? [String: Any]
        #expect(parsed?["a\"b"] as? String == "line\nbreak\u{1}")
    }

    @Test("a tenant file that is not YAML, misses a key or mistypes one is refused in one line naming the place")
    func tenantDeclarationSyntax() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tenant-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            ("tenant: [unclosed\n", "line 2, column 1: did not find expected ',' or ']'"),
            ("userFlows: []\napplications: []\n", "'tenant' is missing"),
            ("tenant: { name: c.onmicrosoft.com }\nuserFlows: 5\napplications: []\n", "'userFlows' should be"),
        ]
        for (index, (text, expected)) in cases.enumerated() {
            let file = directory.appendingPathComponent("case\(index).yaml")
            try text.write(to: file, atomically: true, encoding: .utf8)
            do {
                _ = try TenantDeclaration.load(path: file.path)
                Issue.record("case \(index) was accepted")
            } catch {
                let message = "\(error)"
                #expect(message.contains(expected), "\(message)")
                #expect(message.contains(file.path))
                #expect(!message.contains("\n"), "one line: \(message)")
            }
        }
        #expect(throws: TenantDeclaration.DeclarationError.self) {
            try TenantDeclaration.load(path: directory.appendingPathComponent("none.yaml").path)
        }
    }

    @Test("a YAML tenant declaration with problems names all of them")
    func tenantDeclaration() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tenant-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bad = directory.appendingPathComponent("bad.yaml")
        try """
        tenant: { name: contoso, defaultPolicy: B2C_1_missing }
        userFlows:
          - { name: susi, type: signUpOrSignIn }
        applications:
          - { name: Web, kind: confidential }
          - { name: Native, kind: public, pkce: sometimes, userFlow: B2C_1_elsewhere }
        """.write(to: bad, atomically: true, encoding: .utf8)
        do {
            _ = try TenantDeclaration.load(path: bad.path)
            Issue.record("an invalid declaration loaded")
        } catch let error as TenantDeclaration.DeclarationError {
            let text = error.description
            #expect(text.contains("tenant.name"))
            #expect(text.contains("'susi'"))
            #expect(text.contains("defaultPolicy"))
            #expect(text.contains("needs at least one secret"))
            #expect(text.contains("application 'Native': pkce must be required or optional, not 'sometimes'"))
            #expect(text.contains("application 'Native': userFlow 'B2C_1_elsewhere' is not one of the user flows"))
        }
        let good = directory.appendingPathComponent("good.yaml")
        try """
        tenant: { name: contoso.onmicrosoft.com, displayName: Contoso, defaultPolicy: B2C_1_susi }
        userFlows:
          - name: B2C_1_susi
            type: signUpOrSignIn
            identityProviders: [local, facebook.com]
            signUpAttributes: [displayName, city]
            lifetimes: { accessTokenMinutes: 30, refreshTokenDays: 7 }
        applications:
          - { name: App, kind: public, redirectUris: [http://localhost], allowPublicClientFlows: true, pkce: required, userFlow: b2c_1_SUSI }
        """.write(to: good, atomically: true, encoding: .utf8)
        _ = try TenantDeclaration.load(path: good.path)
    }
}

@Suite("The SSO cookie's list of sessions")
struct SSOCookieValueTests {
    @Test("keeps at most five well-formed session ids, current first; anything else in the cookie is dropped")
    func parsing() {
        let ids = (0..<7).map { _ in Secrets.randomToken() }
        #expect(SSOCookieValue.ids(SSOCookieValue.value(ids)) == Array(ids.prefix(5)))
        #expect(SSOCookieValue.ids(ids[0] + ".short." + String(repeating: "!", count: 43) + "." + ids[1]) == [ids[0], ids[1]])
        #expect(SSOCookieValue.ids(nil).isEmpty && SSOCookieValue.ids("").isEmpty)
        // Only the first five entries are read, so a long cookie cannot make the server look up more.
        let padded = Array(repeating: "x", count: 5) + [ids[2]]
        #expect(SSOCookieValue.ids(padded.joined(separator: ".")).isEmpty)
    }
}

@Suite("Tenant directory cache")
struct TenantCacheTests {
    @Test("lookups of request-supplied names that miss cannot grow the cache without bound")
    func bounded() async throws {
        try await TestDatabase.with(.sqlite) { database in
            let server = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: database, dataKey: .generate(), logger: TestDatabase.logger)
            _ = try await server.seedDevelopmentTenant(apiPort: 3000)
            let cache = CachedTenantDirectory(SQLTenantDirectory(database: database))
            for index in 0..<(CachedTenantDirectory.capacity + 500) {
                #expect(try await cache.tenant(matching: "nobody-\(index).onmicrosoft.com") == nil)
            }
            #expect(cache.count <= CachedTenantDirectory.capacity)
            #expect(try await cache.tenant(matching: DevTenant.name)?.name == DevTenant.name)
            try await server.shutdown()
        }
    }
}

@Suite("Form decoding")
struct FormDecodingTests {
    @Test(
        "names and values decode as the URL Standard's urlencoded parser does: + is space, %XX a byte, a stray % stays, bad UTF-8 is U+FFFD"
    )
    func urlStandard() {
        let cases: [(String, String)] = [
            ("", ""), ("a", "a"), ("a+b", "a b"), ("a%20b", "a b"), ("%E2%9C%93", "✓"), ("%e2%9c%93", "✓"), ("%2B", "+"),
            ("a+b%2Bc%26", "a b+c&"), ("%zz", "%zz"), ("a+%zz", "a %zz"), ("%", "%"), ("%4", "%4"), ("100%", "100%"),
            ("%E2%9C%93%zz", "✓%zz"), ("%C3", "\u{FFFD}"), ("%C3%A9", "é"), ("%a9x", "\u{FFFD}x"), ("%00", "\u{0}"), ("é+é", "é é"),
        ]
        for (text, expected) in cases { #expect(FormEncoding.unescape(text[...]) == expected, "\(text)") }
        // A whole body, and Basic credentials (RFC 6749 §2.3.1 form-encodes them first).
        #expect(
            FormEncoding.decode("grant_type=refresh_token&scope=openid+offline_access&x=%3D%26").map { $0.1 } == [
                "refresh_token", "openid offline_access", "=&",
            ])
    }
}

@Suite("Bounded thread pools (bcrypt, custom-policy patterns)")
struct BoundedThreadPoolTests {
    @Test("past its bound a call is refused at once, not queued; the pool works again once the work is done")
    func refusesPastTheBound() async throws {
        let pool = BoundedThreadPool(threads: 1, maximumQueued: 1)
        let release = DispatchSemaphore(value: 0)
        let (started, startedSignal) = AsyncStream.makeStream(of: Void.self)
        let running = Task {
            try await pool.run {
                startedSignal.yield()
                release.wait()
                return 1
            }
        }
        for await _ in started { break }
        await #expect(throws: BoundedThreadPool.Busy.self) { _ = try await pool.run { 2 } }
        release.signal()
        #expect(try await running.value == 1)
        #expect(try await pool.run { 3 } == 3)
        try await pool.shutdown()
    }
}
