import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
import Yams

@testable import IdentityServer
@testable import UserJourneys

/// Graph's user-flow resources (SPEC §2.14): custom attributes, B2C user flows with their
/// assignments, providers and connectors, on the YAML's store (an export round-trips).
@Suite("Microsoft Graph user flows, attributes, connectors and providers")
struct GraphIdentityTests {
    static let roles = ["IdentityUserFlow.ReadWrite.All", "APIConnectors.ReadWrite.All", "IdentityProvider.ReadWrite.All"]

    static func send(_ driver: Driver, _ method: HTTPRequest.Method, _ path: String, _ auth: HTTPFields, _ body: String? = nil) async throws
        -> TestResponse
    {
        try await driver.request(method, path, headers: GraphApplicationsTests.json(auth), body: body ?? "")
    }

    @Test("custom attributes: every Graph data type, refusals in Graph's shape, and one a flow uses is kept", arguments: TestDatabase.engines)
    func attributes(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.roles)
            for (name, type) in [("memberNumber", "int64"), ("hobby", "string"), ("birthday", "dateTime"), ("tags", "stringCollection"), ("vip", "boolean")] {
                let created = try await Self.send(driver, .post, "/v1.0/identity/userFlowAttributes", auth, #"{"displayName":"\#(name)","description":"The \#(name)","dataType":"\#(type)"}"#)
                #expect(created.status == .created, "\(created.text)")
                #expect((created.json["id"] as? String)?.hasSuffix("_\(name)") == true && created.json["dataType"] as? String == type)
                #expect(created.json["userFlowAttributeType"] as? String == "custom")
            }
            let before = try await h.server.tenants.tenant(matching: h.tenant.name)?.userAttributes
            for body in [
                #"{"displayName":"money","dataType":"decimal"}"#, #"{"displayName":"hobby","dataType":"string"}"#,
                #"{"displayName":"bad name!","dataType":"string"}"#, #"{"displayName":"city","dataType":"string"}"#, #"{"dataType":"string"}"#,
            ] {
                let refused = try await Self.send(driver, .post, "/v1.0/identity/userFlowAttributes", auth, body)
                #expect(refused.status == .badRequest, "\(body): \(refused.text)")
                #expect(GraphUsersTests.errorCode(refused) == "Request_BadRequest")
            }
            #expect(try await h.server.tenants.tenant(matching: h.tenant.name)?.userAttributes == before)

            let list = try await driver.get("/v1.0/identity/userFlowAttributes?$filter=userFlowAttributeType%20eq%20'custom'", headers: auth)
            let custom = try #require(list.json["value"] as? [[String: Any]])
            #expect(custom.count == 6)  // the dev tenant's loyaltyNumber, and these five
            let builtIn = try await driver.get("/v1.0/identity/userFlowAttributes/City", headers: auth)
            #expect(builtIn.json["userFlowAttributeType"] as? String == "builtIn")
            let hobby = try #require(custom.first { $0["displayName"] as? String == "hobby" }?["id"] as? String)
            #expect((try await Self.send(driver, .patch, "/v1.0/identity/userFlowAttributes/\(hobby)", auth, #"{"description":"What you do"}"#)).status == .noContent)
            #expect(try await driver.get("/v1.0/identity/userFlowAttributes/\(hobby)", headers: auth).json["description"] as? String == "What you do")
            #expect((try await Self.send(driver, .patch, "/v1.0/identity/userFlowAttributes/City", auth, #"{"description":"x"}"#)).status == .badRequest)
            #expect((try await Self.send(driver, .patch, "/v1.0/identity/userFlowAttributes/\(hobby)", auth, #"{"dataType":"int64"}"#)).status == .badRequest)

            // Assigned to a flow: not deleted; once unassigned, deleted.
            let assigned = try await Self.send(
                driver, .post, "/beta/identity/b2cUserFlows/B2C_1_susi/userAttributeAssignments", auth, #"{"userAttribute":{"id":"\#(hobby)"}}"#)
            #expect(assigned.status == .created, "\(assigned.text)")
            #expect((try await driver.request(.delete, "/v1.0/identity/userFlowAttributes/\(hobby)", headers: auth)).status == .badRequest)
            #expect((try await driver.request(.delete, "/beta/identity/b2cUserFlows/B2C_1_susi/userAttributeAssignments/\(hobby)", headers: auth)).status == .noContent)
            #expect((try await driver.request(.delete, "/v1.0/identity/userFlowAttributes/\(hobby)", headers: auth)).status == .noContent)
            #expect((try await driver.request(.delete, "/v1.0/identity/userFlowAttributes/City", headers: auth)).status == .badRequest)
        }
    }

    @Test("a user flow made through Graph: B2C_1_ prefix, its page collects the assigned attribute, lifetimes take effect, order and refusals", arguments: TestDatabase.engines)
    func userFlows(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.roles)
            let attribute = try await Self.send(driver, .post, "/beta/identity/userFlowAttributes", auth, #"{"displayName":"shoeSize","dataType":"int64"}"#)
            let attributeID = try #require(attribute.json["id"] as? String)
            let created = try await Self.send(
                driver, .post, "/beta/identity/b2cUserFlows", auth,
                #"{"id":"Customer","userFlowType":"signUpOrSignIn","userFlowTypeVersion":3,"tokenLifetimes":{"accessTokenMinutes":15}}"#)
            #expect(created.status == .created, "\(created.text)")
            #expect(created.json["id"] as? String == "B2C_1_Customer")
            #expect(created.headers[.location]?.hasSuffix("/b2cUserFlows/B2C_1_Customer") == true)
            let assigned = try await Self.send(
                driver, .post, "/beta/identity/b2cUserFlows/B2C_1_Customer/userAttributeAssignments", auth,
                #"{"isOptional":true,"requiresVerification":false,"userInputType":"TextBox","displayName":"Shoe size","userAttributeValues":[],"userAttribute":{"id":"\#(attributeID)"}}"#)
            #expect(assigned.status == .created, "\(assigned.text)")

            // Its sign-up page collects the attribute at once.
            var attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_Customer")
            attempt.scope = "openid"
            var page = try await driver.start(attempt, harness: h)
            page = try await driver.follow(try await driver.get(try #require(page.link(id: "createAccount"))))
            page = try await driver.submit(page, [("step", "send"), ("email", "shoes@example.com")])
            page = try await driver.submit(page, [("step", "verify"), ("code", try await h.latestCode())])
            #expect(page.text.contains("name=\"extension_shoeSize\""), "\(page.text.prefix(400))")

            // Its token lifetime.
            _ = try await h.addUser()
            let minted = try await driver.request(
                .post, "/dev/tokens", headers: DevelopmentSurfaceTests.json,
                body: #"{"user":"alice@example.com","client":"\#(h.clientID)","policy":"B2C_1_Customer"}"#)
            #expect(minted.json["expires_in"] as? Int == 900, "\(minted.text)")
            #expect(
                (try await Self.send(driver, .patch, "/beta/identity/b2cUserFlows/B2C_1_Customer", auth, #"{"tokenLifetimes":{"accessTokenMinutes":1441}}"#)).status
                    == .badRequest)
            let flow = try await driver.get("/beta/identity/b2cUserFlows/B2C_1_Customer", headers: auth)
            #expect((flow.json["tokenLifetimes"] as? [String: Any])?["accessTokenMinutes"] as? Int == 15)

            // Order.
            let order = try await driver.get("/beta/identity/b2cUserFlows/B2C_1_Customer/userAttributeAssignments/getOrder", headers: auth)
            #expect(order.json["order"] as? [String] == ["DisplayName", attributeID])
            #expect(
                (try await Self.send(
                    driver, .post, "/beta/identity/b2cUserFlows/B2C_1_Customer/userAttributeAssignments/setOrder", auth,
                    #"{"newAssignmentOrder":{"order":["\#(attributeID)","DisplayName"]}}"#)).status == .noContent)
            #expect(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_Customer")?.signUpAttributes.first == .custom("shoeSize"))

            // Refusals: a duplicate, an unknown type, a required attribute, a custom policy's name.
            for body in [
                #"{"id":"Customer","userFlowType":"signUpOrSignIn","userFlowTypeVersion":3}"#,
                #"{"id":"Other","userFlowType":"magic","userFlowTypeVersion":3}"#,
                #"{"id":"has space","userFlowType":"signIn","userFlowTypeVersion":3}"#,
                #"{"id":"Life","userFlowType":"signIn","tokenLifetimes":{"refreshTokenDays":91}}"#,
            ] {
                #expect((try await Self.send(driver, .post, "/beta/identity/b2cUserFlows", auth, body)).status == .badRequest, "\(body)")
            }
            #expect(
                (try await Self.send(
                    driver, .post, "/beta/identity/b2cUserFlows/B2C_1_Customer/userAttributeAssignments", auth,
                    #"{"isOptional":false,"userAttribute":{"id":"City"}}"#)).status == .badRequest)
            // The default flow and custom policies are not deleted through it.
            #expect((try await driver.request(.delete, "/beta/identity/b2cUserFlows/\(h.tenant.defaultPolicy)", headers: auth)).status == .badRequest)
            #expect((try await driver.request(.delete, "/beta/identity/b2cUserFlows/B2C_1_Customer", headers: auth)).status == .noContent)
            #expect(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_Customer") == nil)
        }
    }

    @Test("connectors and providers: secrets sealed and shown as ******, wired into flows, kept while used; an export round-trips", arguments: TestDatabase.engines)
    func connectorsProvidersAndExport(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: Self.roles)
            let connector = try await Self.send(
                driver, .post, "/v1.0/identity/apiConnectors", auth,
                ##"{"displayName":"checkLoyalty","targetUrl":"https://api.example/check","authenticationConfiguration":{"@odata.type":"#microsoft.graph.basicAuthentication","username":"b2c","password":"s3cret-value"}}"##)
            #expect(connector.status == .created, "\(connector.text)")
            let connectorID = try #require(connector.json["id"] as? String)
            #expect((connector.json["authenticationConfiguration"] as? [String: Any])?["password"] as? String == "******")
            let stored = try #require(try await h.server.tenants.tenant(matching: h.tenant.name)?.apiConnectors.first)
            #expect(stored.password?.hasPrefix("sealed:") == true && stored.password?.contains("s3cret") == false)
            let wired = try await Self.send(
                driver, .put, "/beta/identity/b2cUserFlows/B2C_1_susi/apiConnectorConfiguration/postAttributeCollection/$ref", auth,
                #"{"@odata.id":"https://graph.microsoft.com/beta/identity/apiConnectors/\#(connectorID)"}"#)
            #expect(wired.status == .noContent, "\(wired.text)")
            #expect(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_susi")?.connectors.beforeCreatingUser == "checkLoyalty")
            #expect((try await driver.request(.delete, "/v1.0/identity/apiConnectors/\(connectorID)", headers: auth)).status == .badRequest)
            // The sealed password goes only where it was given for: a new target needs it again.
            #expect((try await Self.send(driver, .patch, "/v1.0/identity/apiConnectors/\(connectorID)", auth, #"{"targetUrl":"https://attacker.example/"}"#)).status == .badRequest)
            let readBack = ##"{"targetUrl":"https://attacker.example/","authenticationConfiguration":{"@odata.type":"#microsoft.graph.basicAuthentication","username":"b2c","password":"******"}}"##
            #expect((try await Self.send(driver, .patch, "/v1.0/identity/apiConnectors/\(connectorID)", auth, readBack)).status == .badRequest)
            #expect(try await h.server.tenants.tenant(matching: h.tenant.name)?.apiConnectors.first?.url == "https://api.example/check")
            #expect((try await Self.send(driver, .patch, "/v1.0/identity/apiConnectors/\(connectorID)", auth, #"{"displayName":"checkLoyalty"}"#)).status == .noContent)
            #expect(try await h.server.tenants.tenant(matching: h.tenant.name)?.apiConnectors.first?.password == stored.password)

            let provider = try await Self.send(
                driver, .post, "/v1.0/identity/identityProviders", auth,
                ##"{"@odata.type":"#microsoft.graph.openIdConnectIdentityProvider","displayName":"Contoso ID","domainHint":"contoso","clientId":"b2c-client","clientSecret":"provider-secret","metadataUrl":"https://login.contoso.example/.well-known/openid-configuration","responseType":"code","scope":"openid profile email","claimsMapping":{"userId":"sub","email":"email","displayName":"name"}}"##)
            #expect(provider.status == .created, "\(provider.text)")
            let providerID = try #require(provider.json["id"] as? String)
            #expect(try await driver.get("/v1.0/identity/identityProviders/\(providerID)", headers: auth).json["clientSecret"] as? String == "******")
            #expect(
                (try await Self.send(
                    driver, .patch, "/beta/identity/b2cUserFlows/B2C_1_susi/userFlowIdentityProviders/$ref", auth,
                    #"{"@odata.id":"https://graph.microsoft.com/beta/identity/identityProviders/\#(providerID)"}"#)).status == .noContent)
            let flowProviders = try await driver.get("/beta/identity/b2cUserFlows/B2C_1_susi/userFlowIdentityProviders", headers: auth)
            #expect((flowProviders.json["value"] as? [[String: Any]])?.contains { $0["id"] as? String == providerID } == true)
            #expect((try await Self.send(
                driver, .post, "/v1.0/identity/identityProviders", auth,
                ##"{"@odata.type":"#microsoft.graph.socialIdentityProvider","displayName":"Amazon","identityProviderType":"Amazon","clientId":"x","clientSecret":"y"}"##)).status
                == .badRequest)
            _ = try await Self.send(driver, .post, "/v1.0/identity/userFlowAttributes", auth, #"{"displayName":"tier","dataType":"string"}"#)

            // The export shows every Graph change, and applying it changes nothing.
            let yaml = try await h.server.administration.exportTenant(tenantID: h.tenant.id, withUsers: false)
            #expect(yaml.contains("checkLoyalty") && yaml.contains("contoso") && yaml.contains("tier") && !yaml.contains("provider-secret"))
            let declaration = try YAMLDecoder().decode(TenantDeclaration.self, from: yaml)
            let (_, changes) = try await declaration.applyReporting(to: h.server.administration, baseDirectory: URL(fileURLWithPath: "/tmp"))
            #expect(changes.isEmpty, "\(changes)")
        }
    }
}
