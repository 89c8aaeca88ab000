import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// A tenant's own user attributes (SPEC §2.11, issue 11's `extension_` properties): declared per
/// tenant, collected by flows with typed inputs, returned as typed `extension_…` claims, and
/// managed through Graph as `extension_{extensionsAppIdWithoutDashes}_{name}`.
@Suite("Custom user attributes")
struct CustomAttributeTests {
    static let level = CustomAttribute(name: "memberLevel", type: .int, displayName: "Member level")
    static let newsletter = CustomAttribute(name: "newsletter", type: .boolean, displayName: "Send me the newsletter")

    /// The dev tenant with an int and a boolean attribute besides its `loyaltyNumber`, collected
    /// and returned by `B2C_1_sign_up`.
    static func declare(_ h: IdentityHarness) async throws {
        var tenant = h.tenant
        tenant.userAttributes = [DevTenant.loyaltyNumber, level, newsletter]
        try await h.server.tenants.save(tenant, now: Date())
        var flow = try #require(try await h.server.tenants.userFlow(tenantID: tenant.id, name: "B2C_1_sign_up"))
        flow.signUpAttributes = [.displayName, .custom("loyaltyNumber"), .custom("memberLevel"), .custom("newsletter")]
        flow.applicationClaims = UserFlow.defaultClaims + ["extension_loyaltyNumber", "extension_memberLevel", "extension_newsletter"]
        try await h.server.tenants.save(flow)
    }

    /// The sign-up page after the address is proven.
    static func detailsPage(_ h: IdentityHarness, _ driver: Driver, email: String) async throws -> (TestResponse, AuthorizationAttempt) {
        let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_up")
        var page = try await driver.start(attempt, harness: h)
        page = try await driver.submit(page, [("step", "send"), ("email", email)])
        page = try await driver.submit(page, [("step", "verify"), ("code", try await h.latestCode())])
        return (page, attempt)
    }

    @Test("sign-up collects typed attributes and tokens carry them typed; a bad value creates nothing", arguments: TestDatabase.engines)
    func signUpAndClaims(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await Self.declare(h)
            var (page, attempt) = try await Self.detailsPage(h, driver, email: "typed@example.com")
            #expect(page.text.contains(#"type="number" id="extension_memberLevel""#))
            #expect(page.text.contains(#"type="checkbox" id="extension_newsletter""#))
            #expect(page.text.contains("Loyalty number"))
            let base = [
                ("step", "create"), ("email", "typed@example.com"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"),
                ("displayName", "Tia Typed"),
            ]
            // Not a 32-bit integer: the page says so and no account is made.
            for bad in ["12x", "99999999999", "1.5"] {
                let refused = try await driver.submit(page, base + [("extension_memberLevel", bad)])
                #expect(refused.status == .badRequest)
                #expect(refused.text.contains("Member level must be a whole number"))
                #expect(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "typed@example.com") == nil)
                page = refused
            }
            let control = try await driver.submit(page, base + [("extension_loyaltyNumber", "A\u{202E}1")])
            #expect(control.status == .badRequest && control.text.contains("Loyalty number contains characters"))

            let done = try await driver.submit(
                control,
                base + [("extension_loyaltyNumber", " L-0042 "), ("extension_memberLevel", "-7"), ("extension_newsletter", "true")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text.prefix(400))")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(claims["extension_loyaltyNumber"] as? String == "L-0042")
            #expect(claims["extension_memberLevel"] as? Int == -7)
            #expect(claims["extension_newsletter"] as? Bool == true)
            let user = try #require(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "typed@example.com"))
            #expect(
                user.attributes == ["extension_loyaltyNumber": "L-0042", "extension_memberLevel": "-7", "extension_newsletter": "true"])

            // An unchecked box is "false"; a flow that does not list a claim does not return it.
            var another = try await Self.detailsPage(h, driver, email: "plain@example.com")
            another.0 = try await driver.submit(
                another.0,
                [
                    ("step", "create"), ("email", "plain@example.com"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"),
                    ("displayName", "Pat"),
                ])
            let plain = try #require(
                try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "plain@example.com"))
            #expect(plain.attributes == ["extension_newsletter": "false"])
            let ropc = try await driver.ropc(h, username: "typed@example.com", password: "Passw0rd!")
            let ropcClaims = DecodedJWT(try #require(ropc.json["id_token"] as? String)).claims
            // B2C_1_ROPC returns only the dev tenant's loyaltyNumber.
            #expect(ropcClaims["extension_loyaltyNumber"] as? String == "L-0042")
            #expect(ropcClaims["extension_memberLevel"] == nil && ropcClaims["extension_newsletter"] == nil)
        }
    }

    @Test("Graph: typed extension properties on create, $select, $filter and PATCH; a wrong type changes nothing")
    func graph() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.declare(h)
            let tenant = try #require(try await h.server.tenants.tenant(matching: h.tenant.guid))
            let auth = try await GraphUsersTests.appToken(h, driver)
            let appID = tenant.extensionsAppID.uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let (loyalty, level, news) = (
                "extension_\(appID)_loyaltyNumber", "extension_\(appID)_memberLevel", "extension_\(appID)_newsletter"
            )

            // A wrong JSON type, an out-of-range int, another app's extension: 400, nothing created.
            for extra in [
                #","\#(level)":"7""#, #","\#(level)":2147483648"#, #","\#(news)":"yes""#, #","\#(loyalty)":12"#,
                #","extension_00000000000000000000000000000000_loyaltyNumber":"x""#,
            ] {
                let refused = try await driver.request(
                    .post, "/v1.0/users", headers: GraphUsersTests.json("", auth),
                    body: GraphUsersTests.newUser(h, email: "ext@example.com", extra: extra))
                #expect(refused.status == .badRequest, "\(extra): \(refused.text)")
                #expect(GraphUsersTests.errorCode(refused) == "Request_BadRequest")
            }
            #expect(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "ext@example.com") == nil)

            let created = try await driver.request(
                .post, "/v1.0/users", headers: GraphUsersTests.json("", auth),
                body: GraphUsersTests.newUser(
                    h, email: "ext@example.com", extra: #","\#(loyalty)":"L-1","\#(level)":3,"\#(news)":true"#))
            #expect(created.status == .created, "\(created.text)")
            let id = try #require(created.json["id"] as? String)
            // Graph v1.0 returns extension properties only when $select names them.
            let plain = try await driver.get("/v1.0/users/\(id)", headers: auth)
            #expect(plain.json[loyalty] == nil)
            let selected = try await driver.get("/v1.0/users/\(id)?$select=id,\(loyalty),\(level),\(news)", headers: auth)
            #expect(selected.json[loyalty] as? String == "L-1")
            #expect(selected.json[level] as? Int == 3)
            #expect(selected.json[news] as? Bool == true)

            let filtered = try await driver.get("/v1.0/users?" + Form.encode([("$filter", "\(level) eq 3")]), headers: auth)
            #expect((filtered.json["value"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id])
            let none = try await driver.get("/v1.0/users?" + Form.encode([("$filter", "\(loyalty) eq 'L-2'")]), headers: auth)
            #expect((none.json["value"] as? [Any])?.isEmpty == true)

            // PATCH: a wrong type changes nothing; null removes; a new value replaces.
            let wrong = try await driver.request(
                .patch, "/v1.0/users/\(id)", headers: GraphUsersTests.json("", auth), body: #"{"displayName":"Renamed","\#(level)":true}"#)
            #expect(wrong.status == .badRequest)
            let patched = try await driver.request(
                .patch, "/v1.0/users/\(id)", headers: GraphUsersTests.json("", auth), body: #"{"\#(loyalty)":null,"\#(level)":-1}"#)
            #expect(patched.status == .noContent, "\(patched.text)")
            let uuid = try #require(UUID(uuidString: id))
            let user = try #require(try await h.server.users.user(id: uuid))
            #expect(user.displayName == "Gail Graph")
            #expect(user.attributes == ["extension_memberLevel": "-1", "extension_newsletter": "true"])
            // What Graph wrote, a sign-in returns (B2C_1_sign_up's claims, through ROPC's account).
            let again = try await driver.get("/v1.0/users/\(id)?$select=\(loyalty),\(level)", headers: auth)
            #expect(again.json[loyalty] == nil && again.json[level] as? Int == -1)
        }
    }

    @Test("a declaration names its attributes once; flows and claims may use only declared ones; export keeps them")
    func declaration() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("attributes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bad = directory.appendingPathComponent("bad.yaml")
        try """
        tenant: { name: contoso.onmicrosoft.com }
        userAttributes:
          - { name: loyaltyNumber, type: string }
          - { name: LoyaltyNumber, type: int }
          - { name: "has space", type: boolean }
        userFlows:
          - { name: B2C_1_susi, type: signUpOrSignIn, signUpAttributes: [displayName, extension_shoeSize],
              applicationClaims: [name, extension_favouriteColour] }
        """.write(to: bad, atomically: true, encoding: .utf8)
        do {
            _ = try TenantDeclaration.load(path: bad.path)
            Issue.record("an undeclared attribute was accepted")
        } catch let error as TenantDeclaration.DeclarationError {
            let text = error.description
            #expect(text.contains("user attribute names must be unique"))
            #expect(text.contains("user attribute name 'has space' must be"))
            #expect(text.contains("B2C_1_susi: extension_shoeSize is not one of the declared userAttributes"))
            #expect(text.contains("claim 'extension_favouriteColour' is not one of the declared userAttributes"))
        }
        let wrongType = directory.appendingPathComponent("type.yaml")
        try """
        tenant: { name: contoso.onmicrosoft.com }
        userAttributes: [{ name: size, type: float }]
        userFlows: [{ name: B2C_1_susi, type: signUpOrSignIn }]
        """.write(to: wrongType, atomically: true, encoding: .utf8)
        #expect(throws: TenantDeclaration.DeclarationError.self) { try TenantDeclaration.load(path: wrongType.path) }

        let good = directory.appendingPathComponent("good.yaml")
        try """
        tenant: { name: contoso.onmicrosoft.com, defaultPolicy: B2C_1_susi }
        userAttributes:
          - { name: shoeSize, type: int, displayName: Shoe size }
        userFlows:
          - { name: B2C_1_susi, type: signUpOrSignIn, signUpAttributes: [displayName, extension_shoeSize],
              applicationClaims: [name, oid, extension_shoeSize] }
        """.write(to: good, atomically: true, encoding: .utf8)
        let declaration = try TenantDeclaration.load(path: good.path)
        try await IdentityHarness.run(.sqlite) { h, _ in
            let applied = try await declaration.applyReporting(to: h.server.administration, baseDirectory: directory)
            #expect(applied.tenant.userAttributes == [CustomAttribute(name: "shoeSize", type: .int, displayName: "Shoe size")])
            let flow = try await h.server.tenants.userFlow(tenantID: applied.tenant.id, name: "B2C_1_susi")
            #expect(flow?.signUpAttributes == [.displayName, .custom("shoeSize")])
            let exported = try await h.server.administration.exportTenant(tenantID: applied.tenant.id, withUsers: false)
            #expect(exported.contains("shoeSize"))
            let file = directory.appendingPathComponent("exported.yaml")
            try exported.write(to: file, atomically: true, encoding: .utf8)
            let again = try await TenantDeclaration.load(path: file.path).applyReporting(to: h.server.administration, baseDirectory: directory)
            #expect(again.changes.isEmpty, "\(again.changes)")
        }
    }

    @Test("a value kept from an older declaration: left out of tokens and Graph, no obstacle to other changes, not exported")
    func olderDeclaration() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await Self.declare(h)
            let user = try await h.server.administration.createUser(
                tenantID: h.tenant.id,
                {
                    var account = NewAccount(identity: .email("old@example.com"), displayName: "Old", password: "Passw0rd!")
                    account.attributes = ["extension_memberLevel": "5", "extension_loyaltyNumber": "L-5"]
                    return account
                }())
            // memberLevel becomes a boolean; loyaltyNumber is withdrawn.
            var tenant = try #require(try await h.server.tenants.tenant(matching: h.tenant.guid))
            tenant.userAttributes = [CustomAttribute(name: "memberLevel", type: .boolean), Self.newsletter]
            try await h.server.tenants.save(tenant, now: Date())
            var flow = try #require(try await h.server.tenants.userFlow(tenantID: tenant.id, name: "B2C_1_ROPC"))
            flow.applicationClaims.append("extension_memberLevel")
            try await h.server.tenants.save(flow)
            let claims = DecodedJWT(
                try #require(try await driver.ropc(h, username: "old@example.com", password: "Passw0rd!").json["id_token"] as? String)
            ).claims
            #expect(claims["extension_memberLevel"] == nil && claims["extension_loyaltyNumber"] == nil)
            var rename = AccountChanges()
            rename.displayName = "Renamed"
            try await h.server.administration.updateUser(user, rename)
            #expect(try await h.server.users.user(id: user.id)?.displayName == "Renamed")
            let exported = try await h.server.administration.exportTenant(tenantID: tenant.id, withUsers: true)
            let users = try #require(exported.range(of: "\nusers:")).upperBound
            #expect(!exported[users...].contains("extension_memberLevel") && !exported.contains("L-5"), "\(exported[users...])")
        }
    }
}
