import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// Microsoft Graph's users API (SPEC §2.10): app-only tokens, OData queries, B2C's create body,
/// the account semantics behind it, and Graph's error shape for every refusal.
@Suite("Microsoft Graph users API")
struct GraphUsersTests {
    /// A confidential app holding `roles` on Graph, and its app-only token.
    static func appToken(_ h: IdentityHarness, _ driver: Driver, roles: [String] = ["User.ReadWrite.All"]) async throws -> HTTPFields {
        let app = AppRegistration(
            clientID: UUID(), tenantID: h.tenant.id, displayName: "Daemon", kind: .confidential, redirectURIs: [])
        try await h.server.tenants.save(app, now: Date())
        try await h.server.tenants.addSecret(clientID: app.clientID, secret: "daemon-secret", now: Date(), expiresAt: nil)
        _ = try await h.server.administration.grantPermission(
            tenantID: h.tenant.id, clientID: app.clientID, api: "https://graph.microsoft.com", scopes: [], roles: roles)
        let response = try await driver.post(
            "/\(h.tenant.name)/oauth2/v2.0/token",
            [
                ("grant_type", "client_credentials"), ("client_id", app.clientIDString), ("client_secret", "daemon-secret"),
                ("scope", "https://graph.microsoft.com/.default"),
            ])
        let token = try #require(response.json["access_token"] as? String, "\(response.text)")
        #expect(DecodedJWT(token).claims["roles"] as? [String] == roles)
        return [.authorization: "Bearer \(token)"]
    }

    static func json(_ text: String, _ headers: HTTPFields) -> HTTPFields {
        var headers = headers
        headers[.contentType] = "application/json"
        return headers
    }

    static func newUser(_ h: IdentityHarness, email: String, password: String = "Graph-Pass1", extra: String = "") -> String {
        """
        {"displayName":"Gail Graph","identities":[{"signInType":"emailAddress","issuer":"\(h.tenant.name)","issuerAssignedId":"\(email)"}],
         "passwordProfile":{"password":"\(password)","forceChangePasswordNextSignIn":false},"passwordPolicies":"DisablePasswordExpiration"\(extra)}
        """
    }

    static func errorCode(_ response: TestResponse) -> String? { (response.json["error"] as? [String: Any])?["code"] as? String }

    @Test("create, filter by identity, select, page with nextLink and count", arguments: TestDatabase.engines)
    func createAndQuery(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await Self.appToken(h, driver)
            for index in 0..<5 {
                let created = try await driver.request(
                    .post, "/v1.0/users", headers: Self.json("", auth),
                    body: Self.newUser(h, email: "user\(index)@example.com", extra: #","givenName":"G\#(index)""#))
                #expect(created.status == .created, "\(created.text)")
                #expect(created.json["id"] as? String != nil)
            }
            let filter = Form.encode([
                ("$filter", "identities/any(c:c/issuerAssignedId eq 'USER3@example.com' and c/issuer eq '\(h.tenant.name)')"),
                ("$select", "id,displayName,identities,accountEnabled,givenName"),
            ])
            let found = try await driver.get("/v1.0/users?\(filter)", headers: auth)
            let value = try #require(found.json["value"] as? [[String: Any]])
            #expect(value.count == 1)
            #expect(value.first?["givenName"] as? String == "G3")
            #expect(Set(value.first?.keys.map { $0 } ?? []) == ["id", "displayName", "identities", "accountEnabled", "givenName"])
            #expect(
                found.json["@odata.context"] as? String
                    == "https://graph.microsoft.com/v1.0/$metadata#users(id,displayName,identities,accountEnabled,givenName)")

            // Two per page through @odata.nextLink, with $count.
            var seen: [String] = []
            var next: String? = "/v1.0/users?$top=2&$count=true&" + Form.encode([("$filter", "startswith(displayName,'gail')")])
            var headers = auth
            headers[HTTPField.Name("ConsistencyLevel")!] = "eventual"
            while let link = next {
                let page = try await driver.get(link.replacingOccurrences(of: IdentityHarness.origin, with: ""), headers: headers)
                #expect(page.status == .ok, "\(page.text)")
                #expect(page.json["@odata.count"] as? Int == 5)
                seen += (page.json["value"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                next = page.json["@odata.nextLink"] as? String
            }
            #expect(seen.count == 5 && Set(seen).count == 5)
            let equals = try await driver.get("/v1.0/users?" + Form.encode([("$filter", "displayName eq 'GAIL GRAPH'")]), headers: auth)
            #expect((equals.json["value"] as? [Any])?.count == 5)

            // $orderby, across pages: descending by user principal name.
            var ordered: [String] = []
            var link: String? =
                "/v1.0/users?$top=2&" + Form.encode([("$orderby", "userPrincipalName desc"), ("$select", "userPrincipalName")])
            while let next = link {
                let page = try await driver.get(next.replacingOccurrences(of: IdentityHarness.origin, with: ""), headers: auth)
                ordered += (page.json["value"] as? [[String: Any]] ?? []).compactMap { $0["userPrincipalName"] as? String }
                link = page.json["@odata.nextLink"] as? String
            }
            #expect(ordered == (0..<5).map { "user\($0)@example.com" }.reversed())
        }
    }

    @Test("bad input answers Graph's error shape and stores nothing", arguments: TestDatabase.engines)
    func badInput(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await Self.appToken(h, driver)
            let before = try await h.server.users.users(tenantID: h.tenant.id).count
            let bodies: [(String, String)] = [
                (Self.newUser(h, email: "weak@example.com", password: "short"), "Request_BadRequest"),
                (Self.newUser(h, email: "x@example.com", extra: #","favouriteColour":"red""#), "Request_BadRequest"),
                (Self.newUser(h, email: "not-an-address"), "Request_BadRequest"),
                (Self.newUser(h, email: "ctl\u{1}@example.com"), "BadRequest"),
                (#"{"displayName":"No identity","passwordProfile":{"password":"Graph-Pass1"}}"#, "Request_BadRequest"),
                (
                    #"{"displayName":"U","identities":[{"signInType":"userName","issuer":"x","issuerAssignedId":"u"}]}"#,
                    "Request_BadRequest"
                ),
                (Self.newUser(h, email: "enabled@example.com", extra: #","accountEnabled":1"#), "Request_BadRequest"),
                ("[1,2]", "BadRequest"),
                ("{", "BadRequest"),
            ]
            for (body, code) in bodies {
                let refused = try await driver.request(.post, "/v1.0/users", headers: Self.json("", auth), body: body)
                #expect(refused.status == .badRequest, "\(body)")
                #expect(Self.errorCode(refused) == code, "\(body): \(refused.text)")
                #expect(((refused.json["error"] as? [String: Any])?["innerError"] as? [String: Any])?["request-id"] != nil)
            }
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == before)

            // A duplicate identity, in another case.
            #expect(
                try await driver.request(
                    .post, "/v1.0/users", headers: Self.json("", auth), body: Self.newUser(h, email: "dup@example.com")
                ).status == .created)
            let duplicate = try await driver.request(
                .post, "/v1.0/users", headers: Self.json("", auth), body: Self.newUser(h, email: "DUP@example.com"))
            #expect(duplicate.status == .badRequest && (duplicate.text.contains("already exists")))

            // Malformed and unsupported OData.
            for (query, code) in [
                ("$filter=" + Form.encode([("x", "displayName eq 'unterminated")]).dropFirst(2), "BadRequest"),
                ("$filter=" + Form.encode([("x", "jobTitle gt 'a'")]).dropFirst(2), "Request_UnsupportedQuery"),
                ("$select=id,favouriteColour", "Request_BadRequest"),
                ("$top=0", "Request_BadRequest"),
                ("$orderby=jobTitle", "Request_UnsupportedQuery"),
                ("$skiptoken=forged", "Request_BadRequest"),
                ("$count=true", "Request_BadRequest"),
            ] {
                let refused = try await driver.get("/v1.0/users?\(query)", headers: auth)
                #expect(refused.status == .badRequest, "\(query)")
                #expect(Self.errorCode(refused) == code, "\(query): \(refused.text)")
            }
            let missing = try await driver.get("/v1.0/users/\(UUID())", headers: auth)
            #expect(missing.status == .notFound && Self.errorCode(missing) == "Request_ResourceNotFound")
            let patchUnknown = try await driver.request(
                .patch, "/v1.0/users/dup@example.com", headers: Self.json("", auth), body: #"{"displayName":"New","shoeSize":9}"#)
            #expect(patchUnknown.status == .badRequest)
            #expect(try await h.server.administration.findUser(tenantID: h.tenant.id, emailOrID: "dup@example.com").displayName == "Gail Graph")
        }
    }

    @Test("tokens without the right role, delegated tokens and other apps' tokens are refused", arguments: TestDatabase.engines)
    func authorization(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let reader = try await Self.appToken(h, driver, roles: ["User.Read.All"])
            #expect(try await driver.get("/v1.0/users", headers: reader).status == .ok)
            let write = try await driver.request(
                .post, "/v1.0/users", headers: Self.json("", reader), body: Self.newUser(h, email: "r@example.com"))
            #expect(write.status == .forbidden && Self.errorCode(write) == "Authorization_RequestDenied")

            _ = try await h.addUser()
            let delegated =
                try await driver.ropc(
                    h, username: "alice@example.com", password: "Passw0rd!", scope: "openid https://graph.microsoft.com/User.Read"
                ).json["access_token"] as? String
            let asUser = try await driver.get("/v1.0/users", headers: [.authorization: "Bearer \(try #require(delegated))"])
            #expect(asUser.status == .forbidden)
            let anonymous = try await driver.get("/v1.0/users")
            #expect(anonymous.status == .unauthorized && Self.errorCode(anonymous) == "InvalidAuthenticationToken")
            // A role the service does not serve cannot be granted.
            await #expect(throws: IdentityAdministration.AdministrationError.self) {
                _ = try await h.server.administration.grantPermission(
                    tenantID: h.tenant.id, clientID: h.seed.webApp.clientID, api: "https://graph.microsoft.com", scopes: [],
                    roles: ["Directory.ReadWrite.All"])
            }
        }
    }

    @Test(
        "semantics: created users sign in at once; disabled ones cannot and lose their sessions; revocation ends SSO and refresh tokens",
        arguments: TestDatabase.engines)
    func semantics(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await Self.appToken(h, driver)
            let created = try await driver.request(
                .post, "/v1.0/users", headers: Self.json("", auth), body: Self.newUser(h, email: "sam@example.com"))
            let id = try #require(created.json["id"] as? String)
            let ropc = try await driver.ropc(h, username: "sam@example.com", password: "Graph-Pass1")
            #expect(ropc.status == .ok)
            let refreshToken = try #require(ropc.json["refresh_token"] as? String)
            #expect(
                try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "sam@example.com", password: "Graph-Pass1")
                    .redirectParameters["code"] != nil)

            // revokeSignInSessions: SSO and refresh tokens end.
            let revoked = try await driver.request(.post, "/v1.0/users/\(id)/revokeSignInSessions", headers: auth)
            #expect(revoked.status == .ok && revoked.json["value"] as? Bool == true)
            #expect(try await b2cCode(driver.refresh(h, token: refreshToken)) == "AADB2C90129")
            var silent = AuthorizationAttempt(harness: h)
            silent.extra = [("prompt", "none")]
            #expect(b2cCode(redirect: try await driver.start(silent, harness: h)) == "AADB2C90077")

            // Disabled: the right password is refused on the page and at ROPC.
            let disable = try await driver.request(
                .patch, "/v1.0/users/\(id)", headers: Self.json("", auth), body: #"{"accountEnabled":false}"#)
            #expect(disable.status == .noContent)
            let page = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h), email: "sam@example.com", password: "Graph-Pass1")
            #expect(page.status == .forbidden && page.text.contains("Your account has been locked."))
            #expect(b2cCode(try await driver.ropc(h, username: "sam@example.com", password: "Graph-Pass1")) == "AADB2C90111")
            // …and a wrong password still says only "invalid" (nothing about the account's state).
            #expect(b2cCode(try await driver.ropc(h, username: "sam@example.com", password: "Wrong-Pass1")) == "AADB2C90225")
            let state = try await driver.get("/v1.0/users/\(id)?$select=accountEnabled,passwordPolicies", headers: auth)
            #expect(
                state.json["accountEnabled"] as? Bool == false && state.json["passwordPolicies"] as? String == "DisablePasswordExpiration")

            // Deleted: gone everywhere.
            #expect(try await driver.request(.delete, "/v1.0/users/\(id)", headers: auth).status == .noContent)
            #expect(try await driver.get("/v1.0/users/\(id)", headers: auth).status == .notFound)
        }
    }

    @Test("forceChangePasswordNextSignIn: the next sign-in asks for a new password first; ROPC refuses", arguments: TestDatabase.engines)
    func forcedPasswordChange(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await Self.appToken(h, driver)
            _ = try await driver.request(
                .post, "/v1.0/users", headers: Self.json("", auth), body: Self.newUser(h, email: "tmp@example.com"))
            let reset = try await driver.request(
                .patch, "/v1.0/users/tmp@example.com", headers: Self.json("", auth),
                body: #"{"passwordProfile":{"password":"Temp-Pass1","forceChangePasswordNextSignIn":true}}"#)
            #expect(reset.status == .noContent)
            #expect(b2cCode(try await driver.ropc(h, username: "tmp@example.com", password: "Temp-Pass1")) == "AADB2C90225")

            let attempt = AuthorizationAttempt(harness: h)
            let change = try await driver.signIn(h, attempt: attempt, email: "tmp@example.com", password: "Temp-Pass1")
            #expect(change.text.contains("id=\"changePassword\""))
            let weak = try await driver.submit(change, [("newPassword", "short"), ("reenterPassword", "short")])
            #expect(weak.status == .badRequest && weak.text.contains("id=\"changePassword\""))
            let done = try await driver.submit(weak, [("newPassword", "Chosen-Pass1"), ("reenterPassword", "Chosen-Pass1")])
            let code = try #require(done.redirectParameters["code"])
            #expect(try await driver.redeem(h, attempt: attempt, code: code).status == .ok)
            #expect(try await driver.ropc(h, username: "tmp@example.com", password: "Chosen-Pass1").status == .ok)
            #expect(b2cCode(try await driver.ropc(h, username: "tmp@example.com", password: "Temp-Pass1")) == "AADB2C90225")
        }
    }

    @Test(
        "a disabled account gets nothing from any path: a code issued before, the reset flow, an SSO session, minting",
        arguments: TestDatabase.engines)
    func disabledEverywhere(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let user = try await h.addUser()
            let attempt = AuthorizationAttempt(harness: h)
            let code = try #require(try await driver.signIn(h, attempt: attempt, email: "alice@example.com").redirectParameters["code"])
            var changes = AccountChanges()
            changes.accountEnabled = false
            try await h.server.administration.updateUser(user, changes)

            #expect(b2cCode(try await driver.redeem(h, attempt: attempt, code: code)) == "AADB2C90111")
            // The reset flow proves the address, and ends there: nothing is done for a disabled
            // account (no password set), and it is not signed in.
            let reset = AuthorizationAttempt(harness: h, policy: "B2C_1_reset")
            let codeStep = try await driver.submit(
                try await driver.start(reset, harness: h), [("step", "send"), ("email", "alice@example.com")])
            let done = try await driver.submit(codeStep, [("step", "verify"), ("code", try await h.latestCode())])
            #expect(done.redirectParameters["code"] == nil && b2cCode(redirect: done) == "AADB2C90111")
            #expect(try await h.server.users.user(id: user.id)?.passwordHash == user.passwordHash)
            var silent = AuthorizationAttempt(harness: h)
            silent.extra = [("prompt", "none")]
            #expect(b2cCode(redirect: try await driver.start(silent, harness: h)) == "AADB2C90077")
            let minted = try await driver.request(
                .post, "/dev/tokens", headers: [.contentType: "application/json"],
                body: #"{"user":"alice@example.com","client":"\#(h.clientID)"}"#)
            #expect(b2cCode(minted) == "AADB2C90111")
        }
    }

    @Test(
        "app-only tokens from a B2C policy URL work too; users are found by their B2C user principal name", arguments: TestDatabase.engines)
    func policyTokenAndUPN(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let app = AppRegistration(clientID: UUID(), tenantID: h.tenant.id, displayName: "Daemon", kind: .confidential, redirectURIs: [])
            try await h.server.tenants.save(app, now: Date())
            try await h.server.tenants.addSecret(clientID: app.clientID, secret: "daemon-secret", now: Date(), expiresAt: nil)
            _ = try await h.server.administration.grantPermission(
                tenantID: h.tenant.id, clientID: app.clientID, api: "https://graph.microsoft.com", scopes: [], roles: ["User.Read.All"])
            let token =
                try await driver.post(
                    h.path("B2C_1_susi", "oauth2/v2.0/token"),
                    [
                        ("grant_type", "client_credentials"), ("client_id", app.clientIDString), ("client_secret", "daemon-secret"),
                        ("scope", "https://graph.microsoft.com/.default"),
                    ]
                ).json["access_token"] as? String
            let auth: HTTPFields = [.authorization: "Bearer \(try #require(token))"]
            let user = try await h.addUser()
            let byUPN = try await driver.get("/v1.0/users/\(user.objectID)@\(h.tenant.name)", headers: auth)
            #expect(byUPN.status == .ok && byUPN.json["id"] as? String == user.objectID)
            let policies = try await driver.request(
                .patch, "/v1.0/users/\(user.objectID)", headers: Self.json("", try await Self.appToken(h, driver)),
                body: #"{"passwordPolicies":"DisableEverything"}"#)
            #expect(policies.status == .badRequest)
        }
    }
}
