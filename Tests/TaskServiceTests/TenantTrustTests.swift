import Foundation
import Synchronization
import TestSupport
import Testing

@testable import TaskService

/// A metadata fetcher answering from a table of URLs, counting what was asked: the tenant-trust
/// rules are about which URLs the validator is willing to fetch.
final class ScriptedFetcher: MetadataFetcher {
    let documents: [String: String]
    private let asked = Mutex<[String]>([])

    /// URLs match without regard to case, as the identity service resolves policy ids.
    init(_ documents: [String: String]) { self.documents = Dictionary(documents.map { ($0.key.lowercased(), $0.value) }) { a, _ in a } }

    func fetch(_ url: String) async throws -> Data {
        asked.withLock { $0.append(url) }
        guard let document = documents[url.lowercased()] else { throw URLError(.fileDoesNotExist) }
        return Data(document.utf8)
    }

    var fetched: [String] { asked.withLock { $0 } }
}

@Suite("Trust by tenant: a B2C tenant's policies found as their tokens name them")
struct TenantTrustTests {
    static let tenant = "https://b2c.test/contoso.onmicrosoft.com"
    static let issuer = "https://b2c.test/8d0e3f7a-0000-4000-8000-000000000001/v2.0/"

    static func discovery(_ policy: String) -> String { "\(tenant)/\(policy)/v2.0/.well-known/openid-configuration" }

    /// A policy's discovery document and JWKS under the tenant.
    static func documents(_ policy: String, issuer: String = issuer, keys: MockAuthority) -> [String: String] {
        let jwks = "\(tenant)/\(policy)/discovery/v2.0/keys"
        return [discovery(policy): #"{"issuer":"\#(issuer)","jwks_uri":"\#(jwks)"}"#, jwks: keys.jwks]
    }

    @Test("a policy made after the start verifies under its tenant; a made-up or foreign-issuer policy does not, and costs one fetch per interval")
    func policiesOfTheTenant() async throws {
        let flow = try MockAuthority(issuer: Self.issuer)
        let custom = try MockAuthority(issuer: Self.issuer)
        let elsewhere = try MockAuthority(issuer: "https://elsewhere.test/v2.0/")
        let fetcher = ScriptedFetcher(
            Self.documents("B2C_1_susi", keys: flow).merging(Self.documents("B2C_1A_signup_signin", keys: custom)) { a, _ in a }
                .merging(Self.documents("B2C_1A_foreign", issuer: "https://elsewhere.test/v2.0/", keys: elsewhere)) { a, _ in a })
        let policy = BearerPolicy(
            discoveryURLs: [Self.discovery("B2C_1_susi")], audiences: [MockAuthority.audience], tenantAuthorities: [Self.tenant + "/"])
        let validator = BearerValidator(policy: policy, fetcher: fetcher, logger: TestDatabase.logger)
        let now = Date()

        _ = try await validator.validate(flow.token(extra: ["tfp": "B2C_1_susi"]), now: now)
        let user = try await validator.validate(custom.token(oid: "ivy", extra: ["tfp": "B2C_1A_signup_signin"]), now: now)
        #expect(user.objectID == "ivy" && user.issuer == Self.issuer)
        #expect(fetcher.fetched.contains(Self.discovery("b2c_1a_signup_signin")))
        // `acr` names the policy too (B2C's older claim); once found, the policy is trusted.
        _ = try await validator.validate(custom.token(oid: "jo", extra: ["acr": "b2c_1a_signup_signin"]), now: now)

        // A policy the tenant does not have: one fetch, then none within the interval.
        let stranger = try MockAuthority(issuer: Self.issuer)
        for _ in 0..<3 {
            await #expect(throws: TokenRejection.unknownKey) {
                try await validator.validate(stranger.token(extra: ["tfp": "B2C_1A_nothing"]), now: now)
            }
        }
        #expect(fetcher.fetched.filter { $0 == Self.discovery("b2c_1a_nothing") }.count == 1)

        // A policy whose discovery document names another issuer than the tenant's is not
        // trusted: neither a token claiming the tenant's issuer nor one claiming its own.
        for issuer in [Self.issuer, "https://elsewhere.test/v2.0/"] {
            await #expect(throws: TokenRejection.unknownKey) {
                try await validator.validate(elsewhere.token(extra: ["iss": issuer, "tfp": "B2C_1A_foreign"]), now: now)
            }
        }

        // Case variants of a trusted policy add nothing and fetch nothing new.
        let discoveries = fetcher.fetched.filter { $0.hasSuffix("openid-configuration") }.count
        for variant in ["b2c_1a_SIGNUP_signin", "B2C_1A_SIGNUP_SIGNIN", "b2C_1a_signup_signiN"] {
            await #expect(throws: TokenRejection.unknownKey) {
                try await validator.validate(stranger.token(extra: ["tfp": variant]), now: now)
            }
        }
        #expect(fetcher.fetched.filter { $0.hasSuffix("openid-configuration") && $0.contains("signup_signin") }.count <= discoveries)
        #expect(validator.trustedURLs().count == 2, "\(validator.trustedURLs())")

        // Many made-up names: at most the interval's allowance of discoveries, all names together.
        let before = fetcher.fetched.count
        for index in 0..<40 {
            _ = try? await validator.validate(stranger.token(extra: ["tfp": "B2C_1A_made_up_\(index)"]), now: now)
        }
        let made = fetcher.fetched.dropFirst(before).filter { $0.contains("made_up") }.count
        #expect(made <= BearerValidator.discoveriesPerInterval, "\(made)")

        // Only a policy id extends the tenant's URL, by one segment.
        for name in ["../../evil", "B2C_1A_x/../../evil", "B2C_1A_x?p=evil", "https://evil.test/", "B2C_1A_x#evil", "evil", "B2C_1A_" + String(repeating: "x", count: 130)] {
            await #expect(throws: TokenRejection.unknownKey) {
                try await validator.validate(stranger.token(extra: ["tfp": name]), now: now)
            }
        }
        #expect(!fetcher.fetched.contains { $0.contains("evil") || $0.contains("xxxxxxxxxx") }, "\(fetcher.fetched)")
    }

    @Test("without tenant authorities a token's tfp is not followed")
    func onlyListedAuthorities() async throws {
        let flow = try MockAuthority(issuer: Self.issuer)
        let custom = try MockAuthority(issuer: Self.issuer)
        let fetcher = ScriptedFetcher(Self.documents("B2C_1_susi", keys: flow).merging(Self.documents("B2C_1A_signup_signin", keys: custom)) { a, _ in a })
        let validator = BearerValidator(
            policy: BearerPolicy(discoveryURLs: [Self.discovery("B2C_1_susi")], audiences: [MockAuthority.audience]), fetcher: fetcher,
            logger: TestDatabase.logger)
        await #expect(throws: TokenRejection.unknownKey) {
            try await validator.validate(custom.token(extra: ["tfp": "B2C_1A_signup_signin"]))
        }
        #expect(!fetcher.fetched.contains(Self.discovery("B2C_1A_signup_signin")))
    }
}
