import Foundation
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// Password sign-in (ROPC) on the Entra face runs inside the flow the app signs in with: no
/// tokens where that flow asks for a second factor, its token connector runs, its type and
/// identity providers admit it, and consent covers the client id as a scope (the second outside
/// attack's F-1).
@Suite("Password grant boundaries")
struct PasswordGrantTests {
    static func ropc(_ h: IdentityHarness, scope: String, authority: String = "common") -> (String, [(String, String)]) {
        (
            "/\(authority)/oauth2/v2.0/token",
            [
                ("grant_type", "password"), ("client_id", h.clientID), ("username", "alice@example.com"), ("password", "Passw0rd!"),
                ("scope", scope),
            ]
        )
    }

    static func bind(_ h: IdentityHarness, to flow: String) async throws {
        var app = h.seed.publicApp
        app.userFlow = flow
        try await h.server.service.tenants.save(app, now: Date())
    }

    static func consent(_ h: IdentityHarness, _ user: UserAccount, _ keys: Set<String>) async throws {
        try await h.server.service.consents.grant(keys, userID: user.id, clientID: h.clientID, now: Date())
    }

    @Test(
        "a flow with MFA refuses the password grant with AADSTS50076 / basic_action, on every Entra authority",
        arguments: TestDatabase.engines)
    func mfaFlowRefusesPassword(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            try await Self.consent(h, alice, ["openid", "offline_access", h.clientID.lowercased()])
            let scope = "openid offline_access \(h.clientID)"
            // Consented and allowed: the password grant works in the app's own (MFA-less) flow.
            let (path, form) = Self.ropc(h, scope: scope)
            let plain = try await driver.post(path, form)
            #expect(plain.status == .ok, "\(plain.text)")

            for enforcement in [MFAPolicy.Enforcement.always, .conditional] {
                var flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_susi_mfa"))
                flow.mfa = MFAPolicy(methods: [.totp, .email], enforcement: enforcement)
                try await h.server.tenants.save(flow)
                try await Self.bind(h, to: "B2C_1_susi_mfa")
                for authority in ["common", "organizations", h.tenant.guid, h.tenant.name] {
                    let (path, form) = Self.ropc(h, scope: scope, authority: authority)
                    let refused = try await driver.post(path, form)
                    #expect(refused.status == .badRequest, "\(authority): \(refused.text)")
                    EntraFaceTests.expectEntraError(refused.json, code: 50076, error: "invalid_grant")
                    #expect(refused.json["suberror"] as? String == "basic_action")
                    #expect(refused.json["access_token"] == nil && refused.json["refresh_token"] == nil)
                }
            }

            // The tenant's default flow decides for an app bound to none.
            var app = h.seed.publicApp
            app.userFlow = nil
            try await h.server.service.tenants.save(app, now: Date())
            var susi = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: h.tenant.defaultPolicy))
            susi.mfa = MFAPolicy(methods: [.totp], enforcement: .always)
            try await h.server.tenants.save(susi)
            let viaDefault = try await driver.post(path, form)
            EntraFaceTests.expectEntraError(viaDefault.json, code: 50076, error: "invalid_grant")
        }
    }

    @Test("the app's flow must sign in with local accounts: a reset or federated-only flow refuses the password grant")
    func flowTypeAndProviders() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let alice = try await h.addUser()
            try await Self.consent(h, alice, ["openid"])
            let (path, form) = Self.ropc(h, scope: "openid")
            for flow in ["B2C_1_reset", "B2C_1_edit_profile", "B2C_1_facebook", "B2C_1_sign_up"] {
                try await Self.bind(h, to: flow)
                let refused = try await driver.post(path, form)
                EntraFaceTests.expectEntraError(refused.json, code: 70003, error: "unsupported_grant_type")
            }
            for flow in ["B2C_1_sign_in", "B2C_1_susi"] {
                try await Self.bind(h, to: flow)
                #expect(try await driver.post(path, form).status == .ok, "\(flow)")
            }
            // A bound flow that is gone fails closed: not the tenant's default instead.
            try await Self.bind(h, to: "B2C_1_gone")
            let gone = try await driver.post(path, form)
            #expect(gone.status != .ok && gone.json["id_token"] == nil, "\(gone.text)")
        }
    }

    @Test("the client id as the only scope needs the user's consent like any other scope", arguments: TestDatabase.engines)
    func clientIDScopeNeedsConsent(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            let (path, form) = Self.ropc(h, scope: h.clientID)
            let refused = try await driver.post(path, form)
            EntraFaceTests.expectEntraError(refused.json, code: 65001, error: "invalid_grant")
            #expect(refused.json["access_token"] == nil)
            // Consenting on the page to a token for the app itself records the client id.
            let attempt = EntraFaceTests.attempt(h, scope: "openid \(h.clientID)")
            let consentPage = try await driver.signIn(h, attempt: attempt, email: "alice@example.com")
            #expect(consentPage.text.contains("consentForm"), "a token to the app itself is consented on the page")
            #expect(try await driver.submit(consentPage, [("decision", "accept")]).redirectParameters["code"] != nil)
            #expect(try await h.server.service.consents.granted(userID: alice.id, clientID: h.clientID).contains(h.clientID.lowercased()))
            let granted = try await driver.post(path, form)
            #expect(granted.status == .ok, "\(granted.text)")
            #expect(DecodedJWT(granted.json["access_token"] as? String ?? "").claims["aud"] as? String == h.clientID)
        }
    }
}

extension APIConnectorTests {
    @Test("password sign-in on the Entra face runs the flow's token connector: its values in the tokens, its failure refuses")
    func passwordGrantRunsTokenConnector() async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                var flow = try await Self.signInWithTokenConnector(h, port: port)
                try await PasswordGrantTests.bind(h, to: "B2C_1_sign_in")
                let user = try await h.addUser()
                try await PasswordGrantTests.consent(h, user, ["openid", "offline_access"])
                let (path, form) = PasswordGrantTests.ropc(h, scope: "openid offline_access")
                let tokens = try await driver.post(path, form)
                #expect(tokens.status == .ok, "\(tokens.text)")
                let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
                #expect(claims["city"] as? String == "Override City" && claims["extension_memberLevel"] as? Int == 7)
                let call = try #require(await received.all().last)
                #expect(call.body["step"] as? String == "PreTokenIssuance" && call.body["objectId"] as? String == user.objectID)
                // The refresh keeps the sign-in's values without calling again.
                let refreshed = try await driver.post(
                    path,
                    [
                        ("grant_type", "refresh_token"), ("client_id", h.clientID),
                        ("refresh_token", try #require(tokens.json["refresh_token"] as? String)),
                    ])
                #expect(DecodedJWT(try #require(refreshed.json["id_token"] as? String)).claims["city"] as? String == "Override City")
                #expect(await received.all().count == 1)

                for failing in ["block", "fail"] {
                    flow.connectors = FlowConnectors(beforeSendingToken: failing)
                    try await h.server.tenants.save(flow)
                    let refused = try await driver.post(path, form)
                    EntraFaceTests.expectEntraError(refused.json, code: 1_100_001, error: "server_error")
                    #expect((refused.json["error_description"] as? String)?.contains("'\(failing)'") == true, "\(refused.text)")
                    #expect(refused.json["id_token"] == nil && refused.json["refresh_token"] == nil)
                }
            }
        }
    }
}
