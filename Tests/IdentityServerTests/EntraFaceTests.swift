import Foundation
import HTTPTypes
import HummingbirdTesting
import Storage
import TestSupport
import Testing

@testable import IdentityServer

/// The Microsoft identity platform face (SPEC §2.9): policy-less authorities with Entra's
/// discovery, instance discovery, v2 tokens, consent, account picker and AADSTS errors.
@Suite("The Microsoft identity platform face")
struct EntraFaceTests {
    static let graphScope = "openid profile offline_access User.Read"

    /// An authorization on the Entra authority `authority` for Graph's User.Read, as MSAL sends it.
    static func attempt(_ h: IdentityHarness, authority: String = "common", scope: String = graphScope) -> AuthorizationAttempt {
        var attempt = AuthorizationAttempt(harness: h, scope: scope)
        attempt.authority = authority
        attempt.extra = [("client_info", "1")]
        return attempt
    }

    /// Entra's JSON error: the AADSTS number in `error_codes` and the description, with trace
    /// and correlation ids, a timestamp and an `error_uri`.
    static func expectEntraError(_ body: [String: Any], code: Int, error: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(body["error"] as? String == error, sourceLocation: sourceLocation)
        #expect(body["error_codes"] as? [Int] == [code], sourceLocation: sourceLocation)
        let description = body["error_description"] as? String ?? ""
        #expect(description.hasPrefix("AADSTS\(code): "), "\(description)", sourceLocation: sourceLocation)
        #expect(description.contains("\r\nTrace ID: ") && description.contains("\r\nCorrelation ID: "), sourceLocation: sourceLocation)
        #expect(UUID(uuidString: body["trace_id"] as? String ?? "") != nil, sourceLocation: sourceLocation)
        #expect(UUID(uuidString: body["correlation_id"] as? String ?? "") != nil, sourceLocation: sourceLocation)
        #expect((body["timestamp"] as? String)?.hasSuffix("Z") == true, sourceLocation: sourceLocation)
        #expect((body["error_uri"] as? String)?.hasSuffix("/error?code=\(code)") == true, sourceLocation: sourceLocation)
    }

    @Test(
        "discovery: a templated issuer for common/organizations/consumers, the tenant's v2 issuer otherwise",
        arguments: TestDatabase.engines)
    func discovery(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let origin = IdentityHarness.origin
            for alias in ["common", "organizations", "consumers", "COMMON"] {
                let document = try await driver.get("/\(alias)/v2.0/.well-known/openid-configuration").json
                #expect(document["issuer"] as? String == "\(origin)/{tenantid}/v2.0", "\(alias)")
                #expect(document["authorization_endpoint"] as? String == "\(origin)/\(alias)/oauth2/v2.0/authorize")
                #expect(document["token_endpoint"] as? String == "\(origin)/\(alias)/oauth2/v2.0/token")
                #expect(document["jwks_uri"] as? String == "\(origin)/\(alias)/discovery/v2.0/keys")
                #expect(document["userinfo_endpoint"] as? String == "\(origin)/oidc/userinfo")
                #expect(document["end_session_endpoint"] as? String == "\(origin)/\(alias)/oauth2/v2.0/logout")
                #expect(document["request_uri_parameter_supported"] as? Bool == false)
                #expect(document["frontchannel_logout_supported"] as? Bool == true)
                #expect(document["http_logout_supported"] as? Bool == true)
                #expect(document["msgraph_host"] as? String == "localhost")
                #expect(document.keys.contains("tenant_region_scope") && document.keys.contains("cloud_instance_name"))
            }
            for tenant in [h.tenant.guid, h.tenant.name] {
                let document = try await driver.get("/\(tenant)/v2.0/.well-known/openid-configuration").json
                #expect(document["issuer"] as? String == "\(origin)/\(h.tenant.guid)/v2.0", "no trailing slash on the Entra issuer")
            }
            // The same tenant with a policy is still B2C's document.
            let b2c = try await driver.get(h.path("B2C_1_susi", "v2.0/.well-known/openid-configuration")).json
            #expect(b2c["issuer"] as? String == h.issuer)
            #expect(b2c["userinfo_endpoint"] == nil)

            let missing = try await driver.get("/nobody.onmicrosoft.com/v2.0/.well-known/openid-configuration")
            #expect(missing.status == .notFound)
            Self.expectEntraError(missing.json, code: 90002, error: "invalid_tenant")
            let b2cMissing = try await driver.get("/nobody.onmicrosoft.com/B2C_1_susi/v2.0/.well-known/openid-configuration")
            #expect((b2cMissing.json["error_description"] as? String)?.hasPrefix("AADB2C90037") == true)
            #expect(b2cMissing.json["error_codes"] == nil)
        }
    }

    @Test("instance discovery answers for this service's hosts and refuses others as invalid_instance", arguments: TestDatabase.engines)
    func instanceDiscovery(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let endpoint = Form.encode([("authorization_endpoint", "https://localhost/\(h.tenant.guid)/oauth2/v2.0/authorize")])
            let known = try await driver.get("/common/discovery/instance?api-version=1.1&\(endpoint)")
            #expect(known.status == .ok)
            #expect(
                known.json["tenant_discovery_endpoint"] as? String
                    == "\(IdentityHarness.origin)/\(h.tenant.guid)/v2.0/.well-known/openid-configuration")
            #expect(known.json["api-version"] as? String == "1.1")
            let metadata = (known.json["metadata"] as? [[String: Any]])?.first
            #expect(metadata?["preferred_network"] as? String == "localhost")
            #expect((metadata?["aliases"] as? [String])?.contains("localhost") == true)
            let discovered = try await driver.get("/\(h.tenant.guid)/v2.0/.well-known/openid-configuration")
            #expect(discovered.status == .ok)

            for foreign in ["https://login.microsoftonline.com/common/oauth2/v2.0/authorize", "not a url", "https://localhost/"] {
                let refused = try await driver.get(
                    "/common/discovery/instance?api-version=1.1&\(Form.encode([("authorization_endpoint", foreign)]))")
                #expect(refused.status == .badRequest, "\(foreign)")
                Self.expectEntraError(refused.json, code: 50049, error: "invalid_instance")
            }
            #expect(try await driver.get("/error?code=50049").text.contains("AADSTS50049"))
        }
    }

    @Test(
        "sign-in at /common: consent once, then v2 tokens with tid, preferred_username, a pairwise sub and Entra's client_info",
        arguments: TestDatabase.engines)
    func signInAtCommon(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            let attempt = Self.attempt(h)
            let consent = try await driver.signIn(h, attempt: attempt, email: "alice@example.com")
            #expect(consent.status == .ok)
            #expect(consent.text.contains("id=\"consentForm\""))
            #expect(consent.text.contains("Sign you in and read your profile"))
            #expect(consent.text.contains("Maintain access to data you have given it access to"))
            let redirect = try await driver.submit(consent, [("decision", "accept")])
            let parameters = redirect.redirectParameters
            #expect(parameters["state"] == attempt.state)
            let code = try #require(parameters["code"])

            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(tokens.status == .ok, "\(tokens.text)")
            let body = tokens.json
            for v1Field in ["not_before", "expires_on", "resource", "profile_info", "id_token_expires_in"] {
                #expect(body[v1Field] == nil, "\(v1Field)")
            }
            #expect(body["ext_expires_in"] as? Int != nil)
            let clientInfo = try #require(body["client_info"] as? String)
            let info = DecodedJWT("x.\(clientInfo)").claims
            #expect(info["uid"] as? String == user.objectID)
            #expect(info["utid"] as? String == h.tenant.guid)

            let idToken = DecodedJWT(try #require(body["id_token"] as? String)).claims
            #expect(idToken["ver"] as? String == "2.0")
            #expect(idToken["iss"] as? String == "\(IdentityHarness.origin)/\(h.tenant.guid)/v2.0")
            #expect(idToken["tid"] as? String == h.tenant.guid)
            #expect(idToken["oid"] as? String == user.objectID)
            #expect(idToken["preferred_username"] as? String == "alice@example.com")
            #expect(idToken["name"] as? String == "Alice")
            #expect(idToken["aud"] as? String == h.clientID)
            #expect(idToken["nonce"] as? String == attempt.nonce)
            #expect(idToken["tfp"] == nil)
            let sub = try #require(idToken["sub"] as? String)
            #expect(sub != user.objectID && sub.count == 43, "pairwise, not the object id")
            #expect((idToken["uti"] as? String)?.isEmpty == false)

            let accessToken = try #require(body["access_token"] as? String)
            let access = DecodedJWT(accessToken).claims
            #expect(access["aud"] as? String == APIPermission.graphResource)
            #expect(access["scp"] as? String == "User.Read")
            #expect(access["azp"] as? String == h.clientID && access["appid"] as? String == h.clientID)
            #expect(access["ver"] as? String == "2.0")

            let bearer: HTTPFields = [.authorization: "Bearer \(accessToken)"]
            #expect(try await driver.get("/v1.0/me", headers: bearer).json["userPrincipalName"] as? String == "alice@example.com")
            let userInfo = try await driver.get("/oidc/userinfo", headers: bearer)
            #expect(userInfo.status == .ok)
            #expect(userInfo.json["sub"] as? String == sub, "the same pairwise sub as the app's ID token")
            #expect(userInfo.json["name"] as? String == "Alice")
            #expect(try await driver.get("/oidc/userinfo").json["error"] != nil)

            // The refresh token works at the same authority and keeps the v2 shape.
            let refreshed = try await driver.post(
                "/common/oauth2/v2.0/token",
                [
                    ("grant_type", "refresh_token"), ("client_id", h.clientID), ("client_info", "1"),
                    ("refresh_token", try #require(body["refresh_token"] as? String)), ("scope", Self.graphScope),
                ])
            #expect(refreshed.status == .ok)
            #expect(DecodedJWT(refreshed.json["access_token"] as? String ?? "").claims["ver"] as? String == "2.0")

            // Consent is remembered: the next sign-in in this browser goes straight back.
            let again = try await driver.start(Self.attempt(h), harness: h)
            #expect(again.redirectParameters["code"] != nil)
            // prompt=consent asks again.
            var ask = Self.attempt(h)
            ask.extra.append(("prompt", "consent"))
            #expect(try await driver.start(ask, harness: h).text.contains("id=\"consentForm\""))
        }
    }

    @Test(
        "a refused consent is access_denied AADSTS65004 and prompt=none without consent is consent_required",
        arguments: TestDatabase.engines)
    func consentRefusals(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let consent = try await driver.signIn(h, attempt: Self.attempt(h), email: "alice@example.com")
            let cancelAction = try #require(
                consent.text.range(of: "<form method=\"post\" action=\"", options: .backwards).map {
                    String(consent.text[$0.upperBound...].prefix { $0 != "\"" })
                })
            let cancelled = try await driver.post(Form.unescapeHTML(cancelAction), [("csrf_token", consent.field("csrf_token") ?? "")])
            let refused = cancelled.redirectParameters
            #expect(refused["error"] == "access_denied")
            #expect(refused["error_description"]?.hasPrefix("AADSTS65004:") == true)
            #expect(refused["error_uri"]?.hasSuffix("/error?code=65004") == true)

            // The session exists now, but the consent does not.
            var silent = Self.attempt(h)
            silent.extra.append(("prompt", "none"))
            let required = try await driver.start(silent, harness: h).redirectParameters
            #expect(required["error"] == "consent_required")
            #expect(required["error_description"]?.hasPrefix("AADSTS65001:") == true)

            // Nothing was granted by the refusals: an interactive request still asks.
            #expect(try await driver.start(Self.attempt(h), harness: h).text.contains("id=\"consentForm\""))
        }
    }

    @Test("the token endpoint's errors are Entra's on a policy-less authority and B2C's on a policy URL", arguments: TestDatabase.engines)
    func tokenErrors(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let form = [
                ("grant_type", "authorization_code"), ("client_id", h.clientID), ("code", "nope"), ("redirect_uri", "http://localhost"),
            ]
            let entra = try await driver.post("/organizations/oauth2/v2.0/token", form)
            #expect(entra.status == .badRequest)
            Self.expectEntraError(entra.json, code: 70000, error: "invalid_grant")
            #expect(entra.json["correlation_id"] as? String == entra.headers[HTTPField.Name("client-request-id")!])
            let b2c = try await driver.post(h.path("B2C_1_susi", "oauth2/v2.0/token"), form)
            #expect(b2cCode(b2c) == "AADB2C90090")
            #expect(b2c.json["error_codes"] == nil && b2c.json["trace_id"] == nil)

            let secret = try await driver.post(
                "/common/oauth2/v2.0/token", [("grant_type", "refresh_token"), ("client_id", h.clientID), ("client_secret", "x")])
            Self.expectEntraError(secret.json, code: 700025, error: "invalid_request")
            let unknownClient = try await driver.post("/common/oauth2/v2.0/token", [("grant_type", "password"), ("client_id", "nobody")])
            Self.expectEntraError(unknownClient.json, code: 700016, error: "unauthorized_client")

            // Before the redirect URI is trusted, errors are pages quoting Entra's code.
            let noClient = try await driver.get("/common/oauth2/v2.0/authorize?response_type=code&scope=openid")
            #expect(noClient.status == .badRequest && noClient.text.contains("AADSTS900144"))
            let oob = try await driver.get(
                "/common/oauth2/v2.0/authorize?"
                    + Form.encode([
                        ("client_id", h.webClientID), ("response_type", "code"), ("scope", "openid"),
                        ("redirect_uri", "urn:ietf:wg:oauth:2.0:oob"),
                    ]))
            #expect(oob.status == .badRequest && oob.text.contains("AADSTS50011") && oob.headers[.location] == nil)

            // ROPC on the Entra face: the app's "allow public client flows" decides, as in Entra.
            _ = try await h.addUser()
            let ropc = try await driver.post(
                "/organizations/oauth2/v2.0/token",
                [
                    ("grant_type", "password"), ("client_id", h.clientID), ("username", "alice@example.com"), ("password", "Passw0rd!"),
                    ("scope", "openid User.Read"),
                ])
            #expect(ropc.status == .ok, "\(ropc.text)")
            #expect(DecodedJWT(ropc.json["id_token"] as? String ?? "").claims["preferred_username"] as? String == "alice@example.com")
            let wrong = try await driver.post(
                "/organizations/oauth2/v2.0/token",
                [("grant_type", "password"), ("client_id", h.clientID), ("username", "alice@example.com"), ("password", "wrong")])
            Self.expectEntraError(wrong.json, code: 50126, error: "invalid_grant")
        }
    }

    @Test("prompt=select_account lists the browser's accounts and continues as the one picked", arguments: TestDatabase.engines)
    func accountPicker(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            let bob = try await h.addUser("bob@example.com", name: "Bob")
            var first = Self.attempt(h, scope: "openid \(h.clientID)")
            first.extra.append(("prompt", "login"))
            for email in ["alice@example.com", "bob@example.com"] {
                let consent = try await driver.signIn(h, attempt: first, email: email)
                #expect(try await driver.submit(consent, [("decision", "accept")]).redirectParameters["code"] != nil)
            }

            var pick = Self.attempt(h, scope: "openid \(h.clientID)")
            pick.extra.append(("prompt", "select_account"))
            let picker = try await driver.start(pick, harness: h)
            #expect(picker.status == .ok)
            #expect(picker.text.contains("id=\"account-\(alice.objectID)\"") && picker.text.contains("id=\"account-\(bob.objectID)\""))
            #expect(picker.link(id: "useAnotherAccount") != nil)
            let action = try #require(picker.formAction)
            let chosen = try await driver.follow(
                try await driver.post(
                    Form.unescapeHTML(action), [("csrf_token", picker.field("csrf_token") ?? ""), ("account", alice.objectID)]))
            let code = try #require(chosen.redirectParameters["code"])
            let tokens = try await driver.redeem(h, attempt: pick, code: code)
            #expect(DecodedJWT(tokens.json["id_token"] as? String ?? "").claims["oid"] as? String == alice.objectID)
            // Alice is now the browser's current account: plain SSO answers as her.
            let plain = Self.attempt(h, scope: "openid \(h.clientID)")
            let ssoCode = try #require(try await driver.start(plain, harness: h).redirectParameters["code"])
            let ssoTokens = try await driver.redeem(h, attempt: plain, code: ssoCode)
            #expect(DecodedJWT(ssoTokens.json["id_token"] as? String ?? "").claims["oid"] as? String == alice.objectID)

            // An account the browser holds no session for cannot be picked.
            let picker2 = try await driver.start(pick, harness: h)
            let forged = try await driver.post(
                Form.unescapeHTML(try #require(picker2.formAction)),
                [("csrf_token", picker2.field("csrf_token") ?? ""), ("account", UUID().uuidString.lowercased())])
            #expect(forged.status == .badRequest)
        }
    }

    @Test(
        "an app's own user flow (External ID) runs on a policy-less authorize, and its codes redeem there", arguments: TestDatabase.engines)
    func appBoundUserFlow(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var app = h.seed.publicApp
            app.userFlow = "B2C_1_sign_up"
            try await h.server.service.tenants.save(app, now: Date())
            let attempt = Self.attempt(h, authority: h.tenant.guid, scope: "openid offline_access \(h.clientID)")
            let first = try await driver.start(attempt, harness: h)
            #expect(first.text.contains("email_ver_but_send"), "the sign-up flow's first page")
            let done = try await driver.signUp(h, attempt: attempt, email: "new@example.com", name: "Newton")
            let consent = done.text.contains("consentForm") ? try await driver.submit(done, [("decision", "accept")]) : done
            let code = try #require(consent.redirectParameters["code"])
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(tokens.status == .ok, "\(tokens.text)")
            let claims = DecodedJWT(tokens.json["id_token"] as? String ?? "").claims
            #expect(claims["ver"] as? String == "2.0" && claims["preferred_username"] as? String == "new@example.com")
        }
    }
}
