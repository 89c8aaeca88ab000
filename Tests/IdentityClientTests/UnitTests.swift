import Foundation
import Synchronization
import Testing
import WireCoding

@testable import IdentityClientCore
import IdentityClient

@Suite("IdentityClient units")
struct IdentityClientUnitTests {
    @Test("authorities: B2C path, tfp, query and tenant-only forms, plain issuers, and refusals")
    func authorities() throws {
        let path = try Authority("https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi")
        #expect(path.kind == .b2c(tenant: "contoso.onmicrosoft.com", policy: "B2C_1_susi"))
        #expect(
            try path.discoveryURL().absoluteString
                == "https://contoso.b2clogin.com/contoso.onmicrosoft.com/B2C_1_susi/v2.0/.well-known/openid-configuration")
        let tfp = try Authority("https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_sign_in/")
        #expect(tfp.kind == .b2c(tenant: "contoso.onmicrosoft.com", policy: "B2C_1_sign_in"))
        let query = try Authority("https://contoso.b2clogin.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize?p=B2C_1A_signup_signin")
        #expect(query.policy == "B2C_1A_signup_signin")
        let local = try Authority("http://127.0.0.1:5080/todob2c.onmicrosoft.com/")
        #expect(local.kind == .b2c(tenant: "todob2c.onmicrosoft.com", policy: nil))
        // Without a user flow: the tenant's Entra face (External ID's discovery, no policy segment).
        #expect(try local.discoveryURL().absoluteString == "http://127.0.0.1:5080/todob2c.onmicrosoft.com/v2.0/.well-known/openid-configuration")
        #expect(try Authority("http://127.0.0.1:5080/todob2c.onmicrosoft.com/B2C_1_susi").tenantOnly == local)
        #expect(local.with(policy: "B2C_1_reset").url == "http://127.0.0.1:5080/todob2c.onmicrosoft.com/B2C_1_reset")
        #expect(local.environment == "127.0.0.1:5080")
        let guid = try Authority("https://login.example.com/2f3e71ec-0de4-4ba3-a3b3-283a88f5e15d/B2C_1_susi")
        #expect(guid.policy == "B2C_1_susi")

        let issuer = try Authority("https://accounts.example.com/realms/demo")
        #expect(issuer.kind == .issuer)
        #expect(try issuer.discoveryURL().absoluteString == "https://accounts.example.com/realms/demo/.well-known/openid-configuration")
        #expect(issuer.with(policy: "B2C_1_x") == issuer)

        for bad in [
            "http://contoso.example.com/contoso.onmicrosoft.com/B2C_1_susi", "not a url", "/relative/B2C_1_susi", "ftp://x/y",
            "http://127.evil.example/contoso.onmicrosoft.com/B2C_1_susi", "http://127.0.0.1.nip.io/t.onmicrosoft.com/B2C_1_susi",
        ] {
            #expect(throws: IdentityError.self, "\(bad)") { try Authority(bad) }
        }
        #expect(throws: Never.self) { try Authority("http://localhost:8080/t.onmicrosoft.com/B2C_1_a") }
    }

    @Test("PKCE S256 matches RFC 7636 Appendix B, and fresh verifiers are 43 random characters")
    func pkce() {
        let known = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(known.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(known.method == "S256")
        let verifiers = Set((0..<100).map { _ in PKCE().verifier })
        #expect(verifiers.count == 100)
        #expect(verifiers.allSatisfy { $0.count == 43 && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" } })
    }

    @Test("OAuth errors keep B2C's code and correlation id and map to typed cases")
    func errors() {
        let description =
            "AADB2C90118: The user has forgotten their password.\r\nCorrelation ID: 0f8fad5b-d9cb-469f-a165-70867728950e\r\nTimestamp: 2026-11-22 03:00:00Z\r\n"
        #expect(IdentityError.fromOAuth(error: "access_denied", description: description) == .passwordResetRequested)
        #expect(
            IdentityError.fromOAuth(
                error: "access_denied", description: "AADB2C90091: The user has cancelled entering self-asserted information.")
                == .userCanceled)
        let expired = IdentityError.fromOAuth(
            error: "invalid_grant", description: description.replacingOccurrences(of: "90118", with: "90080"))
        #expect(
            expired
                == .interactionRequired(
                    reason: "AADB2C90080: The user has forgotten their password.", code: "AADB2C90080",
                    correlationID: "0f8fad5b-d9cb-469f-a165-70867728950e"))
        let other = IdentityError.fromOAuth(error: "invalid_request", description: "AADB2C90117: The scope 'x' is not supported.")
        #expect(other.b2cCode == "AADB2C90117")
        #expect(other.description == "AADB2C90117: The scope 'x' is not supported.")
    }

    @Test("token responses: expires_in as number or string; scopes keyed without the OpenID ones")
    func responses() throws {
        func parse(_ json: String, status: Int = 200) throws -> TokenResponse {
            try TokenResponse.parse(TransportResponse(status: status, headers: [:], body: Data(json.utf8)), requestCorrelationID: "c")
        }
        #expect(try parse(#"{"access_token":"a","expires_in":3600}"#).expiresIn == 3600)
        #expect(try parse(#"{"access_token":"a","expires_in":"3599"}"#).expiresIn == 3599)
        #expect(throws: IdentityError.self) { try parse("<html>", status: 200) }
        #expect {
            try parse(#"{"error":"invalid_grant","error_description":"AADB2C90129: The provided grant has been revoked."}"#, status: 400)
        } throws: { error in
            guard case IdentityError.interactionRequired(_, let code, let correlation) = error else { return false }
            return code == "AADB2C90129" && correlation == "c"
        }
        #expect(Scopes.key(["openid", "Tasks.Read", "offline_access", "tasks.read", "B"]) == ["b", "tasks.read"])
        #expect(Scopes.request(["api", "openid", "api"]) == "openid offline_access api")
    }

    @Test("ID tokens: username falls back to emails[0]; issuer, audience, expiry and nonce are checked")
    func idTokens() throws {
        let now = Date()
        func token(_ claims: [String: Any]) -> String {
            let header = Base64URL.encode(#"{"alg":"RS256","typ":"JWT"}"#)
            let body = Base64URL.encode(try! JSONSerialization.data(withJSONObject: claims))
            return "\(header).\(body).c2ln"
        }
        let base: [String: Any] = [
            "iss": "https://id.example/t/v2.0/", "aud": "client", "exp": now.timeIntervalSince1970 + 600,
            "iat": now.timeIntervalSince1970, "nonce": "n1", "emails": ["ann@example.com"], "name": "Ann", "sub": "s",
        ]
        let good = try IDToken(token(base))
        #expect(good.username == "ann@example.com")
        try good.validate(issuer: "https://id.example/t/v2.0/", clientID: "client", nonce: "n1", now: now)
        #expect(throws: IdentityError.self) { try good.validate(issuer: "https://other/", clientID: "client", nonce: "n1", now: now) }
        #expect(throws: IdentityError.self) {
            try good.validate(issuer: "https://id.example/t/v2.0/", clientID: "x", nonce: "n1", now: now)
        }
        #expect(throws: IdentityError.nonceMismatch) {
            try good.validate(issuer: "https://id.example/t/v2.0/", clientID: "client", nonce: "n2", now: now)
        }
        #expect(throws: IdentityError.self) {
            try good.validate(issuer: "https://id.example/t/v2.0/", clientID: "client", nonce: "n1", now: now.addingTimeInterval(3600))
        }
        #expect(throws: IdentityError.self) { try IDToken("not.a-jwt") }
        var future = base
        future["iat"] = now.timeIntervalSince1970 + 3600  // issued an hour from now: beyond the 5-minute skew
        #expect(throws: IdentityError.self) {
            try IDToken(token(future)).validate(issuer: "https://id.example/t/v2.0/", clientID: "client", nonce: "n1", now: now)
        }
        var preferred = base
        preferred["preferred_username"] = "ann@contoso"
        preferred["email_verified"] = true
        preferred["zero"] = 0
        preferred["one"] = 1
        preferred["nested"] = ["list": [1.5, "x", false], "none": NSNull()] as [String: Any]
        let typed = try IDToken(token(preferred))
        #expect(typed.username == "ann@contoso")
        #expect(typed["email_verified"] == .bool(true))
        #expect(typed["zero"] == .number(0) && typed["one"] == .number(1))
        #expect(typed["nested"] == .object(["list": .array([.number(1.5), .string("x"), .bool(false)]), "none": .null]))
        #expect(typed["one"]?.description == "1" && typed["nested"]?.description == #"{"list":[1.5,"x",false],"none":null}"#)
    }

    @Test("form encoding round-trips reserved characters and decodes +")
    func forms() {
        let fields = [("scope", "openid offline_access https://x/y"), ("state", "a&b=c/d?"), ("emoji", "🎉")]
        let decoded = FormEncoding.fields(FormEncoding.encode(fields))
        for (name, value) in fields { #expect(decoded[name] == value) }
        #expect(FormEncoding.fields("a=b+c&a=ignored")["a"] == "b c")
    }

    @Test("file store: 0600, atomic, no lost update among concurrent writers, corrupt files moved aside")
    func fileStore() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todo-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("nested/cache.json")
        // Two store values over one file stand for two processes: each call opens its own lock.
        let first = FileTokenStore(url: url)
        let second = FileTokenStore(url: url)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                let store = index.isMultiple(of: 2) ? first : second
                group.addTask {
                    try await store.modify { cache in
                        cache.entries.append(Self.entry("account-\(index)"))
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(Set(try await first.read().entries.map(\.account.homeAccountID)).count == 40)
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        try Data("{ not json".utf8).write(to: url)
        let reported = Mutex<URL?>(nil)
        let recovering = FileTokenStore(url: url) { moved in reported.withLock { $0 = moved } }
        #expect(try await recovering.read().entries.isEmpty)
        let moved = try #require(reported.withLock { $0 })
        #expect(String(decoding: try Data(contentsOf: moved), as: UTF8.self) == "{ not json")
        try await recovering.modify { $0.entries.append(Self.entry("fresh")) }
        #expect(try await recovering.read().entries.map(\.account.homeAccountID) == ["fresh"])
    }

    static func entry(_ id: String) -> TokenCacheEntry {
        TokenCacheEntry(
            account: Account(
                homeAccountID: id, environment: "h", username: nil, name: nil, objectID: nil, tenantID: nil, policy: nil, claims: [:]),
            clientID: "c", authority: "http://127.0.0.1/t.onmicrosoft.com/B2C_1_susi", refreshToken: "r", idToken: nil, accessTokens: [])
    }

    @Test("loopback receiver: ignores other paths, answers query responses, times out, and stops on cancel")
    func loopback() async throws {
        // The "browser" runs beside the receiver; its answers are checked here, after it is awaited.
        let browser = Mutex<Task<(favicon: Int, foreign: Int, page: String), any Error>?>(nil)
        // A deadline only a hung receiver reaches: a loaded CI machine took more than ten seconds
        // for the three requests of this "browser".
        let opener = LoopbackWebAuthenticator(responseMode: .query, timeout: .seconds(120)) { url in
            let redirect = URLComponents(url: url, resolvingAgainstBaseURL: false)!.queryItems!.first { $0.name == "redirect_uri" }!.value!
            browser.withLock {
                $0 = Task {
                    let transport = URLSessionTransport()
                    let favicon = try await transport.send(TransportRequest(method: "GET", url: URL(string: redirect + "/favicon.ico")!))
                    // A response for another sign-in is refused, and the receiver keeps waiting.
                    let foreign = try await transport.send(
                        TransportRequest(method: "GET", url: URL(string: redirect + "/?code=evil&state=other")!))
                    let page = try await transport.send(
                        TransportRequest(method: "GET", url: URL(string: redirect + "/?code=abc&state=xyz")!))
                    return (favicon.status, foreign.status, String(decoding: page.body, as: UTF8.self))
                }
            }
        }
        let parameters = try await opener.authenticate(redirectURI: "http://127.0.0.1") { redirectURI, mode in
            #expect(mode == .query)
            #expect(redirectURI.hasPrefix("http://127.0.0.1:"))
            return URL(string: "https://id.example/authorize?state=xyz&redirect_uri=\(redirectURI)")!
        }
        #expect(parameters == ["code": "abc", "state": "xyz"])
        let seen = try await #require(browser.withLock { $0 }).value
        #expect(seen.favicon == 404)
        #expect(seen.foreign == 400)
        #expect(seen.page.contains("You can close this tab"))

        let idle = LoopbackWebAuthenticator(timeout: .milliseconds(300)) { _ in }
        await #expect(throws: IdentityError.timedOut) {
            try await idle.authenticate(redirectURI: "http://127.0.0.1") { _, _ in URL(string: "https://id.example/")! }
        }
        let waiting = Task {
            try await LoopbackWebAuthenticator(timeout: .seconds(60)) { _ in }.authenticate(redirectURI: "http://127.0.0.1") { _, _ in
                URL(string: "https://id.example/")!
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        await #expect(throws: IdentityError.self) {
            try await idle.authenticate(redirectURI: "https://app.example/callback") { _, _ in URL(string: "https://id.example/")! }
        }
    }
}

/// A canned identity service that records what the SDK sends.
final class RecordingIdentity: HTTPTransport {
    let requests = Mutex<[TransportRequest]>([])

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        requests.withLock { $0.append(request) }
        if request.url.path.hasSuffix("openid-configuration") {
            let body =
                #"{"issuer":"https://id.example/t/v2.0/","authorization_endpoint":"https://id.example/t/b2c_1_susi/oauth2/v2.0/authorize","token_endpoint":"https://id.example/t/b2c_1_susi/oauth2/v2.0/token"}"#
            return TransportResponse(status: 200, headers: [:], body: Data(body.utf8))
        }
        return TransportResponse(
            status: 400, headers: [:], body: Data(#"{"error":"invalid_grant","error_description":"AADB2C90080: expired"}"#.utf8))
    }
}

@Suite("IdentityClient request shapes")
struct RequestShapeTests {
    static func app(_ transport: RecordingIdentity, secret: String) throws -> ConfidentialClientApplication {
        ConfidentialClientApplication(
            configuration: ClientConfiguration(
                clientID: "web-client", authority: try Authority("https://id.example/t.onmicrosoft.com/B2C_1_susi"),
                redirectURI: "https://app.example/return", transport: transport),
            clientSecret: secret)
    }

    @Test("the authorize URL carries PKCE S256 of the kept verifier, and fresh state and nonce")
    func authorizeURL() async throws {
        let app = try Self.app(RecordingIdentity(), secret: "s")
        let first = try await app.authorizationRequest(InteractiveParameters(scopes: ["api"]))
        let second = try await app.authorizationRequest(InteractiveParameters(scopes: ["api"]))
        let query = FormEncoding.fields(URLComponents(url: first.url, resolvingAgainstBaseURL: false)!.percentEncodedQuery ?? "")
        #expect(query["code_challenge_method"] == "S256")
        #expect(query["code_challenge"] == PKCE(verifier: first.codeVerifier).challenge)
        #expect(query["state"] == first.state && query["nonce"] == first.nonce)
        #expect(query["redirect_uri"] == "https://app.example/return")
        #expect(first.state != second.state && first.nonce != second.nonce && first.codeVerifier != second.codeVerifier)
        #expect(query["code_verifier"] == nil)  // the verifier never leaves the app before redemption
    }

    @Test("client_secret_basic form-encodes id and secret before base64 (RFC 6749 §2.3.1); the secret is not in the body")
    func basicAuthentication() async throws {
        let transport = RecordingIdentity()
        let app = try Self.app(transport, secret: "a:b+c%d é")
        let request = try await app.authorizationRequest(InteractiveParameters(scopes: ["api"]))
        await #expect(throws: IdentityError.self) {
            try await app.acquireToken(for: request, response: ["code": "c", "state": request.state])
        }
        let token = try #require(transport.requests.withLock { $0 }.last)
        let expected = Data("web-client:a%3ab%2bc%25d+%c3%a9".utf8).base64EncodedString()
        #expect(token.headers["Authorization"] == "Basic \(expected)")
        let body = String(decoding: token.body ?? Data(), as: UTF8.self)
        #expect(!body.contains("client_secret") && !body.contains("a%3ab"))
        #expect(body.contains("code_verifier=\(request.codeVerifier)"))
    }
}

/// A token endpoint that answers with tokens but leaves the ID token out (a stripping attacker
/// in the middle, or a broken server).
final class StrippedIDTokenIdentity: HTTPTransport {
    func send(_ request: TransportRequest) async throws -> TransportResponse {
        if request.url.path.hasSuffix("openid-configuration") { return try await RecordingIdentity().send(request) }
        let clientInfo = Data(#"{"uid":"u1","utid":"t1"}"#.utf8).base64EncodedString()
        let body = #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt","client_info":"\#(clientInfo)"}"#
        return TransportResponse(status: 200, headers: [:], body: Data(body.utf8))
    }
}

@Suite("IdentityClient refuses stripped responses")
struct StrippedResponseTests {
    @Test("a sign-in whose token response lost its ID token is refused, and nothing is cached")
    func strippedIDToken() async throws {
        let store = InMemoryTokenStore()
        let app = ConfidentialClientApplication(
            configuration: ClientConfiguration(
                clientID: "web-client", authority: try Authority("https://id.example/t.onmicrosoft.com/B2C_1_susi"),
                redirectURI: "https://app.example/return", tokenStore: store, transport: StrippedIDTokenIdentity()),
            clientSecret: "s")
        let request = try await app.authorizationRequest(InteractiveParameters(scopes: ["api"]))
        await #expect {
            try await app.acquireToken(for: request, response: ["code": "c", "state": request.state])
        } throws: { error in
            if case IdentityError.invalidIDToken = error { return true }
            return false
        }
        #expect(try await store.read().entries.isEmpty)
    }
}
