import Foundation
import IdentityClient
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `/dev/clock` (SPEC §2.14): one clock for the issuer and the Task API's validator of the same
/// process, moved over HTTP, only forward; and extra claims in `POST /dev/tokens`.
@Suite("Development clock")
struct DevelopmentClockTests {
    struct Reply {
        var status: Int
        var json: [String: Any]
    }

    static func send(_ method: String, _ url: String, json: String? = nil, form: String? = nil, bearer: String? = nil) async throws -> Reply {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(json.utf8)
        }
        if let form {
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(form.utf8)
        }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return Reply(status: (response as? HTTPURLResponse)?.statusCode ?? 0, json: object)
    }

    static func claims(_ token: String) -> [String: Any] {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return [:] }
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        return (Data(base64Encoded: payload).flatMap { try? JSONSerialization.jsonObject(with: $0) }) as? [String: Any] ?? [:]
    }

    @Test("the clock moves the issuer and the Task API together: a token expires at once, a refresh then works; backwards is refused; DELETE resets")
    func clockMovesEverything() async throws {
        try await LiveSystem.run { live in
            try await live.addUser("clock@example.com")
            let dev = live.identityBase + "/dev"
            let tasks = live.apiBase.appendingPathComponent("tasks").absoluteString
            let minted = try await Self.send("POST", dev + "/tokens", json: #"{"user":"clock@example.com","client":"\#(live.clientID)"}"#)
            #expect(minted.status == 200)
            let access = try #require(minted.json["access_token"] as? String)
            let refresh = try #require(minted.json["refresh_token"] as? String)
            #expect(try await Self.send("GET", tasks, bearer: access).status == 200)
            let lifetime = try #require(minted.json["expires_in"] as? Int)

            let moved = try await Self.send("POST", dev + "/clock", json: #"{"advanceSeconds": \#(lifetime + 600)}"#)
            #expect(moved.status == 200 && moved.json["offsetSeconds"] as? Int == lifetime + 600)
            let serverNow = try #require(moved.json["epochSeconds"] as? Int)
            #expect(serverNow >= Int(Date().timeIntervalSince1970) + lifetime + 590)
            // The Task API in this process judges tokens at the moved time.
            #expect(try await Self.send("GET", tasks, bearer: access).status == 401)

            // A refresh is issued at the moved time and accepted.
            let token = live.identityBase + "/\(live.tenantName)/B2C_1_susi/oauth2/v2.0/token"
            let refreshed = try await Self.send(
                "POST", token, form: "grant_type=refresh_token&client_id=\(live.clientID)&refresh_token=\(refresh)&scope=openid%20offline_access%20\(live.clientID)")
            #expect(refreshed.status == 200, "\(refreshed.json)")
            let renewed = try #require(refreshed.json["access_token"] as? String)
            let iat = try #require(Self.claims(renewed)["iat"] as? Int)
            #expect(iat >= serverNow)
            #expect(try await Self.send("GET", tasks, bearer: renewed).status == 200)

            // Backwards, fractional, too far: refused, nothing moved.
            for body in [#"{"advanceSeconds": -5}"#, #"{"advanceSeconds": 1.5}"#, #"{"advanceSeconds": 999999999999}"#, "{}"] {
                let refused = try await Self.send("POST", dev + "/clock", json: body)
                #expect(refused.status == 400, "\(body)")
                #expect(refused.json["error"] as? String == "invalid_request", "\(body)")
            }
            #expect(try await Self.send("GET", dev + "/clock").json["offsetSeconds"] as? Int == lifetime + 600)

            let reset = try await Self.send("DELETE", dev + "/clock")
            #expect(reset.status == 200 && reset.json["offsetSeconds"] as? Int == 0)
            #expect(try await Self.send("GET", tasks, bearer: access).status == 200)
        }
    }

    @Test("extra claims go into both minted tokens; the issuer's own claims cannot be set")
    func extraClaims() async throws {
        try await LiveSystem.run { live in
            try await live.addUser("claims@example.com")
            let dev = live.identityBase + "/dev/tokens"
            let minted = try await Self.send(
                "POST", dev,
                json: #"{"user":"claims@example.com","client":"\#(live.clientID)","claims":{"groups":["testers"],"name":"Override","level":3}}"#)
            #expect(minted.status == 200)
            for token in [minted.json["access_token"], minted.json["id_token"]] {
                let claims = Self.claims(try #require(token as? String))
                #expect(claims["groups"] as? [String] == ["testers"])
                #expect(claims["name"] as? String == "Override" && claims["level"] as? Int == 3)
            }
            // The Task API still accepts it: the signature covers the added claims.
            let tasks = live.apiBase.appendingPathComponent("tasks").absoluteString
            #expect(try await Self.send("GET", tasks, bearer: try #require(minted.json["access_token"] as? String)).status == 200)

            for claims in [#"{"exp": 1}"#, #"{"iss": "https://elsewhere"}"#, #"{"aud": "x"}"#, #"{"x": 1.5}"#, #"{"idtyp": "app"}"#, #"{"azp": "x"}"#] {
                let refused = try await Self.send(
                    "POST", dev, json: #"{"user":"claims@example.com","client":"\#(live.clientID)","claims":\#(claims)}"#)
                #expect(refused.status == 400, "\(claims)")
            }
            // Microsoft Graph's tokens carry only what Graph grants.
            let graph = try await Self.send(
                "POST", dev, json: #"{"user":"claims@example.com","client":"\#(live.clientID)","scope":"openid User.Read","entra":true,"claims":{"roles":["User.ReadWrite.All"]}}"#)
            #expect(graph.status == 400)
        }
    }

    @Test("the SSO session and a sign-up code follow the clock: both end when it passes their lifetimes")
    func sessionsAndCodesFollow() async throws {
        try await LiveSystem.run { live in
            try await live.addUser("session@example.com")
            let app = try live.app()
            let browser = HostedPagesBrowser(identityBase: live.identityBase)
            _ = try await app.acquireTokenInteractively(
                InteractiveParameters(scopes: [live.clientID]),
                authenticator: ScriptedWebAuthenticator { url in try await browser.signIn(url, email: "session@example.com", password: "Passw0rd!") })
            let silentPage = ScriptedWebAuthenticator { url in try await browser.straightThrough(url) }
            _ = try await app.acquireTokenInteractively(InteractiveParameters(scopes: [live.clientID], prompt: Prompt.none), authenticator: silentPage)

            // Past the session's day, prompt=none needs a sign-in again.
            #expect(try await Self.send("POST", live.identityBase + "/dev/clock", json: #"{"advanceSeconds": 86460}"#).status == 200)
            await #expect {
                try await app.acquireTokenInteractively(InteractiveParameters(scopes: [live.clientID], prompt: Prompt.none), authenticator: silentPage)
            } throws: { error in
                if case IdentityError.interactionRequired(_, let code, _) = error { return code == "AADB2C90077" }
                return false
            }

            // A code sent and entered at once proves the address; one entered after the clock
            // passed its ten minutes does not.
            let start = URL(string: "\(live.identityBase)/\(live.tenantName)/B2C_1_sign_up/oauth2/v2.0/authorize?client_id=\(live.clientID)&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1&scope=openid&code_challenge=\(String(repeating: "a", count: 43))&code_challenge_method=S256")!
            let onTime = HostedPagesBrowser(identityBase: live.identityBase)
            var first = try await onTime.submit(try await onTime.open(start), [("step", "send"), ("email", "ontime@example.com")])
            first = try await onTime.submit(first, [("step", "verify"), ("code", try await onTime.outboxCode(for: "ontime@example.com"))])
            #expect(first.text.contains("email_success"), "\(first.text.prefix(300))")
            let signUp = HostedPagesBrowser(identityBase: live.identityBase)
            var page = try await signUp.open(start)
            page = try await signUp.submit(page, [("step", "send"), ("email", "late@example.com")])
            #expect(page.text.contains("email_ver_input"), "\(page.text.prefix(300))")
            let code = try await signUp.outboxCode(for: "late@example.com")
            #expect(try await Self.send("POST", live.identityBase + "/dev/clock", json: #"{"advanceSeconds": 660}"#).status == 200)
            page = try await signUp.submit(page, [("step", "verify"), ("code", code)])
            #expect(!page.text.contains("email_success"), "\(page.text.prefix(300))")
        }
    }
}
