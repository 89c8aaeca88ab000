import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// Graph beta's policy key sets (SPEC §2.12): the keys custom policies name, made or uploaded
/// through Graph, shown by their public parts only, sealed at rest.
@Suite("Policy key sets through Graph beta")
struct PolicyKeySetTests {
    static func json(_ headers: HTTPFields) -> HTTPFields { GraphUsersTests.json("", headers) }

    @Test("create (the B2C_1A_ prefix added), generateKey, uploadSecret, getActiveKey, list and delete", arguments: TestDatabase.engines)
    func lifecycle(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["TrustFrameworkKeySet.ReadWrite.All"])
            let created = try await driver.request(.post, "/beta/trustFramework/keySets", headers: Self.json(auth), body: #"{"id":"TokenSigningKeyContainer"}"#)
            #expect(created.status == .created, "\(created.text)")
            #expect(created.json["id"] as? String == "B2C_1A_TokenSigningKeyContainer")
            let twice = try await driver.request(.post, "/beta/trustFramework/keySets", headers: Self.json(auth), body: #"{"id":"B2C_1A_TokenSigningKeyContainer"}"#)
            #expect(twice.status == .conflict)

            let base = "/beta/trustFramework/keySets/B2C_1A_TokenSigningKeyContainer"
            let now = Int(h.clock.now.timeIntervalSince1970)
            let generated = try await driver.request(.post, "\(base)/generateKey", headers: Self.json(auth), body: #"{"use":"sig","kty":"RSA","nbf":\#(now - 10)}"#)
            #expect(generated.status == .ok, "\(generated.text)")
            #expect(generated.json["kty"] as? String == "RSA" && (generated.json["n"] as? String)?.count ?? 0 > 300)
            #expect(generated.json["d"] == nil && generated.json["p"] == nil, "no private part leaves")
            let active = try await driver.get("\(base)/getActiveKey", headers: auth)
            #expect(active.json["kid"] as? String == generated.json["kid"] as? String)

            // A secret: shown without its value; a later key not yet valid is not the active one.
            let secrets = try await driver.request(.post, "/beta/trustFramework/keySets", headers: Self.json(auth), body: #"{"id":"FacebookSecret"}"#)
            #expect(secrets.status == .created)
            let secret = try await driver.request(
                .post, "/beta/trustFramework/keySets/B2C_1A_FacebookSecret/uploadSecret", headers: Self.json(auth), body: #"{"use":"sig","k":"s3cret-value"}"#)
            #expect(secret.status == .ok && secret.json["kty"] as? String == "oct" && secret.json["k"] == nil, "\(secret.text)")
            #expect(!secret.text.contains("s3cret-value"))
            let future = try await driver.request(.post, "\(base)/generateKey", headers: Self.json(auth), body: #"{"use":"sig","kty":"RSA","nbf":\#(now + 3600)}"#)
            #expect(future.status == .ok)
            #expect(try await driver.get("\(base)/getActiveKey", headers: auth).json["kid"] as? String == generated.json["kid"] as? String)

            let listed = try await driver.get("/beta/trustFramework/keySets", headers: auth)
            let sets = try #require(listed.json["value"] as? [[String: Any]])
            #expect(sets.compactMap { $0["id"] as? String } == ["B2C_1A_FacebookSecret", "B2C_1A_TokenSigningKeyContainer"])
            #expect((sets[1]["keys"] as? [[String: Any]])?.count == 2)
            // At rest: sealed, never the secret in clear.
            let rows = try await h.database.rows("SELECT sealed_secret FROM trust_framework_keys", [])
            #expect(try rows.allSatisfy { try !$0.text("sealed_secret").contains("s3cret-value") && !$0.text("sealed_secret").contains("PRIVATE KEY") })

            #expect(try await driver.request(.delete, base, headers: auth).status == .noContent)
            #expect(try await driver.get(base, headers: auth).status == .notFound)
            #expect(try await driver.get("\(base)/getActiveKey", headers: auth).status == .notFound)
        }
    }

    @Test("bad input and missing roles answer Graph's error shape")
    func refusals() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["TrustFrameworkKeySet.ReadWrite.All"])
            _ = try await driver.request(.post, "/beta/trustFramework/keySets", headers: Self.json(auth), body: #"{"id":"Keys"}"#)
            for body in [#"{"use":"sig","kty":"EC"}"#, #"{"use":"other","kty":"RSA"}"#, #"{"use":"sig","kty":"RSA","nbf":100,"exp":50}"#, #"{"use":"sig"}"#,
                #"{"use":"sig","kty":"RSA","nbf":1e300}"#, #"{"use":"sig","kty":"RSA","exp":-5}"#,
            ] {
                let refused = try await driver.request(.post, "/beta/trustFramework/keySets/B2C_1A_Keys/generateKey", headers: Self.json(auth), body: body)
                #expect(refused.status == .badRequest, "\(body): \(refused.text)")
                #expect(refused.json["error"] as? [String: Any] != nil)
            }
            let bad = try await driver.request(.post, "/beta/trustFramework/keySets", headers: Self.json(auth), body: #"{"id":"no spaces"}"#)
            #expect(bad.status == .badRequest)
            let missing = try await driver.request(.post, "/beta/trustFramework/keySets/B2C_1A_None/uploadSecret", headers: Self.json(auth), body: #"{"k":"x"}"#)
            #expect(missing.status == .notFound)
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["TrustFrameworkKeySet.Read.All"])
            #expect(try await driver.get("/beta/trustFramework/keySets", headers: reader).status == .ok)
            let write = try await driver.request(.post, "/beta/trustFramework/keySets", headers: Self.json(reader), body: #"{"id":"More"}"#)
            #expect(write.status == .forbidden)
            let policies = try await GraphUsersTests.appToken(h, driver, roles: ["Policy.ReadWrite.TrustFramework"])
            #expect(try await driver.get("/beta/trustFramework/keySets", headers: policies).status == .forbidden)
        }
    }
}
