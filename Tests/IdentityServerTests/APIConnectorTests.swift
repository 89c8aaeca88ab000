import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Logging
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// API connectors (SPEC §2.11): a real HTTP endpoint on loopback is called before the account
/// is created, with B2C's body; its three answers and its failures each do what B2C does, and a
/// refused sign-up creates nothing.
@Suite("API connectors")
struct APIConnectorTests {
    /// What the endpoint received, in order.
    actor Received {
        struct Call: Sendable {
            var path: String
            var authorization: String?
            var text: String
            var body: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
        }
        var calls: [Call] = []
        func add(_ path: String, _ authorization: String?, _ text: String) {
            calls.append(Call(path: path, authorization: authorization, text: text))
        }
        func all() -> [Call] { calls }
    }

    /// A connector endpoint: each path answers one way.
    static func endpoint(_ received: Received) -> Application<RouterResponder<BasicRequestContext>> {
        let router = Router()
        router.post("{kind}") { request, context -> Response in
            let kind = context.parameters.get("kind") ?? ""
            let body = try await request.body.collect(upTo: 1 << 16)
            await received.add(kind, request.headers[.authorization], String(buffer: body))
            func reply(_ status: HTTPResponse.Status, _ text: String) -> Response {
                Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
            }
            switch kind {
            case "continue":
                return reply(.ok, #"{"version":"1.0.0","action":"Continue","city":"Override City","extension_memberLevel":7}"#)
            case "block":
                return reply(.ok, #"{"version":"1.0.0","action":"ShowBlockPage","userMessage":"Sign-ups from <this> domain are closed."}"#)
            case "validate":
                return reply(
                    .badRequest,
                    #"{"version":"1.0.0","status":400,"action":"ValidationError","userMessage":"Please enter a valid loyalty number."}"#)
            case "garbage": return reply(.ok, "<html>oops</html>")
            case "wrongtype": return reply(.ok, #"{"version":"1.0.0","action":"Continue","extension_memberLevel":"seven"}"#)
            case "slow":
                try await Task.sleep(for: .seconds(3))
                return reply(.ok, #"{"version":"1.0.0","action":"Continue"}"#)
            default: return reply(.internalServerError, #"{"error":"boom"}"#)
            }
        }
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: Logger(label: "connector"))
    }

    /// The dev tenant with connectors to `port` and `B2C_1_sign_up` calling `connector` before
    /// the account is created.
    static func configure(_ h: IdentityHarness, port: Int, connector: String) async throws {
        var tenant = h.tenant
        tenant.userAttributes = [DevTenant.loyaltyNumber, CustomAttributeTests.level]
        let paths = ["continue", "block", "validate", "garbage", "wrongtype", "slow", "fail"]
        // Only "slow" is meant to time out (3 s against 1 s); the others get room enough that a
        // loaded machine does not set off the retry B2C makes when no answer comes.
        tenant.apiConnectors = paths.map {
            APIConnector(name: $0, url: "http://127.0.0.1:\(port)/\($0)", timeoutSeconds: $0 == "slow" ? 1 : 10)
        }
        let token = try h.server.service.dataKey.seal(
            "connector-token", context: APIConnector.sealingContext(tenantID: tenant.id, name: "bearer", field: "token"))
        tenant.apiConnectors.append(
            APIConnector(name: "bearer", url: "http://127.0.0.1:\(port)/continue", auth: .bearer, token: token, timeoutSeconds: 10))
        try await h.server.tenants.save(tenant, now: Date())
        var flow = try #require(try await h.server.tenants.userFlow(tenantID: tenant.id, name: "B2C_1_sign_up"))
        flow.signUpAttributes = [.displayName, .builtIn(.city), .custom("loyaltyNumber"), .custom("memberLevel")]
        flow.applicationClaims = UserFlow.defaultClaims + ["city", "extension_memberLevel"]
        flow.connectors = FlowConnectors(beforeCreatingUser: connector)
        try await h.server.tenants.save(flow)
    }

    /// Signs up on `B2C_1_sign_up` up to "Create"; returns the answer to it.
    static func signUp(_ h: IdentityHarness, _ driver: Driver, email: String) async throws -> (TestResponse, AuthorizationAttempt) {
        let (page, attempt) = try await CustomAttributeTests.detailsPage(h, driver, email: email)
        let created = try await driver.submit(
            page,
            [
                ("step", "create"), ("email", email), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"),
                ("displayName", "Con Nector"), ("city", "Typed City"), ("extension_loyaltyNumber", "L-9"),
            ])
        return (created, attempt)
    }

    static func account(_ h: IdentityHarness, _ email: String) async throws -> UserAccount? {
        try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: email)
    }

    @Test("Continue: B2C's request body reaches the API, its values override what was typed and reach the token")
    func continueOverrides() async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.configure(h, port: port, connector: "bearer")
                let (created, attempt) = try await Self.signUp(h, driver, email: "cont@example.com")
                let code = try #require(created.redirectParameters["code"], "\(created.status) \(created.text.prefix(300))")
                let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String))
                    .claims
                #expect(claims["city"] as? String == "Override City")
                #expect(claims["extension_memberLevel"] as? Int == 7)

                let call = try #require(await received.all().first)
                #expect(call.authorization == "Bearer connector-token")
                let body = call.body
                let appID = h.tenant.extensionsAppID.uuidString.lowercased().replacingOccurrences(of: "-", with: "")
                #expect(body["email"] as? String == "cont@example.com")
                #expect(body["step"] as? String == "PostAttributeCollection")
                #expect(body["client_id"] as? String == h.clientID)
                #expect(body["displayName"] as? String == "Con Nector")
                #expect(body["city"] as? String == "Typed City")
                #expect(body["extension_\(appID)_loyaltyNumber"] as? String == "L-9")
                #expect(body["objectId"] == nil, "no account exists yet")
                let identity = try #require((body["identities"] as? [[String: Any]])?.first)
                #expect(identity["signInType"] as? String == "emailAddress" && identity["issuer"] as? String == h.tenant.name)
                let account = try #require(try await Self.account(h, "cont@example.com"))
                #expect(account.attributes["city"] == "Override City" && account.attributes["extension_memberLevel"] == "7")
            }
        }
    }

    @Test("ShowBlockPage stops on a page with the message; ValidationError shows the form again; neither creates the account")
    func blockAndValidate() async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.configure(h, port: port, connector: "block")
                let (blocked, _) = try await Self.signUp(h, driver, email: "blocked@example.com")
                #expect(blocked.status == .forbidden)
                #expect(blocked.text.contains("Sign-ups from &lt;this&gt; domain are closed."))
                #expect(try await Self.account(h, "blocked@example.com") == nil)

                try await Self.configure(h, port: port, connector: "validate")
                driver.cookies = [:]
                let (invalid, _) = try await Self.signUp(h, driver, email: "invalid@example.com")
                #expect(invalid.status == .badRequest)
                #expect(invalid.text.contains("Please enter a valid loyalty number."))
                #expect(invalid.text.contains("value=\"Typed City\""), "what was typed is kept")
                #expect(try await Self.account(h, "invalid@example.com") == nil)
            }
        }
    }

    @Test(
        "a connector that answers garbage, a wrong type, an error status, or nothing in time ends the sign-in with AADB2C90075",
        arguments: ["garbage", "wrongtype", "fail", "slow"])
    func failures(connector: String) async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.configure(h, port: port, connector: connector)
                let (failed, _) = try await Self.signUp(h, driver, email: "\(connector)@example.com")
                #expect(
                    b2cCode(redirect: failed) == "AADB2C90075", "\(failed.status) \(failed.location ?? failed.text.prefix(200).description)"
                )
                #expect(failed.redirectParameters["error_description"]?.contains("'\(connector)'") == true)
                #expect(try await Self.account(h, "\(connector)@example.com") == nil)
                if connector == "slow" {
                    // No answer in time: one more attempt, as B2C makes.
                    #expect(await received.all().filter { $0.path == "slow" }.count == 2)
                }
            }
        }
    }

    /// `B2C_1_sign_in` calling the `continue` connector before sending the token, its values
    /// (`city`, `extension_memberLevel`) among the flow's claims.
    static func signInWithTokenConnector(_ h: IdentityHarness, port: Int) async throws -> UserFlow {
        try await configure(h, port: port, connector: "continue")
        var flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_sign_in"))
        flow.applicationClaims = UserFlow.defaultClaims + ["city", "extension_memberLevel"]
        flow.connectors = FlowConnectors(beforeSendingToken: "continue")
        try await h.server.tenants.save(flow)
        return flow
    }

    @Test("before sending the token: Continue values go into this sign-in's tokens, refreshes included, not into the directory")
    func beforeSendingToken() async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                var flow = try await Self.signInWithTokenConnector(h, port: port)
                let user = try await h.addUser("tok@example.com")
                let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in")
                let done = try await driver.signIn(h, attempt: attempt, email: "tok@example.com")
                let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.location ?? "")")
                let tokens = try await driver.redeem(h, attempt: attempt, code: code)
                let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
                #expect(claims["city"] as? String == "Override City" && claims["extension_memberLevel"] as? Int == 7)
                let call = try #require(await received.all().last)
                #expect(call.body["step"] as? String == "PreTokenIssuance" && call.body["objectId"] as? String == user.objectID)
                // The directory keeps its own values; a refresh keeps the sign-in's.
                #expect(try await h.server.users.user(id: user.id)?.attributes["city"] == nil)
                let refreshed = try await driver.refresh(
                    h, token: try #require(tokens.json["refresh_token"] as? String), policy: "B2C_1_sign_in")
                #expect(DecodedJWT(try #require(refreshed.json["id_token"] as? String)).claims["city"] as? String == "Override City")
                #expect(await received.all().count == 1, "a refresh does not call the connector")

                // A block answer is no answer at this step: the sign-in ends with AADB2C90075.
                flow.connectors = FlowConnectors(beforeSendingToken: "block")
                try await h.server.tenants.save(flow)
                driver.cookies = [:]
                let blocked = try await driver.signIn(
                    h, attempt: AuthorizationAttempt(harness: h, policy: "B2C_1_sign_in"), email: "tok@example.com")
                #expect(b2cCode(redirect: blocked) == "AADB2C90075")
            }
        }
    }
}
