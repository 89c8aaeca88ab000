import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
@testable import UserJourneys
import WireCoding

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

            // ROPC on the Entra face: the app's "allow public client flows" decides, as in Entra,
            // and it shows no consent page, so it works only for what the user consented to.
            _ = try await h.addUser()
            let ropcForm = [
                ("grant_type", "password"), ("client_id", h.clientID), ("username", "alice@example.com"), ("password", "Passw0rd!"),
                ("scope", "openid User.Read"),
            ]
            let unconsented = try await driver.post("/organizations/oauth2/v2.0/token", ropcForm)
            Self.expectEntraError(unconsented.json, code: 65001, error: "invalid_grant")
            let consent = try await driver.signIn(h, attempt: Self.attempt(h), email: "alice@example.com")
            #expect(try await driver.submit(consent, [("decision", "accept")]).redirectParameters["code"] != nil)
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
            #expect(done.text.contains("consentForm"), "a new user consents too")
            let code = try #require(try await driver.submit(done, [("decision", "accept")]).redirectParameters["code"])
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            #expect(tokens.status == .ok, "\(tokens.text)")
            let claims = DecodedJWT(tokens.json["id_token"] as? String ?? "").claims
            #expect(claims["ver"] as? String == "2.0" && claims["preferred_username"] as? String == "new@example.com")
        }
    }
    /// Consents, then returns the tokens of a sign-in on `/common` for `scope`.
    static func consentedTokens(_ h: IdentityHarness, _ driver: Driver, scope: String = graphScope) async throws -> [String: Any] {
        let attempt = Self.attempt(h, scope: scope)
        var page = try await driver.start(attempt, harness: h)
        if page.text.contains("localAccountForm") {
            page = try await driver.submit(page, [("email", "alice@example.com"), ("password", "Passw0rd!")])
        }
        if page.text.contains("consentForm") { page = try await driver.submit(page, [("decision", "accept")]) }
        let code = try #require(page.redirectParameters["code"])
        return try await driver.redeem(h, attempt: attempt, code: code).json
    }

    @Test(
        "consent is incremental: a new API's scopes ask again, and a refresh cannot reach beyond what was consented",
        arguments: TestDatabase.engines)
    func incrementalConsent(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let tokens = try await Self.consentedTokens(h, driver)
            let refreshToken = try #require(tokens["refresh_token"] as? String)
            // The app holds the Task API's scopes too (admin permission); the user consented to Graph only.
            let apiScope = try #require(h.seed.apiScopes.first)
            let refreshToAPI = [
                ("grant_type", "refresh_token"), ("client_id", h.clientID), ("refresh_token", refreshToken),
                ("scope", "openid \(apiScope)"),
            ]
            Self.expectEntraError(
                try await driver.post("/common/oauth2/v2.0/token", refreshToAPI).json, code: 65001, error: "invalid_grant")

            let more = try await driver.start(Self.attempt(h, scope: "openid offline_access \(apiScope)"), harness: h)
            #expect(more.text.contains("id=\"consentForm\""), "a scope not consented yet asks again")
            #expect(more.text.contains("tasks.read"))
            #expect(try await driver.submit(more, [("decision", "accept")]).redirectParameters["code"] != nil)
            // Now the same refresh may move to the API: both are consented.
            let allowed = try await driver.post("/common/oauth2/v2.0/token", refreshToAPI)
            #expect(allowed.status == .ok, "\(allowed.text)")
        }
    }

    @Test(
        "the consent page needs the browser session of the user who signed in; the Entra sign-in page has no forgot-password link",
        arguments: TestDatabase.engines)
    func consentNeedsTheSession(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            let signInPage = try await driver.start(Self.attempt(h), harness: h)
            #expect(signInPage.link(id: "forgotPassword") == nil)
            #expect(signInPage.link(id: "createAccount") != nil)
            let consent = try await driver.submit(signInPage, [("email", "alice@example.com"), ("password", "Passw0rd!")])
            #expect(consent.text.contains("consentForm"))
            let action = Form.unescapeHTML(try #require(consent.formAction))
            // Without the SSO cookie (another browser holding the same CSRF cookie, say) the page refuses.
            for name in driver.cookies.keys where name.hasPrefix("x-ms-cpim-sso-") { driver.cookies[name] = nil }
            let refused = try await driver.post(action, [("csrf_token", consent.field("csrf_token") ?? ""), ("decision", "accept")])
            #expect(refused.status == .forbidden)
            #expect(try await h.server.service.consents.granted(userID: alice.id, clientID: h.clientID).isEmpty)
        }
    }

    @Test("codes and refresh tokens redeem only on the face that issued them", arguments: TestDatabase.engines)
    func faceBinding(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            // A code from B2C's authorize (which asks no consent) cannot buy Entra tokens.
            let b2c = AuthorizationAttempt(harness: h)
            let code = try #require(try await driver.signIn(h, attempt: b2c, email: "alice@example.com").redirectParameters["code"])
            var atEntra = b2c
            atEntra.authority = "common"
            Self.expectEntraError(try await driver.redeem(h, attempt: atEntra, code: code).json, code: 70000, error: "invalid_grant")
            // Not consumed by the refusal: the code still redeems where it was issued.
            let b2cTokens = try await driver.redeem(h, attempt: b2c, code: code)
            #expect(b2cTokens.status == .ok)

            // A B2C refresh token at the Entra endpoint, and an Entra one at B2C's.
            let b2cRefresh = try #require(b2cTokens.json["refresh_token"] as? String)
            func refresh(_ token: String) -> [(String, String)] {
                [("grant_type", "refresh_token"), ("client_id", h.clientID), ("refresh_token", token)]
            }
            let crossed = try await driver.post("/common/oauth2/v2.0/token", refresh(b2cRefresh))
            Self.expectEntraError(crossed.json, code: 70000, error: "invalid_grant")
            let entraRefresh = try #require(try await Self.consentedTokens(h, driver)["refresh_token"] as? String)
            #expect(b2cCode(try await driver.post(h.path("B2C_1_susi", "oauth2/v2.0/token"), refresh(entraRefresh))) == "AADB2C90088")
            // Each still works on its own face (the refusals consumed nothing).
            #expect(try await driver.post(h.path("B2C_1_susi", "oauth2/v2.0/token"), refresh(b2cRefresh)).status == .ok)
            #expect(try await driver.post("/common/oauth2/v2.0/token", refresh(entraRefresh)).status == .ok)
        }
    }

    @Test(
        "the picker honours prompt=login; login_hint picks the account; SSO never falls back to another account",
        arguments: TestDatabase.engines)
    func pickerRules(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            let bob = try await h.addUser("bob@example.com", name: "Bob")
            let scope = "openid \(h.clientID)"
            var first = Self.attempt(h, scope: scope)
            first.extra.append(("prompt", "login"))
            for email in ["alice@example.com", "bob@example.com"] {
                let consent = try await driver.signIn(h, attempt: first, email: email)
                _ = try await driver.submit(consent, [("decision", "accept")])
            }
            // prompt=login: the sign-in page, and the picker's URL offers nobody.
            var login = Self.attempt(h, scope: scope)
            login.extra.append(("prompt", "login"))
            let page = try await driver.start(login, harness: h)
            #expect(page.text.contains("localAccountForm"))
            let pickerURL = Form.unescapeHTML(try #require(page.formAction)).replacingOccurrences(
                of: "/pages/signin?", with: "/pages/accounts?")
            let picker = try await driver.get(pickerURL)
            #expect(picker.status == .ok)
            #expect(!picker.text.contains("account-\(alice.objectID)") && !picker.text.contains("account-\(bob.objectID)"))
            let chosen = try await driver.post(pickerURL, [("csrf_token", page.field("csrf_token") ?? ""), ("account", alice.objectID)])
            #expect(chosen.status == .badRequest && chosen.redirectParameters["code"] == nil)

            // login_hint on the Entra face picks that account's session, though Bob's is the current one.
            var hinted = Self.attempt(h, scope: scope)
            hinted.extra += [("prompt", "none"), ("login_hint", "ALICE@example.com")]
            let hintCode = try #require(try await driver.start(hinted, harness: h).redirectParameters["code"])
            let hintTokens = try await driver.redeem(h, attempt: hinted, code: hintCode)
            #expect(DecodedJWT(hintTokens.json["id_token"] as? String ?? "").claims["oid"] as? String == alice.objectID)
            var stranger = Self.attempt(h, scope: scope)
            stranger.extra += [("prompt", "none"), ("login_hint", "carol@example.com")]
            #expect(try await driver.start(stranger, harness: h).redirectParameters["error"] == "login_required")

            // The current session ends: SSO does not answer as the other account the browser holds.
            let ids = SSOCookieValue.ids(driver.cookies["x-ms-cpim-sso-\(h.tenant.guid)"])
            #expect(ids.count == 2)
            try await h.server.service.interactions.deleteSession(idHash: Secrets.sha256Hex(try #require(ids.first)))
            var silent = Self.attempt(h, scope: scope)
            silent.extra.append(("prompt", "none"))
            #expect(try await driver.start(silent, harness: h).redirectParameters["error"] == "login_required")
        }
    }

    @Test("Graph refuses a token this service's key signed under a foreign issuer", arguments: TestDatabase.engines)
    func graphIssuer(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            let key = try await h.server.service.keys.activeKey()
            // The harness's clock, not the wall's: it is set when the harness starts, and a slow
            // machine can be past `nbf`'s ten seconds of slack by the time this line runs.
            let now = Int64(h.clock.now.timeIntervalSince1970)
            func bearer(issuer: String) throws -> HTTPFields {
                let token = try JSONWebToken.sign(
                    claims: .object([
                        ("iss", .string(issuer)), ("aud", .string(APIPermission.graphResource)), ("exp", .int(now + 600)),
                        ("nbf", .int(now - 10)), ("oid", .string(user.objectID)), ("sub", .string(user.objectID)),
                        ("scp", .string("User.Read")),
                    ]), with: key)
                return [.authorization: "Bearer \(token)"]
            }
            #expect(try await driver.get("/v1.0/me", headers: try bearer(issuer: "http://localhost/\(h.tenant.guid)/v2.0")).status == .ok)
            for foreign in [
                "https://localhost/\(h.tenant.guid)/v2.0", "http://evil.example/\(h.tenant.guid)/v2.0", "localhost/x", "nonsense",
            ] {
                #expect(try await driver.get("/v1.0/me", headers: try bearer(issuer: foreign)).status == .unauthorized, "\(foreign)")
            }
        }
    }
}
