import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// Graph's applications, service principals and admin consent (SPEC §2.14): what an app made
/// through Graph can do at once, B2C's and Entra's rules for it, and the privilege rule.
@Suite("Microsoft Graph applications API")
struct GraphApplicationsTests {
    /// Holds what it grants: an app manages only apps whose Graph permissions it holds itself.
    static let manager = [
        "Application.ReadWrite.All", "AppRoleAssignment.ReadWrite.All", "DelegatedPermissionGrant.ReadWrite.All", "User.Read.All",
    ]

    static func json(_ auth: HTTPFields) -> HTTPFields { GraphUsersTests.json("", auth) }

    static func create(_ driver: Driver, _ auth: HTTPFields, _ body: String) async throws -> TestResponse {
        try await driver.request(.post, "/v1.0/applications", headers: json(auth), body: body)
    }

    static func clientCredentials(_ h: IdentityHarness, _ driver: Driver, client: String, secret: String) async throws -> TestResponse {
        try await driver.post(
            "/\(h.tenant.name)/oauth2/v2.0/token",
            [
                ("grant_type", "client_credentials"), ("client_id", client), ("client_secret", secret),
                ("scope", "https://graph.microsoft.com/.default"),
            ])
    }

    @Test("an app made through Graph: shown as Graph shows it, signs users in at once, and a secret added through Graph works", arguments: TestDatabase.engines)
    func createAndUse(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.manager)
            let created = try await Self.create(
                driver, auth,
                #"""
                {"displayName":"Contoso web","web":{"redirectUris":["https://app.contoso.example/signin-oidc"]},
                 "spa":{"redirectUris":["https://spa.contoso.example/"]},"identifierUris":["https://contoso.example/api"],
                 "api":{"oauth2PermissionScopes":[{"id":"a1b2c3d4-0000-4000-8000-000000000001","value":"tasks.read","adminConsentDisplayName":"Read","isEnabled":true,"type":"Admin"}]},
                 "requiredResourceAccess":[{"resourceAppId":"00000003-0000-0000-c000-000000000000","resourceAccess":[{"id":"df021288-bdef-4463-88db-98f22de89214","type":"Role"}]}]}
                """#)
            #expect(created.status == .created, "\(created.text)")
            let id = try #require(created.json["id"] as? String)
            let appID = try #require(created.json["appId"] as? String)
            #expect(id != appID)
            #expect((created.json["web"] as? [String: Any])?["redirectUris"] as? [String] == ["https://app.contoso.example/signin-oidc"])
            #expect((created.json["spa"] as? [String: Any])?["redirectUris"] as? [String] == ["https://spa.contoso.example/"])
            // Native authentication (SPEC §2.15) is off until the registration turns it on.
            #expect(created.json["nativeAuthenticationApisEnabled"] as? String == "none")
            let native = try await driver.request(
                .patch, "/v1.0/applications/\(try #require(created.json["id"] as? String))", headers: Self.json(auth),
                body: #"{"nativeAuthenticationApisEnabled":"all"}"#)
            #expect(native.status == .noContent)
            let wrongValue = try await driver.request(
                .patch, "/v1.0/applications/\(try #require(created.json["id"] as? String))", headers: Self.json(auth),
                body: #"{"nativeAuthenticationApisEnabled":"some"}"#)
            #expect(wrongValue.status == .badRequest)
            #expect(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: try #require(created.json["appId"] as? String))?.nativeAuthentication == true)
            // The dev tenant's own native app has it on.
            #expect(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: h.clientID)?.nativeAuthentication == true)
            let scopes = (created.json["api"] as? [String: Any])?["oauth2PermissionScopes"] as? [[String: Any]]
            #expect(scopes?.first?["id"] as? String == "a1b2c3d4-0000-4000-8000-000000000001")

            // By object id, by Graph's alternate key, and by $filter; $select keeps id.
            #expect(try await driver.get("/v1.0/applications/\(id)", headers: auth).json["appId"] as? String == appID)
            let byAppID = try await driver.get("/v1.0/applications(appId='\(appID)')?$select=displayName", headers: auth)
            #expect(byAppID.json["displayName"] as? String == "Contoso web" && byAppID.json["id"] as? String == id)
            #expect(byAppID.json["web"] == nil)
            let filtered = try await driver.get("/v1.0/applications?$filter=appId%20eq%20'\(appID)'", headers: auth)
            #expect((filtered.json["value"] as? [[String: Any]])?.count == 1)

            // Signs users in at once (the web redirect), with the tenant's flow.
            _ = try await h.addUser()
            var attempt = AuthorizationAttempt(harness: h)
            attempt.clientID = appID
            attempt.redirectURI = "https://app.contoso.example/signin-oidc"
            attempt.scope = "openid"
            let redirect = try await driver.signIn(h, attempt: attempt, email: "alice@example.com")
            #expect(redirect.redirectParameters["code"] != nil, "\(redirect.text)")

            // A SPA redirect takes the code flow with PKCE only.
            attempt.redirectURI = "https://spa.contoso.example/"
            var withoutPKCE = attempt.url(harness: h).replacingOccurrences(of: "code_challenge=", with: "x=")
            withoutPKCE = withoutPKCE.replacingOccurrences(of: "code_challenge_method=", with: "y=")
            let refused = try await driver.get(withoutPKCE)
            #expect(refused.redirectParameters["error_description"]?.contains("AADB2C") == true, "\(refused.status) \(refused.headers) \(refused.text)")

            // No secret yet; one added through Graph works at once, and removing it ends it.
            #expect((try await Self.clientCredentials(h, driver, client: appID, secret: "guess")).status != .ok)
            let password = try await driver.request(
                .post, "/v1.0/applications/\(id)/addPassword", headers: Self.json(auth), body: #"{"passwordCredential":{"displayName":"ci"}}"#)
            #expect(password.status == .ok, "\(password.text)")
            let secret = try #require(password.json["secretText"] as? String)
            let keyID = try #require(password.json["keyId"] as? String)
            #expect(password.json["hint"] as? String == String(secret.prefix(3)))
            // Graph's default lifetime: two years.
            let end = try #require(ISO8601DateFormatter().date(from: password.json["endDateTime"] as? String ?? ""))
            #expect(abs(end.timeIntervalSinceNow - 2 * 365 * 86_400) < 3 * 86_400)
            let listed = try await driver.get("/v1.0/applications/\(id)", headers: auth)
            let credentials = try #require(listed.json["passwordCredentials"] as? [[String: Any]])
            #expect(credentials.count == 1 && credentials[0]["keyId"] as? String == keyID && credentials[0]["secretText"] is NSNull)

            // Admin consent: an app-role assignment to its principal grants a Graph permission.
            let principals = try await driver.get("/v1.0/servicePrincipals?$filter=appId%20eq%20'00000003-0000-0000-c000-000000000000'", headers: auth)
            let graphSP = try #require((principals.json["value"] as? [[String: Any]])?.first)
            #expect((graphSP["appRoles"] as? [[String: Any]])?.contains { $0["value"] as? String == "User.Read.All" } == true)
            let sp = try await driver.request(.post, "/v1.0/servicePrincipals", headers: Self.json(auth), body: #"{"appId":"\#(appID)"}"#)
            #expect(sp.status == .created)
            let spID = try #require(sp.json["id"] as? String)
            let assigned = try await driver.request(
                .post, "/v1.0/servicePrincipals/\(spID)/appRoleAssignments", headers: Self.json(auth),
                body: #"{"principalId":"\#(spID)","resourceId":"\#(graphSP["id"] as? String ?? "")","appRoleId":"df021288-bdef-4463-88db-98f22de89214"}"#)
            #expect(assigned.status == .created, "\(assigned.text)")
            let token = try await Self.clientCredentials(h, driver, client: appID, secret: secret)
            #expect(token.status == .ok, "\(token.text)")
            #expect(DecodedJWT(token.json["access_token"] as? String ?? "").claims["roles"] as? [String] == ["User.Read.All"])
            let assignedTo = try await driver.get("/v1.0/servicePrincipals/\(graphSP["id"] as? String ?? "")/appRoleAssignedTo", headers: auth)
            #expect((assignedTo.json["value"] as? [[String: Any]])?.contains { $0["principalId"] as? String == spID } == true)
            // A role the caller does not hold itself is not granted.
            let beyond = try await driver.request(
                .post, "/v1.0/servicePrincipals/\(spID)/appRoleAssignments", headers: Self.json(auth),
                body: #"{"principalId":"\#(spID)","resourceId":"\#(graphSP["id"] as? String ?? "")","appRoleId":"9e3f62cf-ca93-4989-b6ce-bf83c28f9fe8"}"#)
            #expect(beyond.status == .forbidden)

            let removed = try await driver.request(
                .post, "/v1.0/applications/\(id)/removePassword", headers: Self.json(auth), body: #"{"keyId":"\#(keyID)"}"#)
            #expect(removed.status == .noContent)
            #expect((try await Self.clientCredentials(h, driver, client: appID, secret: secret)).status != .ok)

            // Recorded as the calling app's changes.
            let audits = try await h.server.service.directoryAudits.audits(tenantID: h.tenant.id, DirectoryAuditQuery())
            let activities = Set(audits.map(\.activity.displayName))
            #expect(activities.isSuperset(of: ["Add application", "Add app role assignment to service principal"]))

            #expect((try await driver.request(.delete, "/v1.0/applications/\(id)", headers: auth)).status == .noContent)
            #expect((try await driver.get("/v1.0/applications/\(id)", headers: auth)).status == .notFound)
        }
    }

    @Test("B2C's redirect-URI rules, one identifier URI per tenant, unknown properties: Graph's error and nothing made", arguments: TestDatabase.engines)
    func refusals(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.manager)
            let first = try await Self.create(driver, auth, #"{"displayName":"API","identifierUris":["https://contoso.example/api"]}"#)
            #expect(first.status == .created)
            let before = try await h.server.administration.applications(tenantID: h.tenant.id).count
            for body in [
                #"{"displayName":"Frag","web":{"redirectUris":["https://app.example/cb#x"]}}"#,
                #"{"displayName":"Wild","web":{"redirectUris":["https://*.app.example/cb"]}}"#,
                #"{"displayName":"Plain http","web":{"redirectUris":["http://app.example/cb"]}}"#,
                #"{"displayName":"Scheme on web","web":{"redirectUris":["msal1234://auth"]}}"#,
                #"{"displayName":"Twice","web":{"redirectUris":["https://a.example/"]},"spa":{"redirectUris":["https://a.example/"]}}"#,
                #"{"displayName":"Dup","identifierUris":["https://contoso.example/api/"]}"#,
                #"{"displayName":"Unknown","homeRealm":"x"}"#,
                #"{"displayName":"Bad claims","groupMembershipClaims":"Everything"}"#,
                #"{"displayName":"  spaced  "}"#,
                #"{"displayName":"Graph squatter","identifierUris":["https://graph.microsoft.com"]}"#,
                #"{"web":{"redirectUris":[]}}"#,
            ] {
                let refused = try await Self.create(driver, auth, body)
                #expect(refused.status == .badRequest, "\(body): \(refused.text)")
                #expect(GraphUsersTests.errorCode(refused) == "Request_BadRequest", "\(body)")
            }
            // A native app's custom scheme is fine on publicClient.
            #expect((try await Self.create(driver, auth, #"{"displayName":"Native","publicClient":{"redirectUris":["msal1234://auth"]}}"#)).status == .created)
            #expect(try await h.server.administration.applications(tenantID: h.tenant.id).count == before + 1)

            // A PATCH that breaks a rule changes nothing.
            let id = try #require(first.json["id"] as? String)
            let patch = try await driver.request(
                .patch, "/v1.0/applications/\(id)", headers: Self.json(auth), body: #"{"displayName":"Renamed","web":{"redirectUris":["https://x.example/#f"]}}"#)
            #expect(patch.status == .badRequest)
            #expect(try await driver.get("/v1.0/applications/\(id)", headers: auth).json["displayName"] as? String == "API")

            // A scope another app was granted is not withdrawn under it.
            let api = try await Self.create(
                driver, auth, #"{"displayName":"Tasks API","identifierUris":["api://tasks"],"api":{"oauth2PermissionScopes":[{"value":"tasks.read"}]}}"#)
            let apiID = try #require(api.json["appId"] as? String)
            let client = try #require(try await h.server.administration.applications(tenantID: h.tenant.id).first { $0.displayName == "Native" })
            try await h.server.administration.setGrantedScopes(["tasks.read"], on: apiID, of: client)
            let withdrawn = try await driver.request(
                .patch, "/v1.0/applications/\(try #require(api.json["id"] as? String))", headers: Self.json(auth),
                body: #"{"api":{"oauth2PermissionScopes":[]}}"#)
            #expect(withdrawn.status == .badRequest, "\(withdrawn.text)")
        }
    }

    @Test("permissions: reading needs Application.Read.All, and an app cannot give itself another app's privileges", arguments: TestDatabase.engines)
    func privileges(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["User.Read.All"])
            #expect(GraphUsersTests.errorCode(try await driver.get("/v1.0/applications", headers: reader)) == "Authorization_RequestDenied")
            let appManager = try await GraphUsersTests.appToken(h, driver, roles: ["Application.ReadWrite.All"])
            // The user-reading daemon above holds User.Read.All, which the app manager does not.
            let apps = try await h.server.administration.applications(tenantID: h.tenant.id)
            let privileged = try #require(apps.first { $0.permission(on: APIPermission.graphResource)?.roles == ["User.Read.All"] })
            let id = GraphApplicationJSON.objectID(of: privileged)
            let refused = try await driver.request(.post, "/v1.0/applications/\(id)/addPassword", headers: Self.json(appManager), body: "{}")
            #expect(refused.status == .forbidden)
            #expect(try await h.server.administration.passwordCredentials(of: privileged).count == 1)
            let renamed = try await driver.request(.patch, "/v1.0/applications/\(id)", headers: Self.json(appManager), body: #"{"displayName":"Mine"}"#)
            #expect(renamed.status == .forbidden)
            // Nor delete it, nor take its secrets away.
            #expect((try await driver.request(.delete, "/v1.0/applications/\(id)", headers: appManager)).status == .forbidden)
            let keyID = try #require(try await h.server.administration.passwordCredentials(of: privileged).first?.keyID)
            let taken = try await driver.request(
                .post, "/v1.0/applications/\(id)/removePassword", headers: Self.json(appManager), body: #"{"keyId":"\#(keyID.uuidString)"}"#)
            #expect(taken.status == .forbidden)
            #expect(try await h.server.administration.passwordCredentials(of: privileged).count == 1)
            // Granting roles takes AppRoleAssignment.ReadWrite.All.
            let principals = try await driver.get("/v1.0/servicePrincipals", headers: appManager)
            #expect(principals.status == .ok)
            let mine = try await Self.create(driver, appManager, #"{"displayName":"Plain"}"#)
            let spID = GraphServicePrincipals.Principal.app(
                try #require(try await h.server.administration.applications(tenantID: h.tenant.id).first { $0.displayName == "Plain" })
            ).id(in: h.tenant)
            let assign = try await driver.request(
                .post, "/v1.0/servicePrincipals/\(spID)/appRoleAssignments", headers: Self.json(appManager),
                body: #"{"principalId":"\#(spID)","resourceId":"x","appRoleId":"df021288-bdef-4463-88db-98f22de89214"}"#)
            #expect(assign.status == .forbidden)
            // The admin console's own app is the server's: Graph neither shows nor changes it.
            let console = AppRegistration(
                clientID: AdminConsole.clientID(of: h.tenant), tenantID: h.tenant.id, displayName: "TodoB2C admin console", kind: .public,
                redirectURIs: ["http://localhost:5080/admin/callback"])
            try await h.server.tenants.save(console, now: Date())
            let manager = try await GraphUsersTests.appToken(h, driver, roles: ["Application.ReadWrite.All"])
            #expect((try await driver.get("/v1.0/applications(appId='\(console.clientIDString)')", headers: manager)).status == .notFound)
            let hijack = try await driver.request(
                .patch, "/v1.0/applications/\(GraphApplicationJSON.objectID(of: console))", headers: Self.json(manager),
                body: #"{"spa":{"redirectUris":["https://evil.example/cb"]}}"#)
            #expect(hijack.status == .notFound)
            let all = try await driver.get("/v1.0/applications", headers: manager)
            #expect((all.json["value"] as? [[String: Any]])?.contains { $0["appId"] as? String == console.clientIDString } == false)
            #expect(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: console.clientIDString)?.redirectURIs == console.redirectURIs)
            // Its own plain app it may change.
            let plainID = try #require(mine.json["id"] as? String)
            #expect((try await driver.request(.post, "/v1.0/applications/\(plainID)/addPassword", headers: Self.json(appManager), body: "{}")).status == .ok)
        }
    }
}
