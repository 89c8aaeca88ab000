import Foundation
import Hummingbird
import HummingbirdTesting
import Storage
import TaskService
import TestSupport
import Testing
import TodoModels

@Suite("Bearer token validation (RFC 6750, RFC 8725)")
struct BearerTests {
    @Test("every forged, foreign or stale token gets 401 with a precise WWW-Authenticate")
    func rejections() async throws {
        let stranger = try MockAuthority()
        try await TaskHarness.run(.sqlite) { h, client in
            let a = h.authority
            let now = Int(Date().timeIntervalSince1970)
            let valid = a.token()
            #expect(try await client.call(.get, "/api/tasks", token: valid).status == .ok)

            let missing = try await client.call(.get, "/api/tasks", token: nil)
            #expect(missing.status == .unauthorized)
            #expect(missing.headers[.wwwAuthenticate] == "Bearer realm=\"TodoB2C\"")

            var parts = valid.split(separator: ".").map(String.init)
            parts[1] = MockAuthority.b64(
                try JSONSerialization.data(withJSONObject: [
                    "iss": a.issuer, "aud": MockAuthority.audience, "exp": now + 3600, "oid": "mallory", "azp": "x",
                ]))
            let altered = parts.joined(separator: ".")

            let cases: [(String, String, String)] = [
                ("empty", "", "No bearer token"),
                ("none", a.unsignedToken(), "'none' is not accepted"),
                ("hs256", a.hmacToken(), "'HS256' is not accepted"),
                ("unknown kid", a.token(header: ["typ": "JWT", "alg": "RS256", "kid": "nobody"]), "unknown key"),
                ("wrong iss", a.token(extra: ["iss": "https://evil.example/v2.0/"]), "issuer is not trusted"),
                ("wrong aud", a.token(extra: ["aud": "someone-else"]), "audience is not this API"),
                ("expired", a.token(extra: ["exp": now - 600]), "has expired"),
                ("not yet", a.token(extra: ["nbf": now + 600]), "not valid yet"),
                ("altered", altered, "signature is invalid"),
                ("id token", a.token(removing: ["scp", "azp"]), "not an access token"),
                ("other authority", stranger.token(), "unknown key"),
                ("garbage", "abc.def", "malformed"),
                ("string nbf", a.token(extra: ["nbf": "9999999999"]), "nbf is not a number"),
            ]
            for (label, token, fragment) in cases {
                let response = try await client.call(.get, "/api/tasks", token: token)
                #expect(response.status == .unauthorized, "\(label)")
                let challenge = response.headers[.wwwAuthenticate] ?? ""
                if label != "empty" { #expect(challenge.contains("error=\"invalid_token\""), "\(label): \(challenge)") }
                #expect((challenge + response.text).contains(fragment), "\(label): \(challenge)")
                #expect(response.headers[.contentType] == "application/problem+json", "\(label)")
            }
            // Within the 5-minute skew, an expired token still works.
            #expect(try await client.call(.get, "/api/tasks", token: a.token(extra: ["exp": now - 100])).status == .ok)
            // An oversized token is refused before any work.
            #expect(try await client.call(.get, "/api/tasks", token: String(repeating: "a", count: 20_000)).status == .unauthorized)
        }
    }

    @Test("a required scope is enforced with 403 insufficient_scope")
    func requiredScope() async throws {
        try await TaskHarness.run(.sqlite, requiredScopes: ["tasks.write"]) { h, client in
            #expect(try await client.call(.get, "/api/tasks", token: h.authority.token()).status == .ok)
            let readOnly = try await client.call(.get, "/api/tasks", token: h.authority.token(extra: ["scp": "tasks.read"]))
            #expect(readOnly.status == .forbidden)
            #expect(readOnly.headers[.wwwAuthenticate]?.contains("error=\"insufficient_scope\"") == true)
            #expect(readOnly.headers[.wwwAuthenticate]?.contains("scope=\"tasks.write\"") == true)
        }
    }

    @Test("an unreachable authority is a 503, not the client's fault")
    func unreachableAuthority() async throws {
        try await TestDatabase.with(.sqlite) { database in
            let policy = BearerPolicy(discoveryURLs: ["http://127.0.0.1:9/nothing/.well-known/openid-configuration"], audiences: ["x"])
            let fetcher = try HTTPMetadataFetcher()
            let server = try await TaskServer.make(
                configuration: .init(policy: policy), database: database, fetcher: fetcher, logger: TestDatabase.logger)
            let token = try MockAuthority().token()
            try await Application(router: server.buildRouter(), logger: TestDatabase.logger).test(.router) { client in
                let response = try await client.call(.get, "/api/tasks", token: token)
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.retryAfter] != nil)
                #expect(response.headers[.wwwAuthenticate] == nil, "the token may be fine: no invalid_token challenge")
            }
            try await fetcher.shutdown()
        }
    }

    @Test("authority URLs in every B2C shape map to their discovery document")
    func discoveryURLs() {
        #expect(
            BearerPolicy.discoveryURL(forAuthority: "https://c.b2clogin.com/c.onmicrosoft.com/B2C_1_susi")
                == "https://c.b2clogin.com/c.onmicrosoft.com/B2C_1_susi/v2.0/.well-known/openid-configuration")
        #expect(
            BearerPolicy.discoveryURL(forAuthority: "https://c.b2clogin.com/tfp/c.onmicrosoft.com/B2C_1_susi/")
                == "https://c.b2clogin.com/tfp/c.onmicrosoft.com/B2C_1_susi/v2.0/.well-known/openid-configuration")
        #expect(
            BearerPolicy.discoveryURL(forAuthority: "https://h/t/B2C_1_x/v2.0")
                == "https://h/t/B2C_1_x/v2.0/.well-known/openid-configuration")
        let full = "https://h/t/v2.0/.well-known/openid-configuration?p=B2C_1_x"
        #expect(BearerPolicy.discoveryURL(forAuthority: full) == full)
    }

    @Test("a key the authority stops publishing stops verifying once the key set's cache lifetime is over")
    func withdrawnKeys() async throws {
        let authority = try MockAuthority()
        try await authority.serve { url in
            let fetcher = try HTTPMetadataFetcher()
            let validator = BearerValidator(
                policy: BearerPolicy(discoveryURLs: [url], audiences: [MockAuthority.audience], keyCacheLifetime: 300),
                fetcher: fetcher, logger: TestDatabase.logger)
            let start = Date()
            let token = authority.token()
            _ = try await validator.validate(token, now: start)
            authority.publication.withdraw()
            // Within the lifetime the cached set (and the accepted token) still stand.
            _ = try await validator.validate(token, now: start.addingTimeInterval(60))
            // After it, the set is fetched again and the withdrawn key is gone, even for a token
            // that was accepted before.
            await #expect(throws: TokenRejection.unknownKey) {
                try await validator.validate(token, now: start.addingTimeInterval(301))
            }
            await #expect(throws: TokenRejection.unknownKey) {
                try await validator.validate(authority.token(oid: "fresh"), now: start.addingTimeInterval(302))
            }
            try await fetcher.shutdown()
        }
    }

    @Test(
        "a kid seen for the first time fetches the key set at once, so a rotation costs no 401; made-up kids cost at most one fetch per gap"
    )
    func newKeyFetchedAtOnce() async throws {
        let authority = try MockAuthority()
        try await authority.serve { url in
            let fetcher = try HTTPMetadataFetcher()
            let validator = BearerValidator(
                policy: BearerPolicy(discoveryURLs: [url], audiences: [MockAuthority.audience], keyRefreshInterval: 60, newKeyFetchGap: 1),
                fetcher: fetcher, logger: TestDatabase.logger)
            let start = Date()
            _ = try await validator.validate(authority.token(), now: start)
            #expect(authority.publication.fetches == 1)
            // Two seconds later the authority publishes a new key and signs with it: well within
            // keyRefreshInterval, yet the first token it signs is accepted.
            let next = try authority.nextKey()
            authority.publication.publish(next.jwk)
            _ = try await validator.validate(next.token(oid: "user-b"), now: start.addingTimeInterval(2))
            #expect(authority.publication.fetches == 2)
            // Made-up kids: the first costs one fetch, the ones right after it none.
            let forged = try authority.nextKey()
            for (offset, n) in [(3.0, 1), (3.1, 2), (3.2, 3)] {
                await #expect(throws: TokenRejection.unknownKey) {
                    try await validator.validate(forged.token(oid: "x\(n)"), now: start.addingTimeInterval(offset))
                }
                let other = try authority.nextKey()
                await #expect(throws: TokenRejection.unknownKey) {
                    try await validator.validate(other.token(oid: "y\(n)"), now: start.addingTimeInterval(offset))
                }
            }
            #expect(authority.publication.fetches == 3, "one fetch for the made-up kids within the gap")
            // The same unknown kid again waits the refresh interval.
            await #expect(throws: TokenRejection.unknownKey) {
                try await validator.validate(forged.token(oid: "z"), now: start.addingTimeInterval(10))
            }
            #expect(authority.publication.fetches == 3)
            try await fetcher.shutdown()
        }
    }

    @Test("a token remembered as accepted stops being accepted at its exp (plus skew), and a token without exp is refused")
    func cachedExpiryAndMandatoryExp() async throws {
        let authority = try MockAuthority()
        try await authority.serve { url in
            let fetcher = try HTTPMetadataFetcher()
            // Key sets kept long, so the second validation is answered from the accepted cache.
            let validator = BearerValidator(
                policy: BearerPolicy(
                    discoveryURLs: [url], audiences: [MockAuthority.audience], clockSkew: 300, keyCacheLifetime: 100_000,
                    keySetMaximumAge: 100_000),
                fetcher: fetcher, logger: TestDatabase.logger)
            let start = Date()
            let token = authority.token()  // exp: an hour from now
            _ = try await validator.validate(token, now: start)
            _ = try await validator.validate(token, now: start.addingTimeInterval(3600 + 290))
            #expect(authority.publication.fetches == 1, "answered from the cache")
            await #expect(throws: TokenRejection.expired) {
                try await validator.validate(token, now: start.addingTimeInterval(3600 + 310))
            }
            await #expect(throws: TokenRejection.malformed("no exp")) {
                try await validator.validate(authority.token(oid: "no-exp", removing: ["exp"]), now: start)
            }
            try await fetcher.shutdown()
        }
    }

    @Test("while the authority is unreachable, its last key set verifies until its maximum age")
    func unreachableAuthorityKeepsKeysForAWhile() async throws {
        let authority = try MockAuthority()
        let token = authority.token()
        let start = Date()
        let (validator, fetcher) = try await authority.serve { url in
            let fetcher = try HTTPMetadataFetcher(timeout: .seconds(1))
            let validator = BearerValidator(
                policy: BearerPolicy(
                    discoveryURLs: [url], audiences: [MockAuthority.audience], keyCacheLifetime: 300, keySetMaximumAge: 3600),
                fetcher: fetcher, logger: TestDatabase.logger)
            _ = try await validator.validate(token, now: start)
            return (validator, fetcher)
        }
        // The authority is gone now.
        _ = try await validator.validate(token, now: start.addingTimeInterval(400))
        await #expect(throws: TokenRejection.authorityUnavailable) {
            try await validator.validate(token, now: start.addingTimeInterval(3700))
        }
        try await fetcher.shutdown()
    }

    @Test("authorities that share a key each get their own issuer accepted")
    func sharedKeys() async throws {
        let first = try MockAuthority()
        let second = MockAuthority(sharingKeyWith: first, issuer: "http://issuer.test/tfp/\(UUID().uuidString)/B2C_1_other/v2.0/")
        try await first.serve { firstURL in
            try await second.serve { secondURL in
                let fetcher = try HTTPMetadataFetcher()
                let validator = BearerValidator(
                    policy: BearerPolicy(discoveryURLs: [firstURL, secondURL], audiences: [MockAuthority.audience]), fetcher: fetcher,
                    logger: TestDatabase.logger)
                let one = try await validator.validate(first.token(oid: "one"))
                let two = try await validator.validate(second.token(oid: "two"))
                #expect(one.issuer == first.issuer)
                #expect(two.issuer == second.issuer)
                await #expect(throws: TokenRejection.untrustedIssuer) {
                    try await validator.validate(first.token(extra: ["iss": "http://elsewhere.test/v2.0/"]))
                }
                try await fetcher.shutdown()
            }
        }
    }
}
