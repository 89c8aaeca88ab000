import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// External ID's native authentication API, sign-in with a password (SPEC §2.15): initiate,
/// challenge and token with continuation tokens bound to app, tenant and step, spent once;
/// every refusal in the API's own error form.
@Suite("Native authentication: sign-in")
struct NativeAuthTests {
    static func path(_ h: IdentityHarness, _ endpoint: String) -> String { "/\(h.tenant.name)/oauth2/v2.0/\(endpoint)" }

    static func error(_ response: TestResponse) -> (String?, Int?, String?) {
        (response.json["error"] as? String, (response.json["error_codes"] as? [Int])?.first, response.json["suberror"] as? String)
    }

    /// initiate and challenge for `email`; the token step's continuation token.
    static func toTokenStep(_ h: IdentityHarness, _ driver: Driver, email: String = "alice@example.com", client: String? = nil) async throws
        -> String
    {
        let client = client ?? h.clientID
        let started = try await driver.post(
            path(h, "initiate"), [("client_id", client), ("username", email), ("challenge_type", "password redirect")])
        #expect(started.status == .ok, "\(started.text)")
        let first = try #require(started.json["continuation_token"] as? String)
        let challenged = try await driver.post(
            path(h, "challenge"), [("client_id", client), ("continuation_token", first), ("challenge_type", "password redirect")])
        #expect(challenged.json["challenge_type"] as? String == "password", "\(challenged.text)")
        let second = try #require(challenged.json["continuation_token"] as? String)
        #expect(second != first)
        return second
    }

    static func token(_ h: IdentityHarness, _ driver: Driver, _ continuation: String, password: String = "Passw0rd!", client: String? = nil)
        async throws -> TestResponse
    {
        try await driver.post(
            path(h, "token"),
            [
                ("client_id", client ?? h.clientID), ("continuation_token", continuation), ("grant_type", "password"), ("password", password),
                ("scope", "openid offline_access"),
            ])
    }

    @Test("a password sign-in: tokens of the Entra face with client_info; the continuation token works once", arguments: TestDatabase.engines)
    func passwordSignIn(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            let continuation = try await Self.toTokenStep(h, driver)
            let tokens = try await Self.token(h, driver, continuation)
            #expect(tokens.status == .ok, "\(tokens.text)")
            #expect(tokens.json["challenge_type"] == nil, "\(tokens.text)")
            #expect(tokens.json["token_type"] as? String == "Bearer" && tokens.json["refresh_token"] is String && tokens.json["client_info"] is String)
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["oid"] as? String == user.objectID && claims["ver"] as? String == "2.0")
            // Only OpenID Connect's scopes were asked for: Entra still answers an access token,
            // for Microsoft Graph, good for UserInfo and nothing more.
            let accessToken = try #require(tokens.json["access_token"] as? String, "\(tokens.text)")
            let access = DecodedJWT(accessToken).claims
            #expect(access["aud"] as? String == APIPermission.graphResource && access["scp"] as? String == "openid", "\(access)")
            #expect(tokens.json["expires_in"] is Int)
            let bearer: HTTPFields = [.authorization: "Bearer \(accessToken)"]
            #expect(try await driver.get("/oidc/userinfo", headers: bearer).status == .ok)
            #expect(try await driver.get("/v1.0/me", headers: bearer).status == .forbidden, "no User.Read in it")
            // Spent: the same token again continues nothing.
            #expect(Self.error(try await Self.token(h, driver, continuation)) == ("invalid_request", 55_200, nil))
        }
    }

    @Test("refusals in the API's form: an app that did not opt in, an unknown app, no redirect, no account, a wrong step or app, a wrong password, an expired flow", arguments: TestDatabase.engines)
    func refusals(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let plain = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "No native", kind: .public, redirectURIs: [])
            try await h.server.tenants.save(plain, now: Date())
            var other = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "Other native", kind: .public, redirectURIs: [])
            other.nativeAuthentication = true
            try await h.server.tenants.save(other, now: Date())
            func initiate(_ fields: [(String, String)]) async throws -> TestResponse { try await driver.post(Self.path(h, "initiate"), fields) }

            #expect(
                Self.error(try await initiate([("client_id", plain.clientIDString), ("username", "alice@example.com"), ("challenge_type", "password redirect")]))
                    == ("invalid_client", 500_208, "nativeauthapi_disabled"))
            #expect(
                Self.error(try await initiate([("client_id", UUID().uuidString), ("username", "alice@example.com"), ("challenge_type", "password redirect")])).0
                    == "unauthorized_client")
            #expect(
                Self.error(try await initiate([("client_id", h.clientID), ("username", "alice@example.com"), ("challenge_type", "password")]))
                    == ("invalid_request", 901_007, nil))
            #expect(
                Self.error(try await initiate([("client_id", h.clientID), ("username", "nobody@example.com"), ("challenge_type", "password redirect")]))
                    == ("user_not_found", 50_034, nil))
            #expect(
                Self.error(try await initiate([("client_id", h.clientID), ("username", "not an email"), ("challenge_type", "password redirect")]))
                    == ("invalid_request", 90_100, nil))
            // Only a code offered, which this account does not sign in with here: the browser.
            let oobOnly = try await initiate([("client_id", h.clientID), ("username", "alice@example.com"), ("challenge_type", "oob redirect")])
            let oobToken = try #require(oobOnly.json["continuation_token"] as? String)
            let redirected = try await driver.post(
                Self.path(h, "challenge"), [("client_id", h.clientID), ("continuation_token", oobToken), ("challenge_type", "oob redirect")])
            #expect(redirected.status == .ok && redirected.json["challenge_type"] as? String == "redirect")

            // The initiate step's token at the token endpoint, another app's token: nothing.
            let started = try await initiate([("client_id", h.clientID), ("username", "alice@example.com"), ("challenge_type", "password redirect")])
            let early = try #require(started.json["continuation_token"] as? String)
            #expect(Self.error(try await Self.token(h, driver, early)) == ("invalid_request", 55_200, nil))
            let mine = try await Self.toTokenStep(h, driver)
            #expect(Self.error(try await Self.token(h, driver, mine, client: other.clientIDString)) == ("invalid_request", 55_200, nil))

            // Wrong passwords: each refused; after five the flow is gone, even for the right one.
            for _ in 0..<5 { #expect(Self.error(try await Self.token(h, driver, mine, password: "Wrong-Pass1")) == ("invalid_grant", 50_126, nil)) }
            #expect(Self.error(try await Self.token(h, driver, mine)) == ("invalid_request", 55_200, nil))

            // A flow with a second factor needs its pages: the browser.
            var guarded = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "MFA native", kind: .public, redirectURIs: [])
            guarded.nativeAuthentication = true
            guarded.userFlow = "B2C_1_susi_mfa"
            try await h.server.tenants.save(guarded, now: Date())
            let withMFA = try await Self.toTokenStep(h, driver, client: guarded.clientIDString)
            let browser = try await Self.token(h, driver, withMFA, client: guarded.clientIDString)
            #expect(browser.status == .ok && browser.json["challenge_type"] as? String == "redirect" && browser.json["access_token"] == nil)

            // Ten minutes on, a flow has expired.
            let late = try await Self.toTokenStep(h, driver)
            h.clock.advance(by: NativeAuthFlows.lifetime + 1)
            #expect(Self.error(try await Self.token(h, driver, late)).0 == "expired_token")
            // Not on B2C's policy URLs.
            let b2c = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/initiate"), [("client_id", h.clientID), ("username", "alice@example.com"), ("challenge_type", "password redirect")])
            #expect(b2c.status == .notFound)
        }
    }

    @Test("/dev/faults arms a documented error on one native endpoint, once; unknown endpoints and errors are refused")
    func faults() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser()
            let json: HTTPFields = [.contentType: "application/json"]
            func arm(_ body: String) async throws -> TestResponse { try await driver.request(.post, "/dev/faults", headers: json, body: body) }
            #expect(try await arm(#"{"endpoint":"signup/v1.0/start","error":"user_already_exists"}"#).status == .noContent)
            let start: [(String, String)] = [("client_id", h.clientID), ("username", "new@example.com"), ("challenge_type", "oob password redirect")]
            #expect(Self.error(try await driver.post("/\(h.tenant.name)/signup/v1.0/start", start)) == ("user_already_exists", 1_003_037, nil))
            // Once: the next call is served.
            #expect(try await driver.post("/\(h.tenant.name)/signup/v1.0/start", start).json["continuation_token"] is String)
            #expect(try await arm(#"{"endpoint":"oauth2/v2.0/token","error":"redirect"}"#).status == .noContent)
            let continuation = try await Self.toTokenStep(h, driver)
            let redirected = try await Self.token(h, driver, continuation)
            #expect(redirected.status == .ok && redirected.json["challenge_type"] as? String == "redirect" && redirected.json["access_token"] == nil)
            #expect(try await arm(#"{"endpoint":"oauth2/v2.0/initiate","error":"password_too_weak"}"#).status == .noContent)
            #expect(Self.error(try await driver.post(Self.path(h, "initiate"), [("client_id", h.clientID)])).2 == "password_too_weak")
            #expect(try await arm(#"{"endpoint":"signup/v1.0/nothing","error":"user_not_found"}"#).status == .badRequest)
            #expect(try await arm(#"{"endpoint":"signup/v1.0/start","error":"no_such_error"}"#).status == .badRequest)
            #expect(try await arm(#"{"endpoint":"signup/v1.0/start","error":"user_not_found","delayMs":5}"#).status == .badRequest)
        }
    }
}
