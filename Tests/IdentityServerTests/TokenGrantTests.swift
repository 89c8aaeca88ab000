import Foundation
import HummingbirdTesting
@testable import IdentityDirectory
import SQLKit
import Storage
import TestSupport
import Testing
@testable import UserJourneys
import WireCoding

@testable import IdentityServer

@Suite("Token endpoint: grants, client authentication, refresh rotation, lockout")
struct TokenGrantTests {
    @Test(
        "ROPC returns B2C's full response with JSON numbers, no-store, client_info and the B2C claim set", arguments: TestDatabase.engines)
    func ropcResponse(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser("Alice@Example.com")
            let response = try await driver.ropc(h, username: "alice@EXAMPLE.com", password: "Passw0rd!")
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "no-store")
            let body = response.json
            #expect(body["token_type"] as? String == "Bearer")
            #expect(body["expires_in"] as? Int == 3600)
            #expect(body["id_token_expires_in"] as? Int == 3600)
            #expect(body["refresh_token_expires_in"] as? Int == 1_209_600)
            #expect(body["not_before"] is Int)
            #expect((body["expires_on"] as? Int) == (body["not_before"] as? Int).map { $0 + 3600 })
            #expect(body["resource"] as? String == h.clientID)
            #expect(body["scope"] as? String == "\(h.clientID) openid offline_access")
            #expect(response.text.contains("\"expires_in\":3600"), "numbers are JSON numbers, not strings")

            let clientInfo = DecodedJWT("x." + (body["client_info"] as! String)).claims
            #expect(clientInfo["uid"] as? String == "\(user.objectID)-b2c_1_ropc")
            #expect(clientInfo["utid"] as? String == h.tenant.guid)
            let profile = DecodedJWT("x." + (body["profile_info"] as! String)).claims
            #expect(profile["idp"] as? String == "LocalAccount")
            #expect(profile["tid"] as? String == h.tenant.guid)

            let id = DecodedJWT(body["id_token"] as! String).claims
            #expect(id["ver"] as? String == "1.0")
            #expect(id["iss"] as? String == h.issuer)
            #expect(id["sub"] as? String == user.objectID)
            #expect(id["oid"] as? String == user.objectID)
            #expect(id["aud"] as? String == h.clientID)
            #expect(id["tfp"] as? String == "B2C_1_ROPC")
            #expect(id["emails"] as? [String] == ["Alice@Example.com"])
            #expect(id["name"] as? String == "Alice")
            #expect(id["idp"] == nil, "local accounts have no idp claim")
            #expect(id["auth_time"] is Int)
            let access = DecodedJWT(body["access_token"] as! String).claims
            #expect(access["azp"] as? String == h.clientID)
            #expect(access["aud"] as? String == h.clientID)
            #expect(access["oid"] as? String == user.objectID)
        }
    }

    @Test(
        "scope rules: openid alone gives no access token; API scopes give scp; profile is ignored; two resources are refused",
        arguments: TestDatabase.engines)
    func scopeRules(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let idOnly = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: "openid profile").json
            #expect(idOnly["access_token"] == nil)
            #expect(idOnly["id_token"] != nil)
            #expect(idOnly["refresh_token"] == nil)
            #expect(idOnly["scope"] as? String == "openid")

            let api = "https://\(h.tenant.name)/tasks/tasks.read"
            let withAPI = try await driver.ropc(
                h, username: "alice@example.com", password: "Passw0rd!", scope: "\(api) openid offline_access profile"
            ).json
            let access = DecodedJWT(withAPI["access_token"] as! String).claims
            #expect(access["scp"] as? String == "tasks.read")
            #expect(access["aud"] as? String == h.clientID)
            #expect(withAPI["scope"] as? String == "\(api) openid offline_access")

            let two = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: "\(api) User.Read openid")
            #expect(two.status == .badRequest)
            #expect(b2cCode(two) == "AADB2C90146")
            let nothing = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: "offline_access")
            #expect(b2cCode(nothing) == "AADB2C90115")
        }
    }

    @Test(
        "client authentication: public clients must not send a secret, confidential ones must send the right one",
        arguments: TestDatabase.engines)
    func clientAuthentication(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let token = h.path("B2C_1_susi", "oauth2/v2.0/token")
            let publicWithSecret = try await driver.post(
                token, [("grant_type", "refresh_token"), ("client_id", h.clientID), ("client_secret", "x"), ("refresh_token", "y")])
            #expect(b2cCode(publicWithSecret) == "AADB2C90084")
            let confidentialWithout = try await driver.post(
                token, [("grant_type", "refresh_token"), ("client_id", h.webClientID), ("refresh_token", "y")])
            #expect(b2cCode(confidentialWithout) == "AADB2C90079")
            let wrongSecret = try await driver.post(
                token, [("grant_type", "refresh_token"), ("client_id", h.webClientID), ("client_secret", "wrong"), ("refresh_token", "y")])
            #expect(wrongSecret.status == .unauthorized)
            #expect(b2cCode(wrongSecret) == "AADB2C90081")
            #expect(wrongSecret.json["error"] as? String == "invalid_client")
            // The right secret through client_secret_basic gets past authentication to the grant.
            let basic = Data("\(h.webClientID):\(h.webSecret)".utf8).base64EncodedString()
            let right = try await driver.post(
                token, [("grant_type", "refresh_token"), ("refresh_token", "unknown")], headers: [.authorization: "Basic \(basic)"])
            #expect(b2cCode(right) == "AADB2C90090")
            let unknownClient = try await driver.post(
                token, [("grant_type", "refresh_token"), ("client_id", UUID().uuidString), ("refresh_token", "y")])
            #expect(b2cCode(unknownClient) == "AADB2C90018")
            let badGrant = try await driver.post(token, [("grant_type", "magic"), ("client_id", h.clientID)])
            #expect(b2cCode(badGrant) == "AADB2C90086")
            #expect(badGrant.json["error"] as? String == "unsupported_grant_type")
        }
    }

    @Test("client_credentials gives a confidential app an app-only token for an API", arguments: TestDatabase.engines)
    func clientCredentials(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let response = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [
                    ("grant_type", "client_credentials"), ("client_id", h.webClientID), ("client_secret", h.webSecret),
                    ("scope", "https://\(h.tenant.name)/tasks/.default"),
                ])
            #expect(response.status == .ok)
            let claims = DecodedJWT(response.json["access_token"] as! String).claims
            #expect(claims["aud"] as? String == h.clientID)
            #expect(claims["sub"] as? String == h.webClientID)
            #expect(claims["azp"] as? String == h.webClientID)
            #expect(claims["name"] == nil)
            #expect(claims["roles"] as? [String] == ["Tasks.ReadWrite.All"], "the application roles granted to the web app")
            #expect(claims["idtyp"] as? String == "app")
            // Without a role on the API, no app-only token for it.
            var web = h.seed.webApp
            web.apiPermissions = web.apiPermissions.map { APIPermission(resource: $0.resource, scopes: $0.scopes) }
            try await h.server.tenants.save(web, now: h.clock.now)
            let roleless = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [
                    ("grant_type", "client_credentials"), ("client_id", h.webClientID), ("client_secret", h.webSecret),
                    ("scope", "https://\(h.tenant.name)/tasks/.default"),
                ])
            #expect(b2cCode(roleless) == "AADB2C90205")
            let publicClient = try await driver.post(
                h.path("B2C_1_susi", "oauth2/v2.0/token"),
                [("grant_type", "client_credentials"), ("client_id", h.clientID), ("scope", "https://\(h.tenant.name)/tasks/.default")])
            #expect(b2cCode(publicClient) == "AADB2C90086")
        }
    }

    @Test("ROPC only in a ROPC flow, for apps that allow it; wrong passwords get AADB2C90225", arguments: TestDatabase.engines)
    func ropcRules(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let wrongFlow = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", policy: "B2C_1_susi")
            #expect(b2cCode(wrongFlow) == "AADB2C90086")
            let wrongPassword = try await driver.ropc(h, username: "alice@example.com", password: "nope")
            #expect(wrongPassword.json["error"] as? String == "invalid_grant")
            #expect(b2cCode(wrongPassword) == "AADB2C90225")
            let unknown = try await driver.ropc(h, username: "nobody@example.com", password: "Passw0rd!")
            #expect(b2cCode(unknown) == "AADB2C90225", "unknown and wrong look the same")
            // An app without "allow public client flows".
            var app = h.seed.publicApp
            app.allowPublicClientFlows = false
            try await h.server.tenants.save(app, now: h.clock.now)
            let disabled = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")
            #expect(b2cCode(disabled) == "AADB2C90224")
            #expect(disabled.json["error"] as? String == "unauthorized_client")
        }
    }

    @Test(
        "smart lockout: 10 failures lock for 60 s, repeats of one wrong password count once, success resets",
        arguments: TestDatabase.engines)
    func lockout(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            // The same wrong password many times counts once.
            for _ in 0..<12 { _ = try await driver.ropc(h, username: "alice@example.com", password: "same-wrong") }
            #expect(
                try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok, "success resets the counter")
            for attempt in 1...10 {
                let response = try await driver.ropc(h, username: "alice@example.com", password: "wrong-\(attempt)")
                #expect(b2cCode(response) == "AADB2C90225")
            }
            let locked = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")
            #expect(b2cCode(locked) == "AADB2C90114", "even the right password is refused while locked")
            h.clock.advance(by: 61)
            #expect(try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").status == .ok)
            // After a lockout, one more failure locks again.
            for attempt in 1...10 { _ = try await driver.ropc(h, username: "alice@example.com", password: "again-\(attempt)") }
            h.clock.advance(by: 61)
            _ = try await driver.ropc(h, username: "alice@example.com", password: "one-more")
            #expect(try await b2cCode(driver.ropc(h, username: "alice@example.com", password: "Passw0rd!")) == "AADB2C90114")
        }
    }

    @Test(
        "refresh tokens rotate; a rotated token again within the reuse interval gets the same successor, later it revokes the family",
        arguments: TestDatabase.engines)
    func refreshRotation(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let first = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            let refreshed = try await driver.refresh(h, token: first)
            #expect(refreshed.status == .ok)
            let second = try #require(refreshed.json["refresh_token"] as? String)
            #expect(second != first)
            #expect(refreshed.json["access_token"] != nil)
            // The same client racing itself: within the interval, the same successor, nothing revoked.
            let raced = try await driver.refresh(h, token: first)
            #expect(raced.status == .ok && raced.json["refresh_token"] as? String == second)
            // Past the interval the first token is a reused one: the family is revoked.
            h.clock.advance(by: 6)
            let reuse = try await driver.refresh(h, token: first)
            #expect(b2cCode(reuse) == "AADB2C90129")
            let afterReuse = try await driver.refresh(h, token: second)
            #expect(b2cCode(afterReuse) == "AADB2C90129", "the legitimate holder's newer token died with the family")

            // Within the interval too, once the successor was used, reuse revokes.
            let third = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            let fourth = try #require(try await driver.refresh(h, token: third).json["refresh_token"] as? String)
            #expect(try await driver.refresh(h, token: fourth).status == .ok)
            #expect(b2cCode(try await driver.refresh(h, token: third)) == "AADB2C90129")
            let garbage = try await driver.refresh(h, token: "not-a-token")
            #expect(b2cCode(garbage) == "AADB2C90090")
        }
    }

    @Test(
        "a retry delayed by a database outage past the reuse interval gets the unused successor, not a revoked family (P-2); once the successor is used, or past the outage window, reuse revokes",
        arguments: TestDatabase.engines)
    func refreshRetryAfterOutage(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            // A busy pool is no outage: past the interval, reuse.
            let busy = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            #expect(try await driver.refresh(h, token: busy).status == .ok)
            _ = h.database.health.classify(StorageError.unavailable("no PostgreSQL connection within 30 s"))
            h.clock.advance(by: 60)
            #expect(b2cCode(try await driver.refresh(h, token: busy)) == "AADB2C90129")

            // Without an outage, past the interval: reuse.
            let plain = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            #expect(try await driver.refresh(h, token: plain).status == .ok)
            h.clock.advance(by: 60)
            #expect(b2cCode(try await driver.refresh(h, token: plain)) == "AADB2C90129")

            // Past the outage window the retry is reuse.
            let early = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            #expect(try await driver.refresh(h, token: early).status == .ok)
            h.database.health.recordConnectionLoss("PostgreSQL cannot be reached")
            h.clock.advance(by: 301)
            #expect(b2cCode(try await driver.refresh(h, token: early)) == "AADB2C90129")

            let first = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            let second = try #require(try await driver.refresh(h, token: first).json["refresh_token"] as? String)
            // The answer was lost as the database went away; the client retries after it is back.
            h.database.health.recordConnectionLoss("PostgreSQL cannot be reached")
            h.clock.advance(by: 60)
            let retried = try await driver.refresh(h, token: first)
            #expect(retried.status == .ok && retried.json["refresh_token"] as? String == second, "\(retried.text)")
            // The successor is used now: the old token again is reuse, and revokes the family.
            let third = try #require(try await driver.refresh(h, token: second).json["refresh_token"] as? String)
            #expect(b2cCode(try await driver.refresh(h, token: first)) == "AADB2C90129")
            #expect(b2cCode(try await driver.refresh(h, token: third)) == "AADB2C90129")
        }
    }

    @Test("refresh tokens are bound to their policy (AADB2C90088) and client, and expire (AADB2C90080)", arguments: TestDatabase.engines)
    func refreshBinding(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let token = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            let otherPolicy = try await driver.refresh(h, token: token, policy: "B2C_1_susi")
            #expect(b2cCode(otherPolicy) == "AADB2C90088")
            #expect(
                (otherPolicy.json["error_description"] as? String)?.contains("Actual Value : B2C_1_susi and Expected Value : B2C_1_ROPC")
                    == true)
            let otherClient = try await driver.refresh(
                h, token: token, clientID: h.webClientID, extra: [("client_secret", h.webSecret)])
            #expect(b2cCode(otherClient) == "AADB2C90088")
            // Neither refused attempt consumed the token.
            let stillGood = try await driver.refresh(h, token: token)
            #expect(stillGood.status == .ok)
            let next = stillGood.json["refresh_token"] as! String
            h.clock.advance(by: 15 * 86_400)
            let expired = try await driver.refresh(h, token: next)
            #expect(b2cCode(expired) == "AADB2C90080")
            #expect(expired.json["error"] as? String == "invalid_grant")
        }
    }

    @Test("a password reset revokes refresh tokens; a deleted account's grants fail", arguments: TestDatabase.engines)
    func revocation(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            let token = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            try await h.server.users.setPassword(
                id: user.id, hash: try await h.server.hasher.hash("N3w-Passw0rd"), emailProven: false, forceChange: false, now: h.clock.now)
            #expect(try await b2cCode(driver.refresh(h, token: token)) == "AADB2C90129")
            let fresh = try await driver.ropc(h, username: "alice@example.com", password: "N3w-Passw0rd").json["refresh_token"] as! String
            _ = try await h.server.users.delete(id: user.id)
            let gone = try await driver.refresh(h, token: fresh)
            #expect(gone.status == .badRequest)
        }
    }

    @Test(
        "a refresh speaks for its family's own user as the account reads now",
        arguments: TestDatabase.engines)
    func refreshHolder(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let alice = try await h.addUser()
            let bob = try await h.addUser("bob@example.com", name: "Bob")
            let scope = "openid offline_access"
            let aliceToken = try #require(
                try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: scope).json["refresh_token"]
                    as? String)
            let bobToken = try #require(
                try await driver.ropc(h, username: "bob@example.com", password: "Passw0rd!", scope: scope).json["refresh_token"] as? String)
            try await h.server.users.updateProfile(id: alice.id, displayName: "Alice Renamed", attributes: [:], now: h.clock.now)
            for (token, user, name) in [(aliceToken, alice, "Alice Renamed"), (bobToken, bob, "Bob")] {
                let refreshed = try await driver.refresh(h, token: token)
                #expect(refreshed.status == .ok)
                let claims = DecodedJWT(try #require(refreshed.json["id_token"] as? String)).claims
                #expect(claims["oid"] as? String == user.objectID)
                #expect(claims["name"] as? String == name)
            }
            // The same token again within the reuse interval takes the transaction's path (the
            // successor again): the same user, as the account reads now.
            let again = try await driver.refresh(h, token: aliceToken)
            #expect(again.status == .ok)
            let claims = DecodedJWT(try #require(again.json["id_token"] as? String)).claims
            #expect(claims["oid"] as? String == alice.objectID)
            #expect(claims["name"] as? String == "Alice Renamed")
        }
    }

    @Test("oversize and malformed bodies are refused", arguments: TestDatabase.engines)
    func badBodies(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let token = h.path("B2C_1_ROPC", "oauth2/v2.0/token")
            let huge = try await driver.request(
                .post, token, headers: [.contentType: "application/x-www-form-urlencoded"],
                body: "grant_type=password&x=" + String(repeating: "a", count: 70_000))
            #expect(huge.status == .contentTooLarge)
            let json = try await driver.request(
                .post, token, headers: [.contentType: "application/json"], body: "{\"grant_type\":\"password\"}")
            #expect(json.status == .badRequest)
            #expect(json.json["error"] as? String == "invalid_request")
            let repeated = try await driver.post(
                token, [("grant_type", "password"), ("grant_type", "refresh_token"), ("client_id", h.clientID)])
            #expect(repeated.status == .badRequest)
            let missing = try await driver.post(token, [("client_id", h.clientID)])
            #expect(b2cCode(missing) == "AADB2C90083")
        }
    }

    @Test(
        "ten concurrent refreshes of one token: with the reuse interval all get one successor; without it one wins and the family is revoked",
        arguments: TestDatabase.engines)
    func concurrentRefresh(engine: DatabaseEngine) async throws {
        for interval in [5.0, 0.0] {
            var configuration = IdentityServerConfiguration(passwordHashCost: 4)
            configuration.refreshTokenReuseInterval = interval
            try await IdentityHarness.run(engine, configuration: configuration) { h, driver in
                _ = try await h.addUser()
                let token = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
                let answers = try await withThrowingTaskGroup(of: String?.self) { group in
                    for _ in 0..<10 {
                        group.addTask { try await Driver(client: driver.client).refresh(h, token: token).json["refresh_token"] as? String }
                    }
                    return try await group.reduce(into: [String?]()) { $0.append($1) }
                }
                let successes = answers.compactMap { $0 }
                if interval > 0 {
                    #expect(successes.count == 10 && Set(successes).count == 1, "\(answers)")
                    #expect(try await driver.refresh(h, token: successes[0]).status == .ok, "the family lives on")
                } else {
                    #expect(successes.count == 1, "\(answers)")
                    #expect(b2cCode(try await driver.refresh(h, token: successes[0])) == "AADB2C90129")
                }
            }
        }
    }

    @Test(
        "a rotation is one statement: the used mark and the successor's row land together, and never for a used token or a revoked family",
        arguments: TestDatabase.engines)
    func rotationStatement(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            let first = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            let second = try #require(try await driver.refresh(h, token: first).json["refresh_token"] as? String)
            // The successor's row came from the trigger, within the statement that used the first token.
            let rows = try await h.database.read { sql in
                try await sql.raw(
                    """
                    SELECT t.token_hash, t.family_id, t.created_at, t.expires_at, t.used_at, p.used_at AS parent_used_at,
                           p.successor_expires_at AS parent_successor_expires_at, p.family_id AS parent_family_id
                    FROM refresh_tokens t JOIN refresh_tokens p ON p.successor_hash = t.token_hash
                    WHERE p.token_hash = \(bind: Secrets.sha256Hex(first))
                    """
                ).all()
            }
            #expect(rows.count == 1)
            let row = try #require(rows.first)
            #expect(try row.decode(column: "token_hash", as: String.self) == Secrets.sha256Hex(second))
            #expect(try row.decode(column: "family_id", as: String.self) == row.decode(column: "parent_family_id", as: String.self))
            #expect(try row.decode(column: "created_at", as: Int64.self) == row.decode(column: "parent_used_at", as: Int64.self))
            #expect(
                try row.decode(column: "expires_at", as: Int64.self) == row.decode(column: "parent_successor_expires_at", as: Int64?.self))
            #expect(try row.decode(column: "used_at", as: Int64?.self) == nil)

            // The statement itself: a token already used is not consumed again (no second successor) ...
            let now = h.clock.now
            let hash = Secrets.sha256Hex(first)
            func consume(_ hash: String) async throws -> Bool {
                let successor = SQLGrantStore.Successor(hash: Secrets.sha256Hex(Secrets.randomToken()), sealed: nil)
                return try await h.database.transaction { sql in
                    try await SQLGrantStore.consume(hash, successor: successor, expiresAt: now.addingTimeInterval(60), now: now, sql: sql)
                }
            }
            #expect(try await consume(hash) == false)
            // ... and an unused token whose family was revoked after it was read is not either.
            let third = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            let family = try #require(try await h.server.service.grants.family(ofRefreshToken: third))
            try await h.server.service.grants.revokeFamily(id: family.id, reason: "test", now: now)
            #expect(try await consume(Secrets.sha256Hex(third)) == false)
            let count = try await h.database.read { sql in
                try await sql.raw("SELECT COUNT(*) AS n FROM refresh_tokens WHERE family_id = \(bind: family.id)").first()?
                    .decode(column: "n", as: Int.self)
            }
            #expect(count == 1, "no successor was stored for the revoked family")
            // An unused token of a live family is consumed once.
            let fourth = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!").json["refresh_token"] as! String
            #expect(try await consume(Secrets.sha256Hex(fourth)) == true)
            #expect(try await consume(Secrets.sha256Hex(fourth)) == false)
        }
    }
}

@Suite("API permissions over HTTP")
struct APIPermissionFlowTests {
    @Test(
        "a refresh cannot widen its grant beyond the app's consent at sign-in; a refused refresh burns nothing",
        arguments: TestDatabase.engines)
    func refreshCannotWiden(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var app = h.seed.publicApp
            app.apiPermissions = [APIPermission(resource: h.clientID, scopes: ["tasks.read"])]
            try await h.server.tenants.save(app, now: h.clock.now)
            let narrow = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: "openid offline_access").json
            let token = try #require(narrow["refresh_token"] as? String)
            // Granted to the app only after the sign-in: not part of this grant.
            app.apiPermissions = DevTenant.permissions(taskAPI: app, web: false)
            try await h.server.tenants.save(app, now: h.clock.now)
            let widened = try await driver.refresh(h, token: token, extra: [("scope", "https://\(h.tenant.name)/tasks/tasks.write")])
            #expect(widened.status == .badRequest)
            #expect(widened.json["error"] as? String == "invalid_scope")
            #expect(b2cCode(widened) == "AADB2C90205")
            let graph = try await driver.refresh(h, token: token, extra: [("scope", "openid https://graph.microsoft.com/User.Read")])
            #expect(b2cCode(graph) == "AADB2C90205")
            // Consented at sign-in but not signed in for: another resource is refused on a B2C
            // policy too (only the Entra face's refresh tokens are multi-resource).
            let read = try await driver.refresh(h, token: token, extra: [("scope", "openid https://\(h.tenant.name)/tasks/tasks.read")])
            #expect(b2cCode(read) == "AADB2C90205")
            let same = try await driver.refresh(h, token: token, extra: [("scope", "openid offline_access")])
            #expect(same.status == .ok, "the refused refreshes did not consume the token")
        }
    }

    @Test(
        "a refresh on a B2C policy stays with the sign-in's scopes: no Graph token from an openid-only sign-in",
        arguments: TestDatabase.engines)
    func b2cRefreshStaysWithItsScopes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            // The dev app holds Graph's User.Read and the Task API's scopes from the start.
            let narrow = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: "openid offline_access").json
            let token = try #require(narrow["refresh_token"] as? String)
            for scope in [
                "https://graph.microsoft.com/User.Read offline_access", "User.Read", "https://\(h.tenant.name)/tasks/tasks.read",
                h.clientID,
            ] {
                let widened = try await driver.refresh(h, token: token, extra: [("scope", scope)])
                #expect(b2cCode(widened) == "AADB2C90205", "\(scope): \(widened.text)")
                #expect(widened.json["access_token"] == nil)
            }
            let plain = try await driver.refresh(h, token: token)
            #expect(plain.status == .ok, "\(plain.text)")
            #expect(plain.json["access_token"] == nil, "an openid-only grant has no access token to refresh")
        }
    }

    @Test(
        "an app without permissions on an API gets AADB2C90205 at authorize and token; granting fixes it", arguments: TestDatabase.engines)
    func ungrantedApp(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser()
            var app = h.seed.publicApp
            app.apiPermissions = []
            try await h.server.tenants.save(app, now: h.clock.now)
            let scope = "openid https://\(h.tenant.name)/tasks/tasks.read"
            let token = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: scope)
            #expect(b2cCode(token) == "AADB2C90205")
            var attempt = AuthorizationAttempt(harness: h)
            attempt.scope = scope
            #expect(b2cCode(redirect: try await driver.get(attempt.url(harness: h))) == "AADB2C90205")
            // Its own client id needs no permission (B2C's own-API trick).
            #expect(
                try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: "openid \(h.clientID)").status == .ok)

            _ = try await h.server.administration.grantPermission(
                tenantID: h.tenant.id, clientID: app.clientID, api: "https://\(h.tenant.name)/tasks", scopes: ["tasks.read"], roles: [])
            let granted = try await driver.ropc(h, username: "alice@example.com", password: "Passw0rd!", scope: scope)
            #expect(granted.status == .ok)
            #expect(DecodedJWT(try #require(granted.json["access_token"] as? String)).claims["scp"] as? String == "tasks.read")
        }
    }
}

@Suite("API permissions declared in YAML")
struct DeclaredPermissionTests {
    private func declaration(_ yaml: String) throws -> TenantDeclaration {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("perm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("tenant.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return try TenantDeclaration.load(path: path)
    }

    @Test("permissions name declared APIs by Application ID URI or Graph; unknown APIs and scopes are reported")
    func validation() throws {
        let header = """
            tenant: { name: fabrikam.onmicrosoft.com }
            userFlows: [{ name: B2C_1_susi, type: signUpOrSignIn }]
            applications:
              - { name: API, kind: public, appIdUri: "https://fabrikam.onmicrosoft.com/api", scopes: [read] }

            """
        _ = try declaration(
            header
                + """
                  - { name: App, kind: public, permissions: [{ api: "https://fabrikam.onmicrosoft.com/api/", scopes: [READ] }, { api: "https://graph.microsoft.com", scopes: [User.Read] }] }
                """)
        #expect {
            try declaration(
                header + "  - { name: App, kind: public, permissions: [{ api: \"https://elsewhere.example/api\", scopes: [read] }] }")
        } throws: { "\($0)".contains("unknown API") }
        #expect {
            try declaration(
                header
                    + "  - { name: App, kind: public, permissions: [{ api: \"https://fabrikam.onmicrosoft.com/api\", scopes: [write] }] }")
        } throws: { "\($0)".contains("exposes no scope 'write'") }
    }

    @Test("declared names with controls or invisible characters are reported")
    func names() throws {
        let yaml = """
            tenant: { name: fabrikam.onmicrosoft.com, displayName: "Fab\\u202Erikam" }
            userFlows: [{ name: B2C_1_susi, type: signUpOrSignIn }]
            applications:
              - { name: "App\\u200B", kind: public }
            """
        #expect {
            try declaration(yaml)
        } throws: { "\($0)".contains("tenant.displayName") && "\($0)".contains("application name") }
    }

    @Test("an applied declaration grants the declared permissions, resolved to client ids", arguments: TestDatabase.engines)
    func applied(engine: DatabaseEngine) async throws {
        let yaml = """
            tenant: { name: fabrikam.onmicrosoft.com }
            userFlows: [{ name: B2C_1_susi, type: signUpOrSignIn }]
            applications:
              - { name: API, kind: public, appIdUri: "https://fabrikam.onmicrosoft.com/api", scopes: [read, write] }
              - { name: App, kind: public, permissions: [{ api: "https://fabrikam.onmicrosoft.com/api", scopes: [read] }] }
            """
        let declared = try declaration(yaml)
        try await IdentityHarness.run(engine) { h, _ in
            let tenant = try await declared.apply(to: h.server.administration, baseDirectory: FileManager.default.temporaryDirectory)
            let apps = try await h.server.tenants.applications(tenantID: tenant.id)
            let api = try #require(apps.first { $0.displayName == "API" })
            let app = try #require(apps.first { $0.displayName == "App" })
            #expect(app.apiPermissions == [APIPermission(resource: api.clientIDString, scopes: ["read"])])
            #expect(api.apiPermissions.isEmpty)
        }
    }
}
