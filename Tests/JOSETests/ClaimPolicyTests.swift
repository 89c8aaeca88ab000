import Foundation
import Testing

@testable import JOSE

/// The one claim check, as the Task API, federation, Graph and logout use it.
@Suite("Typed claims and the one claim check")
struct ClaimPolicyTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let exp = ClaimValue.number(1_800_000_600)

    @Test("a payload's registered claims are typed: aud as a string or an array, times as dates, booleans apart from numbers")
    func typed() throws {
        let payload = #"{"iss":"https://i/","aud":["a","b",3],"exp":1800000600,"nbf":1,"iat":2,"v":true,"n":1,"sub":"s"}"#
        let claims = try #require(JWTClaims(payload: Data(payload.utf8)))
        #expect(claims.issuer == "https://i/" && claims.subject == "s")
        #expect(claims.audience == ["a", "b"])
        #expect(claims.expiresAt == Date(timeIntervalSince1970: 1_800_000_600))
        #expect(claims["v"] == .bool(true) && claims["n"] == .number(1))
        #expect(JWTClaims(payload: Data(#"{"aud":"one"}"#.utf8))?.audience == ["one"])
        #expect(JWTClaims(payload: Data("[1]".utf8)) == nil)
    }

    @Test("issuer, audience, expiry with leeway, not-before, required claims: each refusal named")
    func refusals() throws {
        let policy = ClaimPolicy(issuers: .exactly(["https://i/"]), audiences: ["api"], leeway: 300, required: ["oid"])
        let good: JWTClaims = ["iss": "https://i/", "aud": "api", "exp": Self.exp, "oid": "o"]
        try policy.check(good, now: Self.now)
        func refusal(_ claims: JWTClaims, now: Date = Self.now, _ policy: ClaimPolicy? = nil) -> ClaimError? {
            do {
                try (policy ?? ClaimPolicy(issuers: .exactly(["https://i/"]), audiences: ["api"], required: ["oid"])).check(
                    claims, now: now)
                return nil
            } catch { return error }
        }
        #expect(refusal(["iss": "https://other/", "aud": "api", "exp": Self.exp, "oid": "o"]) == .untrustedIssuer)
        #expect(refusal(["aud": "api", "exp": Self.exp, "oid": "o"]) == .untrustedIssuer)
        #expect(refusal(["iss": "https://i/", "aud": "web", "exp": Self.exp, "oid": "o"]) == .wrongAudience)
        #expect(refusal(["iss": "https://i/", "aud": .array(["web", "api"]), "exp": Self.exp, "oid": "o"]) == nil)
        #expect(refusal(["iss": "https://i/", "aud": "api", "oid": "o"]) == .malformed("no exp"))
        #expect(refusal(["iss": "https://i/", "aud": "api", "exp": "soon", "oid": "o"]) == .malformed("exp is not a number"))
        // Expired, but within the leeway; then beyond it.
        #expect(refusal(good, now: Self.now.addingTimeInterval(600 + 299)) == nil)
        #expect(refusal(good, now: Self.now.addingTimeInterval(600 + 300)) == .expired)
        #expect(refusal(["iss": "https://i/", "aud": "api", "exp": Self.exp, "oid": "o", "nbf": 1_800_000_400]) == .notYetValid)
        #expect(refusal(["iss": "https://i/", "aud": "api", "exp": Self.exp]) == .malformed("no oid"))
        // An iat in the future counts only where the policy asks.
        let future: JWTClaims = ["iss": "https://i/", "aud": "api", "exp": Self.exp, "oid": "o", "iat": 1_800_000_400]
        #expect(refusal(future) == nil)
        #expect(
            refusal(future, ClaimPolicy(issuers: .exactly(["https://i/"]), audiences: ["api"], checksIssuedAt: true)) == .issuedInTheFuture)
        // Logout's hint: expired is fine, the issuer still counts.
        let hint = ClaimPolicy(issuers: .matching { $0.hasSuffix("/t/v2.0/") }, checksExpiry: false)
        #expect(refusal(["iss": "https://h/t/v2.0/", "exp": 1], hint) == nil)
        #expect(refusal(["iss": "https://h/u/v2.0/", "exp": 1], hint) == .untrustedIssuer)
    }
}
