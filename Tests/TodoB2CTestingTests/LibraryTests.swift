import Foundation
import Testing
import TodoB2CTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `TodoB2CTesting` through its public surface only, as an app's suite uses it (SPEC §6).
@Suite("TodoB2CTesting")
struct LibraryTests {
    /// A form POST; the answer's status and JSON object.
    static func post(_ url: URL, _ form: [(String, String)]) async throws -> (status: Int, json: [String: Any]) {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        var components = URLComponents()
        components.queryItems = form.map { URLQueryItem(name: $0.0, value: $0.1) }
        // `+` is a space in a form: encode it as the form rules say.
        request.httpBody = Data((components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B").utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, json)
    }

    static func claims(of jwt: String) throws -> [String: Any] {
        var payload = String(jwt.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        return try JSONSerialization.jsonObject(with: try #require(Data(base64Encoded: payload))) as? [String: Any] ?? [:]
    }

    @Test("a sign-up proven by the outbox's code (native authentication over HTTP), then minted tokens for the new account")
    func outboxCodes() async throws {
        try await TodoB2CTestServer.run { b2c in
            let native = b2c.identityURL.appendingPathComponent(b2c.tenant)
            let email = "outbox@example.com"
            let started = try await Self.post(
                native.appendingPathComponent("signup/v1.0/start"),
                [
                    ("client_id", b2c.clientID), ("username", email), ("password", "Str0ng-Pass!"),
                    ("challenge_type", "oob password redirect"), ("attributes", #"{"displayName":"Out Box"}"#),
                ])
            #expect(started.status == 200, "\(started.json)")
            #expect(try await b2c.latestCode(for: email) == nil, "no mail before the challenge")
            let challenged = try await Self.post(
                native.appendingPathComponent("signup/v1.0/challenge"),
                [("client_id", b2c.clientID), ("continuation_token", started.json["continuation_token"] as? String ?? "")])
            let code = try #require(try await b2c.latestCode(for: email.uppercased()))
            #expect(code.count == 8)
            let mail = try #require(try await b2c.outbox().first)
            #expect(mail.recipient == email && mail.code == code && mail.body.contains(code))
            let done = try await Self.post(
                native.appendingPathComponent("signup/v1.0/continue"),
                [
                    ("client_id", b2c.clientID), ("continuation_token", challenged.json["continuation_token"] as? String ?? ""),
                    ("grant_type", "oob"), ("oob", code),
                ])
            #expect(done.status == 200, "\(done.json)")
            let tokens = try await b2c.tokens(for: email)
            let idClaims = try Self.claims(of: try #require(tokens.idToken))
            #expect(idClaims["name"] as? String == "Out Box" && idClaims["aud"] as? String == b2c.clientID)
            #expect(tokens.refreshToken != nil && (tokens.expiresIn ?? 0) > 0)
        }
    }

    @Test("users and tokens: the token's subject is the user, extra claims are in it; a second account of one address is refused")
    func usersAndTokens() async throws {
        try await TodoB2CTestServer.run { b2c in
            let bob = try await b2c.createUser(email: "bob@example.com", displayName: "Bob")
            let tokens = try await b2c.tokens(for: bob.email, claims: ["role": "admin"])
            let access = try Self.claims(of: try #require(tokens.accessToken))
            #expect(access["oid"] as? String == bob.id.uuidString.lowercased() && access["role"] as? String == "admin")
            #expect((access["iss"] as? String)?.hasPrefix(b2c.identityURL.absoluteString) == true)
            await #expect(throws: TodoB2CTestError.self) { try await b2c.createUser(email: "BOB@example.com") }
            await #expect(throws: TodoB2CTestError.self) { _ = try await b2c.tokens(for: "nobody@example.com") }
            // The password works at the flow's token endpoint (ROPC), as a real sign-in.
            let ropc = b2c.authority(policy: "B2C_1_ROPC").appendingPathComponent("oauth2/v2.0/token")
            let signedIn = try await Self.post(
                ropc,
                [
                    ("grant_type", "password"), ("client_id", b2c.clientID), ("username", bob.email), ("password", bob.password),
                    ("scope", "openid \(b2c.clientID)"),
                ])
            #expect(signedIn.status == 200 && signedIn.json["access_token"] != nil, "\(signedIn.json)")
            #expect(try await b2c.resetAccounts() == 1)
            await #expect(throws: TodoB2CTestError.self) { _ = try await b2c.tokens(for: bob.email) }
        }
    }

    @Test("faults: the next call on the flow fails once in B2C's form; an unknown flow or error is refused with its code")
    func faults() async throws {
        try await TodoB2CTestServer.run { b2c in
            let bob = try await b2c.createUser(email: "bob@example.com")
            let ropc = b2c.authority(policy: "B2C_1_ROPC").appendingPathComponent("oauth2/v2.0/token")
            let form = [
                ("grant_type", "password"), ("client_id", b2c.clientID), ("username", bob.email), ("password", bob.password),
                ("scope", "openid \(b2c.clientID)"),
            ]
            try await b2c.failNext(policy: "B2C_1_ROPC", error: "server_error")
            let failed = try await Self.post(ropc, form)
            #expect(failed.status >= 400 && failed.json["error"] as? String == "server_error", "\(failed.json)")
            #expect(try await Self.post(ropc, form).status == 200)
            do {
                try await b2c.failNext(policy: "B2C_1_nope", error: "server_error")
                Issue.record("an unknown flow was accepted")
            } catch let error as TodoB2CTestError {
                #expect(error.code.hasPrefix("AADB2C"), "\(error)")
            }
            do {
                try await b2c.failNext(policy: "B2C_1_ROPC", error: "no_such_error")
                Issue.record("an unknown error was accepted")
            } catch let error as TodoB2CTestError {
                #expect(error.message.contains("Unknown fault"), "\(error)")
            }
            // Nothing was armed by the refusals.
            #expect(try await Self.post(ropc, form).status == 200)
        }
    }

    @Test("the clock moves forward, never back, and returns to the wall clock")
    func clock() async throws {
        try await TodoB2CTestServer.run { b2c in
            let before = try b2c.now
            try b2c.advanceClock(bySeconds: 3600)
            #expect(try b2c.now.timeIntervalSince(before) >= 3600)
            #expect(throws: TodoB2CTestError.self) { try b2c.advanceClock(bySeconds: -1) }
            try b2c.resetClock()
            #expect(try b2c.now.timeIntervalSince(before) < 600)
        }
    }

    @Test("the README's example is this package's ReadmeExample.swift, word for word")
    func readmeExample() throws {
        let here = URL(fileURLWithPath: #filePath)
        let example = try String(contentsOf: here.deletingLastPathComponent().appendingPathComponent("ReadmeExample.swift"), encoding: .utf8)
        let readme = try String(
            contentsOf: here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md"),
            encoding: .utf8)
        #expect(readme.contains("```swift\n" + example.trimmingCharacters(in: .whitespacesAndNewlines) + "\n```"))
    }

    @Test("two systems at once have their own ports and data; stop removes the data directory")
    func twoAtOnce() async throws {
        let first = try await TodoB2CTestServer.start()
        let second = try await TodoB2CTestServer.start()
        #expect(first.identityURL != second.identityURL && first.apiURL != second.apiURL)
        try await first.createUser(email: "only-first@example.com")
        await #expect(throws: TodoB2CTestError.self) { _ = try await second.tokens(for: "only-first@example.com") }
        try await first.stop()
        try await second.stop()
        #expect(!FileManager.default.fileExists(atPath: first.settingsFile.path))
    }
}
