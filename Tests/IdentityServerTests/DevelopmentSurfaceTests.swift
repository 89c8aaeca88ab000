import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// The test-control surface (issue 11): the outbox as data, token minting through the real
/// issuer, reset, and fault injection; none of it where development is off.
@Suite("Test-control surface")
struct DevelopmentSurfaceTests {
    static let json: HTTPFields = [.contentType: "application/json"]

    @Test("the outbox as JSON: newest first, each message's code parsed out", arguments: TestDatabase.engines)
    func outboxAsData(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            var page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            page = try await driver.follow(try await driver.get(try #require(page.link(id: "createAccount"))))
            _ = try await driver.submit(page, [("step", "send"), ("email", "first@example.com")])
            _ = try await driver.submit(page, [("step", "send"), ("email", "second@example.com")])
            let outbox = try await driver.get("/dev/outbox", headers: [.accept: "application/json"])
            #expect(outbox.status == .ok)
            let messages = try #require(outbox.json["messages"] as? [[String: Any]])
            #expect(messages.compactMap { $0["recipient"] as? String } == ["second@example.com", "first@example.com"])
            #expect(messages.first?["code"] as? String == (try await h.latestCode()))
            #expect((try await driver.get("/dev/outbox?format=json")).json["messages"] != nil)
            #expect((try await driver.get("/dev/outbox")).headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(DevelopmentControl.code(in: "Your code is 1234567 or 042517.") == "042517")
            #expect(DevelopmentControl.code(in: "Your code is: 12345678\nIt expires in 10 minutes.") == "12345678")
        }
    }

    @Test("tokens minted without a browser are the real issuer's, and refresh like a sign-in's", arguments: TestDatabase.engines)
    func minting(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            let minted = try await driver.request(
                .post, "/dev/tokens", headers: Self.json,
                body: #"{"user":"alice@example.com","client":"\#(h.clientID)","policy":"B2C_1_ROPC"}"#)
            #expect(minted.status == .ok, "\(minted.text)")
            let claims = DecodedJWT(try #require(minted.json["id_token"] as? String)).claims
            #expect(
                claims["oid"] as? String == user.objectID && claims["iss"] as? String == h.issuer
                    && claims["tfp"] as? String == "B2C_1_ROPC")
            #expect(DecodedJWT(minted.json["access_token"] as? String ?? "").claims["aud"] as? String == h.clientID)
            let refresh = try await driver.refresh(h, token: try #require(minted.json["refresh_token"] as? String))
            #expect(refresh.status == .ok)

            let entra = try await driver.request(
                .post, "/dev/tokens", headers: Self.json,
                body: #"{"user":"\#(user.objectID)","client":"\#(h.clientID)","scope":"openid User.Read","entra":true}"#)
            #expect(DecodedJWT(entra.json["id_token"] as? String ?? "").claims["ver"] as? String == "2.0")
            let me = try await driver.get("/v1.0/me", headers: [.authorization: "Bearer \(entra.json["access_token"] as? String ?? "")"])
            #expect(me.status == .ok)

            // Refusals in B2C's JSON form.
            for (body, code) in [
                (#"{"user":"nobody@example.com","client":"\#(h.clientID)"}"#, "AADB2C90037"),
                (#"{"user":"alice@example.com","client":"\#(UUID())"}"#, "AADB2C90018"),
                (#"{"user":"alice@example.com","client":"\#(h.clientID)","policy":"B2C_1_nope"}"#, "AADB2C90037"),
                (#"{"user":"alice@example.com","client":"\#(h.clientID)","scope":"https://elsewhere.example/api/read"}"#, "AADB2C90012"),
                (#"{"client":"x"}"#, "AADB2C90037"),
            ] {
                let refused = try await driver.request(.post, "/dev/tokens", headers: Self.json, body: body)
                #expect(refused.status.code >= 400 && refused.status.code < 500, "\(body)")
                #expect(b2cCode(refused) == code, "\(body): \(refused.text)")
            }
        }
    }

    @Test(
        "reset returns the tenant to its seeded state: accounts, sessions, outbox and faults go; apps and keys stay",
        arguments: TestDatabase.engines)
    func reset(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let code = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "alice@example.com").redirectParameters[
                "code"]
            #expect(code != nil)
            let refresh = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as? String
            _ = try await h.server.service.interactions.saveVerificationCode(
                interactionID: "x", tenantID: h.tenant.id, email: "a@example.com", userID: nil, code: "123456",
                expiresAt: Date().addingTimeInterval(600),
                mail: OutboxMessage(
                    id: OutboxMessage.newID(), tenantID: h.tenant.id, recipient: "a@example.com", subject: "Code", body: "123456",
                    createdAt: Date()), limits: .default, now: Date())
            _ = try await driver.request(.post, "/dev/faults", headers: Self.json, body: #"{"policy":"B2C_1_susi","error":"server_error"}"#)
            let keysBefore = try await driver.get(h.path("B2C_1_susi", "discovery/v2.0/keys")).text

            // Another site's page cannot reach it: a form post (no JSON), a foreign Origin, a cross-site fetch.
            let form = try await driver.request(.post, "/dev/reset", headers: [.contentType: "application/x-www-form-urlencoded"], body: "")
            #expect(form.status == .badRequest)
            let foreign = try await driver.request(
                .post, "/dev/reset", headers: [.contentType: "application/json", .origin: "https://evil.example"], body: "{}")
            #expect(foreign.status == .forbidden)
            let crossSite = try await driver.request(
                .post, "/dev/reset", headers: [.contentType: "application/json", HTTPField.Name("Sec-Fetch-Site")!: "cross-site"],
                body: "{}")
            #expect(crossSite.status == .forbidden)
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
            let reset = try await driver.request(.post, "/dev/reset", headers: Self.json, body: "{}")
            #expect(reset.status == .ok && reset.json["accountsRemoved"] as? Int == 1)
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
            #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)
            #expect(try await b2cCode(driver.refresh(h, token: try #require(refresh))) == "AADB2C90090")
            // The fault is gone with the rest, the browser's session too; apps and keys stay.
            let page = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            #expect(page.text.contains("localAccountForm"))
            #expect(try await driver.get(h.path("B2C_1_susi", "discovery/v2.0/keys")).text == keysBefore)
            #expect(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: h.clientID) != nil)
        }
    }

    @Test("a fault armed on a flow answers its next call once, in B2C's form, then the flow works", arguments: TestDatabase.engines)
    func faults(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            #expect(
                try await driver.request(.post, "/dev/faults", headers: Self.json, body: #"{"policy":"b2c_1_SUSI","error":"AADB2C90118"}"#)
                    .status
                    == .noContent)
            let first = try await driver.start(AuthorizationAttempt(harness: h), harness: h)
            #expect(first.redirectParameters["error"] == "access_denied" && b2cCode(redirect: first) == "AADB2C90118")
            #expect(try await driver.start(AuthorizationAttempt(harness: h), harness: h).text.contains("localAccountForm"))

            _ = try await driver.request(.post, "/dev/faults", headers: Self.json, body: #"{"policy":"B2C_1_ROPC","error":"server_error"}"#)
            let failed = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")
            #expect(failed.status == .internalServerError && b2cCode(failed) == "AADB2C90085")
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)

            _ = try await driver.request(.post, "/dev/faults", headers: Self.json, body: #"{"policy":"B2C_1_ROPC","delayMs":300}"#)
            let start = ContinuousClock.now
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)
            #expect(ContinuousClock.now - start >= .milliseconds(300))

            _ = try await driver.request(.post, "/dev/faults", headers: Self.json, body: #"{"policy":"B2C_1_ROPC","error":"AADB2C90091"}"#)
            #expect(try await driver.request(.delete, "/dev/faults").status == .noContent)
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)

            for body in [
                #"{"policy":"B2C_1_nope","error":"server_error"}"#, #"{"policy":"B2C_1_susi","error":"made_up"}"#,
                #"{"policy":"B2C_1_susi"}"#, #"{"policy":"B2C_1_susi","error":"server_error","delayMs":5}"#,
                #"{"policy":"B2C_1_susi","delayMs":600000}"#,
            ] {
                let refused = try await driver.request(.post, "/dev/faults", headers: Self.json, body: body)
                #expect(refused.status.code >= 400 && refused.status.code < 500, "\(body)")
            }
            // What a fault names is checked first: an unknown flow is AADB2C90037 (404) however
            // else the request is wrong, an unknown endpoint is named as such.
            for body in [#"{"policy":"B2C_1_nope"}"#, #"{"policy":"B2C_1_nope","error":"x","delayMs":5}"#] {
                let refused = try await driver.request(.post, "/dev/faults", headers: Self.json, body: body)
                #expect(refused.status == .notFound && String(buffer: refused.body).contains("AADB2C90037"), "\(body)")
            }
            let unknownEndpoint = try await driver.request(
                .post, "/dev/faults", headers: Self.json, body: #"{"endpoint":"signup/v9/start","delayMs":5}"#)
            #expect(String(buffer: unknownEndpoint.body).contains("Unknown native-authentication endpoint"))
        }
    }

    @Test("without development on, the surface is not there", arguments: TestDatabase.engines)
    func absent(engine: DatabaseEngine) async throws {
        var configuration = IdentityServerConfiguration(passwordHashCost: 4)
        configuration.developmentMailbox = false
        try await IdentityHarness.run(engine, configuration: configuration) { h, driver in
            _ = try await h.addUser()
            for (method, path) in [
                (HTTPRequest.Method.post, "/dev/tokens"), (.post, "/dev/reset"), (.post, "/dev/faults"), (.get, "/dev/outbox"),
            ] {
                let response = try await driver.request(
                    method, path, headers: Self.json, body: #"{"user":"alice@example.com","client":"\#(h.clientID)"}"#)
                #expect(response.status == .notFound, "\(path)")
            }
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
        }
    }
}

extension DevelopmentSurfaceTests {
    @Test(
        "a provider's unproven address is not the account's name: Entra's preferred_username and Graph's userPrincipalName are {oid}@{tenant}, mail is null (F-5)",
        arguments: TestDatabase.engines)
    func unprovenProviderAddress(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            for proven in [false, true] {
                let user = UserAccount(
                    tenantID: h.tenant.id, identityProvider: .upstream(issuer: "https://idp.example.com"),
                    signInName: "subject-\(proven)", email: "victim\(proven ? "-own" : "")@example.com", displayName: "Claimed",
                    createdAt: Date(), emailVerified: proven)
                try await h.server.users.create(user)
                let minted = try await driver.request(
                    .post, "/dev/tokens", headers: Self.json,
                    body: #"{"user":"\#(user.objectID)","client":"\#(h.clientID)","scope":"openid User.Read","entra":true}"#)
                let claims = DecodedJWT(try #require(minted.json["id_token"] as? String, "\(minted.text)")).claims
                let access = try #require(minted.json["access_token"] as? String)
                let me = try await driver.get("/v1.0/me", headers: [.authorization: "Bearer \(access)"]).json
                if proven {
                    #expect(claims["preferred_username"] as? String == user.email)
                    #expect(me["mail"] as? String == user.email && me["userPrincipalName"] as? String == user.email)
                } else {
                    let principal = "\(user.objectID)@\(h.tenant.name)"
                    #expect(claims["preferred_username"] as? String == principal)
                    #expect(DecodedJWT(access).claims["preferred_username"] as? String == principal)
                    #expect(me["mail"] is NSNull && me["userPrincipalName"] as? String == principal, "\(me)")
                    #expect(GraphUserJSON.user(user, tenant: h.tenant, select: ["mail"]).serialized.contains("\"mail\":null"))
                }
            }
        }
    }
}
