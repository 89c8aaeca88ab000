import CryptoExtras
import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

@Suite("Endpoints in every URL shape, discovery and JWKS")
struct ProtocolShapeTests {
    @Test("discovery answers in path, query, tfp, GUID and case-insensitive forms, echoing the shape", arguments: TestDatabase.engines)
    func discoveryShapes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let tenant = h.tenant.name
            let origin = IdentityHarness.origin
            let cases: [(String, String)] = [
                ("/\(tenant)/B2C_1_susi/v2.0/.well-known/openid-configuration", "\(origin)/\(tenant)/B2C_1_susi/oauth2/v2.0/authorize"),
                ("/\(tenant)/b2c_1_SUSI/v2.0/.well-known/openid-configuration", "\(origin)/\(tenant)/b2c_1_SUSI/oauth2/v2.0/authorize"),
                ("/\(tenant)/v2.0/.well-known/openid-configuration?p=b2c_1_susi", "\(origin)/\(tenant)/oauth2/v2.0/authorize?p=b2c_1_susi"),
                (
                    "/tfp/\(tenant)/B2C_1_susi/v2.0/.well-known/openid-configuration",
                    "\(origin)/tfp/\(tenant)/B2C_1_susi/oauth2/v2.0/authorize"
                ),
                (
                    "/\(h.tenant.guid)/B2C_1_susi/v2.0/.well-known/openid-configuration",
                    "\(origin)/\(h.tenant.guid)/B2C_1_susi/oauth2/v2.0/authorize"
                ),
                // passport-azure-ad appends p= to a path-form URL.
                (
                    "/\(tenant)/B2C_1_susi/v2.0/.well-known/openid-configuration?p=B2C_1_susi",
                    "\(origin)/\(tenant)/B2C_1_susi/oauth2/v2.0/authorize"
                ),
                // The ADAL-era form without v2.0.
                ("/\(tenant)/B2C_1_susi/.well-known/openid-configuration", "\(origin)/\(tenant)/B2C_1_susi/oauth2/v2.0/authorize"),
            ]
            for (path, authorize) in cases {
                let response = try await driver.get(path)
                #expect(response.status == .ok, "\(path)")
                let document = response.json
                #expect(document["authorization_endpoint"] as? String == authorize, "\(path)")
                #expect(document["issuer"] as? String == h.issuer, "\(path): the issuer is the tenant GUID form everywhere")
            }
        }
    }

    @Test("discovery has B2C's fields and no userinfo endpoint", arguments: TestDatabase.engines)
    func discoveryFields(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let document = try await driver.get(h.path("B2C_1_susi", "v2.0/.well-known/openid-configuration")).json
            let base = "\(IdentityHarness.origin)/\(h.tenant.name)/B2C_1_susi"
            #expect(document["token_endpoint"] as? String == "\(base)/oauth2/v2.0/token")
            #expect(document["end_session_endpoint"] as? String == "\(base)/oauth2/v2.0/logout")
            #expect(document["jwks_uri"] as? String == "\(base)/discovery/v2.0/keys")
            #expect(document["response_modes_supported"] as? [String] == ["query", "fragment", "form_post"])
            #expect(document["subject_types_supported"] as? [String] == ["pairwise"])
            #expect(document["id_token_signing_alg_values_supported"] as? [String] == ["RS256"])
            #expect(document["token_endpoint_auth_methods_supported"] as? [String] == ["client_secret_post", "client_secret_basic"])
            let claims = document["claims_supported"] as? [String] ?? []
            for claim in ["oid", "emails", "name", "idp", "newUser", "tfp", "nonce", "auth_time"] { #expect(claims.contains(claim)) }
            #expect(document["userinfo_endpoint"] == nil)
            #expect((document["response_types_supported"] as? [String])?.contains("code") == true)
        }
    }

    @Test("unknown tenant and unknown policy answer 404 with a B2C error; userrealm answers 404", arguments: TestDatabase.engines)
    func notFound(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let tenantMissing = try await driver.get("/nobody.onmicrosoft.com/B2C_1_susi/v2.0/.well-known/openid-configuration")
            #expect(tenantMissing.status == .notFound)
            #expect((tenantMissing.json["error_description"] as? String)?.contains("Correlation ID: ") == true)
            let policyMissing = try await driver.get(h.path("B2C_1_nope", "v2.0/.well-known/openid-configuration"))
            #expect(policyMissing.status == .notFound)
            #expect((policyMissing.json["error_description"] as? String)?.contains("B2C_1_nope") == true)
            let keysMissing = try await driver.get(h.path("B2C_1_nope", "discovery/v2.0/keys"))
            #expect(keysMissing.status == .notFound)
            let realm = try await driver.get("/common/userrealm/alice@example.com?api-version=1.0")
            #expect(realm.status == .notFound)
            let junk = try await driver.get("/\(h.tenant.name)/B2C_1_susi/oauth2/v2.0/nothing")
            #expect(junk.status == .notFound)
        }
    }

    @Test(
        "every endpoint is routed in the tfp, legacy te, query and v1 shapes; wrong methods and paths get B2C's 404",
        arguments: TestDatabase.engines)
    func everyShapeRoutes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let tenant = h.tenant.name
            for keys in [
                "/tfp/\(tenant)/B2C_1_susi/discovery/v2.0/keys", "/te/\(tenant)/b2c_1_susi/discovery/keys",
                "/\(tenant)/discovery/v2.0/keys?p=B2C_1_susi", "/\(tenant.uppercased())/B2C_1_SUSI/DISCOVERY/V2.0/KEYS",
            ] {
                let response = try await driver.get(keys)
                #expect(response.status == .ok, "\(keys)")
                #expect((response.json["keys"] as? [Any])?.isEmpty == false, "\(keys)")
            }
            // The token endpoint in the query and tfp shapes: reached, and refusing a missing grant.
            for token in ["/\(tenant)/oauth2/v2.0/token?p=B2C_1_ROPC", "/tfp/\(tenant)/B2C_1_ROPC/oauth2/token"] {
                let response = try await driver.post(token, [("client_id", h.clientID)])
                #expect(response.status == .badRequest, "\(token)")
                #expect(response.json["error"] as? String == "invalid_request", "\(token)")
            }
            // The authorize endpoint in the tfp shape: a page, since no client was named.
            let authorize = try await driver.get("/tfp/\(tenant)/B2C_1_susi/oauth2/v2.0/authorize")
            #expect(authorize.status == .badRequest)
            #expect(authorize.headers[.contentType]?.hasPrefix("text/html") == true)
            // GET on the token endpoint, and a path nothing serves: B2C's JSON 404.
            for path in ["/\(tenant)/B2C_1_susi/oauth2/v2.0/token", "/\(tenant)/B2C_1_susi/oauth2/v2.0/nothing", "/"] {
                let response = try await driver.get(path)
                #expect(response.status == .notFound, "\(path)")
                #expect((response.json["error_description"] as? String)?.hasPrefix("AADB2C90037") == true, "\(path)")
            }
        }
    }

    @Test(
        "hosted pages: each page is a route; another flow's URL, an unknown page and a wrong method are refused",
        arguments: TestDatabase.engines)
    func pageRoutes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            // Setup: a sign-in transaction on its sign-in page.
            let page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            let action = try #require(page.formAction)
            let transaction = try #require(URLComponents(string: action)?.queryItems?.first { $0.name == "tx" }?.value)
            let tenant = h.tenant.name

            // The same transaction under another flow's URL: a page saying so, not the flow.
            let foreign = try await driver.get("/\(tenant)/B2C_1_sign_in/pages/signin?tx=\(transaction)")
            #expect(foreign.status == .badRequest)
            #expect(foreign.text.contains("does not belong to this sign-in"))
            // The same transaction under another tenant's URL with a flow of the same name: refused.
            let other = Tenant(id: UUID(), name: "other.onmicrosoft.com", displayName: "Other", defaultPolicy: "B2C_1_susi")
            try await h.server.tenants.save(other, now: Date())
            try await h.server.tenants.save(UserFlow(tenantID: other.id, name: "B2C_1_susi", type: .signUpOrSignIn))
            let otherTenant = try await driver.get("/\(other.name)/B2C_1_susi/pages/signin?tx=\(transaction)")
            #expect(otherTenant.status == .badRequest)
            #expect(otherTenant.text.contains("does not belong to this sign-in"))
            // A page nobody serves, and a page's wrong method: B2C's JSON 404.
            for (method, path) in [(HTTPRequest.Method.get, "nothing"), (.get, "cancel"), (.post, "forgot")] {
                let response = try await driver.request(method, "/\(tenant)/B2C_1_susi/pages/\(path)?tx=\(transaction)", form: [])
                #expect(response.status == .notFound, "\(method) \(path)")
                #expect((response.json["error_description"] as? String)?.hasPrefix("AADB2C90037") == true, "\(method) \(path)")
            }
            // The transaction still works on its own URL.
            #expect(try await driver.get(action).status == .ok)
        }
    }

    @Test("the JWKS publishes kid/nbf/use/kty/e/n only, and its key verifies issued tokens", arguments: TestDatabase.engines)
    func jwks(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let jwks = try await driver.get("/tfp/\(h.tenant.name)/B2C_1_ROPC/discovery/v2.0/keys").json
            let keys = jwks["keys"] as? [[String: Any]] ?? []
            #expect(keys.count == 1)
            let key = try #require(keys.first)
            #expect(Set(key.keys) == ["kid", "nbf", "use", "kty", "e", "n"])
            #expect(key["use"] as? String == "sig")
            #expect(key["kty"] as? String == "RSA")

            let token = try #require(
                try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["access_token"] as? String)
            let jwt = DecodedJWT(token)
            #expect(jwt.headerJSON == "{\"typ\":\"JWT\",\"alg\":\"RS256\",\"kid\":\"\(key["kid"] as! String)\"}")
            #expect(try verifyRS256(token, n: key["n"] as! String, e: key["e"] as! String))
            // A flipped payload byte fails verification against the same key.
            var parts = token.split(separator: ".").map(String.init)
            parts[1] = String(parts[1].dropLast()) + (parts[1].hasSuffix("A") ? "B" : "A")
            #expect(try !verifyRS256(parts.joined(separator: "."), n: key["n"] as! String, e: key["e"] as! String))
        }
    }

    @Test(
        "rotation publishes the new key at once, signs with it only after the propagation delay, and keeps the old one until its tokens expire",
        arguments: TestDatabase.engines)
    func keyRotation(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let signedBy = { () async throws -> String? in
                let token = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["access_token"] as! String
                return DecodedJWT(token).header["kid"] as? String
            }
            let kids = { () async throws -> Set<String> in
                let keys = try await driver.get(h.path("B2C_1_ROPC", "discovery/v2.0/keys")).json["keys"] as? [[String: Any]] ?? []
                return Set(keys.compactMap { $0["kid"] as? String })
            }
            let old = try await h.server.keys.activeKey()
            let new = try await h.server.keys.rotate(activateAfter: 600, retiredKeysPublishedFor: 3600)
            #expect(old.kid != new.kid)
            // Published at once, not signing yet.
            #expect(try await kids() == [old.kid, new.kid])
            #expect(try await signedBy() == old.kid)
            h.clock.advance(by: 599)
            #expect(try await signedBy() == old.kid)
            h.clock.advance(by: 2)
            #expect(try await signedBy() == new.kid)
            #expect(try await kids() == [old.kid, new.kid])
            // The old key leaves the JWKS once its window after the hand-over is over.
            h.clock.advance(by: 3600)
            #expect(try await kids() == [new.kid])
            // --now: signs at once.
            let urgent = try await h.server.keys.rotate(activateAfter: 0)
            #expect(try await signedBy() == urgent.kid)
            #expect(try await kids() == [new.kid, urgent.kid])
        }
    }

    @Test("revoking a pending key leaves the key it was to replace signing, past the planned hand-over", arguments: TestDatabase.engines)
    func revokePendingKey(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let old = try await h.server.keys.activeKey()
            let pending = try await h.server.keys.rotate(activateAfter: 600)
            #expect(try await h.server.keys.revoke(kid: pending.kid) == nil, "nothing replaced: the pending key never signed")
            h.clock.advance(by: 601)
            h.server.keys.invalidate()
            #expect(try await h.server.keys.activeKey().kid == old.kid)
            let keys = try await driver.get(h.path("B2C_1_ROPC", "discovery/v2.0/keys")).json["keys"] as? [[String: Any]] ?? []
            #expect(keys.compactMap { $0["kid"] as? String } == [old.kid])
        }
    }

    @Test(
        "an instance that did not rotate publishes the new key within its ring refresh, long before it signs with it",
        arguments: TestDatabase.engines)
    func rotationAcrossInstances(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, _ in
            let other = SigningKeyRing(database: h.database, dataKey: h.server.service.dataKey, clock: h.clock)
            let old = try await other.activeKey()
            #expect(try await other.publishedKeys().map(\.kid) == [old.kid])
            // Another instance (the harness's server) rotates with the default delay.
            let new = try await h.server.keys.rotate()
            #expect(
                SigningKeyRing.propagationDelay > SigningKeyRing.refreshInterval + 300, "longer than the ring refresh and validators' cache"
            )
            h.clock.advance(by: SigningKeyRing.refreshInterval + 1)
            #expect(Set(try await other.publishedKeys().map(\.kid)) == [old.kid, new.kid])
            #expect(try await other.activeKey().kid == old.kid)
            h.clock.advance(by: SigningKeyRing.propagationDelay)
            #expect(try await other.activeKey().kid == new.kid)
        }
    }

    @Test("client-request-id is echoed, or a correlation id is made", arguments: TestDatabase.engines)
    func correlation(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let id = "3f0a7d7e-7d35-4f2a-9a59-1f0c2d4f9b11"
            let echoed = try await driver.get(
                h.path("B2C_1_susi", "v2.0/.well-known/openid-configuration"), headers: [.init("client-request-id")!: id])
            #expect(echoed.headers[.init("client-request-id")!] == id)
            let made = try await driver.ropc(h, username: "nobody@example.com", password: "x")
            let generated = try #require(made.headers[.init("client-request-id")!])
            #expect(UUID(uuidString: generated) != nil)
            #expect((made.json["error_description"] as? String)?.contains("Correlation ID: \(generated)") == true)
        }
    }
}

/// Verifies an RS256 JWS with a JWK's base64url n and e.
func verifyRS256(_ token: String, n: String, e: String) throws -> Bool {
    let parts = token.split(separator: ".").map(String.init)
    func decode(_ text: String) -> Data {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64) ?? Data()
    }
    let key = try _RSA.Signing.PublicKey(n: decode(n), e: decode(e))
    return key.isValidSignature(
        _RSA.Signing.RSASignature(rawRepresentation: decode(parts[2])), for: Data("\(parts[0]).\(parts[1])".utf8),
        padding: .insecurePKCS1v1_5)
}
