import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Logging
import Storage
import TestSupport
import Testing
import WireCoding

@testable import IdentityServer
@testable import UserJourneys

/// External ID's custom authentication extensions on the hosted pages (SPEC §2.15), where its
/// user flows call them in the browser: the same events, envelopes and rules as native
/// authentication, on a real loopback endpoint. Nothing is made before the extensions agree, and
/// no page is a way around them.
@Suite("Custom authentication extensions on the hosted pages")
struct PageExtensionTests {
    typealias Received = APIConnectorTests.Received
    typealias E = NativeAuthExtensionTests

    static let password = "Passw0rd!"

    /// The sign-up page up to its details, the code taken from wherever it went.
    static func detailsPage(_ h: IdentityHarness, _ driver: Driver, _ email: String, code: () async throws -> String) async throws
        -> (TestResponse, AuthorizationAttempt)
    {
        let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_up")
        var page = try await driver.start(attempt, harness: h)
        page = try await driver.submit(page, [("step", "send"), ("email", email)])
        page = try await driver.submit(page, [("step", "verify"), ("code", try await code())])
        return (page, attempt)
    }

    static func create(_ driver: Driver, _ page: TestResponse, _ email: String, name: String = "Typed", city: String = "Bergen") async throws -> TestResponse {
        try await driver.submit(
            page,
            [
                ("step", "create"), ("email", email), ("newPassword", password), ("reenterPassword", password), ("displayName", name),
                ("city", city),
            ])
    }

    static func account(_ h: IdentityHarness, _ email: String) async throws -> UserAccount? {
        try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: email)
    }

    @Test(
        "a hosted sign-up through four extensions: the code goes to OnOtpSend, the form shows the start's values, the submit's make the account, the claims provider's are in the code's tokens and their refreshes",
        arguments: TestDatabase.engines)
    func hostedSignUp(engine: DatabaseEngine) async throws {
        let received = Received()
        try await E.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(engine) { h, driver in
                try await E.configure(
                    h, port: port,
                    FlowExtensions(onTokenIssuanceStart: "claims", onAttributeCollectionStart: "prefill", onAttributeCollectionSubmit: "modify", onOtpSend: "otp"),
                    flow: "B2C_1_sign_up")
                let email = "pages@example.com"
                let (page, attempt) = try await Self.detailsPage(h, driver, email) {
                    let otp = try #require(await received.all().first { $0.path == "otp" })
                    let context = try #require((otp.body["data"] as? [String: Any])?["otpContext"] as? [String: Any])
                    #expect(context["identifier"] as? String == email)
                    return try #require(context["oneTimeCode"] as? String)
                }
                #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty, "the extension sends the code")
                #expect(page.status == .ok && page.text.contains(#"value="Oslo""#) && page.text.contains(#"value="Prefilled""#), "\(page.text.prefix(400))")

                let created = try await Self.create(driver, page, email)
                let code = try #require(created.redirectParameters["code"], "\(created.status) \(created.text.prefix(300))")
                let user = try #require(try await Self.account(h, email))
                #expect(user.displayName == "Modified" && user.attributes["city"] == "Bergen", "typed values, then the submit's")
                #expect(await received.all().map(\.path) == ["otp", "prefill", "modify", "claims"])
                let submitted = try #require(await received.all().first { $0.path == "modify" })
                let info = (submitted.body["data"] as? [String: Any])?["userSignUpInfo"] as? [String: Any]
                #expect(((info?["attributes"] as? [String: Any])?["city"] as? [String: Any])?["value"] as? String == "Bergen")
                let issuance = try #require(await received.all().first { $0.path == "claims" })
                let context = (issuance.body["data"] as? [String: Any])?["authenticationContext"] as? [String: Any]
                #expect((context?["user"] as? [String: Any])?["id"] as? String == user.objectID)
                #expect(issuance.body["source"] as? String == "/tenants/\(h.tenant.guid)/applications/\(h.clientID)")

                let tokens = try await driver.redeem(h, attempt: attempt, code: code)
                let id = DecodedJWT(try #require(tokens.json["id_token"] as? String, "\(tokens.text)")).claims
                #expect(id["loyaltyTier"] as? String == "gold" && id["tags"] as? [String] == ["a", "b"])
                #expect(id["oid"] as? String == user.objectID && id["OID"] == nil && id["xms_cc"] == nil && id["other"] == nil)
                let access = DecodedJWT(try #require(tokens.json["access_token"] as? String)).claims
                #expect(access["loyaltyTier"] as? String == "gold")
                // A refresh carries the sign-in's claims; the extension is not called again.
                let refreshed = try await driver.refresh(h, token: try #require(tokens.json["refresh_token"] as? String), policy: "B2C_1_sign_up")
                let again = DecodedJWT(try #require(refreshed.json["id_token"] as? String, "\(refreshed.text)")).claims
                #expect(again["loyaltyTier"] as? String == "gold" && again["tags"] as? [String] == ["a", "b"])
                #expect(await received.all().count == 4)
            }
        }
    }

    @Test("refusals on the sign-up page: a start that blocks (also for a form posted without the page), a submit's validation error, a failing submit; nothing is made")
    func hostedRefusals() async throws {
        let received = Received()
        try await E.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                // The start blocks: the details are never shown, and "Create" posted from the
                // code's page is blocked too.
                try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionStart: "startblock"), flow: "B2C_1_sign_up")
                let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_sign_up")
                var page = try await driver.start(attempt, harness: h)
                page = try await driver.submit(page, [("step", "send"), ("email", "blocked@example.com")])
                let codePage = page
                let blocked = try await driver.submit(page, [("step", "verify"), ("code", try await h.latestCode())])
                #expect(blocked.status == .forbidden && blocked.text.contains("Sign-ups are closed."), "\(blocked.status)")
                let posted = try await Self.create(driver, codePage, "blocked@example.com")
                #expect(posted.status == .forbidden && posted.text.contains("Sign-ups are closed."), "\(posted.status)")
                #expect(try await Self.account(h, "blocked@example.com") == nil)

                // The submit refuses the values: the form again, with its messages.
                try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionSubmit: "invalid"), flow: "B2C_1_sign_up")
                let (details, _) = try await Self.detailsPage(h, driver, "invalid@example.com") { try await h.latestCode() }
                let refused = try await Self.create(driver, details, "invalid@example.com")
                #expect(refused.status == .badRequest && refused.text.contains("Not that city.") && refused.text.contains("city: Pick another"))
                #expect(try await Self.account(h, "invalid@example.com") == nil)

                // The submit fails: the app hears AADB2C90075, and nothing is made.
                try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionSubmit: "brokensubmit"), flow: "B2C_1_sign_up")
                let (again, _) = try await Self.detailsPage(h, driver, "broken@example.com") { try await h.latestCode() }
                let failed = try await Self.create(driver, again, "broken@example.com")
                #expect(failed.redirectParameters["error"] == "server_error" && b2cCode(redirect: failed) == "AADB2C90075", "\(failed.status)")
                #expect(failed.redirectParameters["code"] == nil)
                #expect(try await Self.account(h, "broken@example.com") == nil)
            }
        }
    }

    @Test("a claims provider that fails ends a hosted sign-in before any code: AADB2C90075 on B2C's face, AADSTS1100001 on Entra's")
    func tokenIssuanceFailure() async throws {
        let received = Received()
        try await E.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                _ = try await h.addUser("claims@example.com")
                try await E.configure(h, port: port, FlowExtensions(onTokenIssuanceStart: "brokenclaims"))
                let signedIn = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "claims@example.com")
                #expect(signedIn.redirectParameters["code"] == nil && b2cCode(redirect: signedIn) == "AADB2C90075", "\(signedIn.status)")
                #expect(await received.all().map(\.path) == ["brokenclaims"])
                #expect(ProtocolFailure.extensionFailed.entra.code == 1_100_001)
            }
        }
    }

    /// Signs in at the simulated Facebook as `email`; returns where the service sends the browser.
    static func facebook(_ h: IdentityHarness, _ driver: Driver, _ attempt: AuthorizationAttempt, _ email: String) async throws -> TestResponse {
        let dialog = try await driver.start(attempt, harness: h)
        return try await driver.submit(
            dialog,
            [("email", email), ("name", "Fay Book"), ("state", dialog.field("state") ?? ""), ("redirect_uri", dialog.field("redirect_uri") ?? "")])
    }

    static func federatedAccount(_ h: IdentityHarness) async throws -> [UserAccount] {
        try await h.server.users.users(tenantID: h.tenant.id).filter { $0.identityProvider == .facebook }
    }

    @Test("a provider's sign-up: without an attribute page the start fills in and the submit decides; with one, the page shows the start's values and the submit's refusal")
    func federatedSignUp() async throws {
        let received = Received()
        try await E.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                // B2C_1_facebook makes the account without a page.
                try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionSubmit: "invalid"), flow: "B2C_1_facebook")
                let refused = try await Self.facebook(h, driver, AuthorizationAttempt(harness: h, policy: "B2C_1_facebook"), "fb1@example.com")
                #expect(refused.status == .forbidden && refused.text.contains("Not that city."), "\(refused.status)")
                #expect(try await Self.federatedAccount(h).isEmpty)
                try await E.configure(
                    h, port: port, FlowExtensions(onAttributeCollectionStart: "prefill", onAttributeCollectionSubmit: "modify"), flow: "B2C_1_facebook")
                let made = try await Self.facebook(h, driver, AuthorizationAttempt(harness: h, policy: "B2C_1_facebook"), "fb2@example.com")
                #expect(made.redirectParameters["code"] != nil, "\(made.status)")
                let account = try #require(try await Self.federatedAccount(h).first)
                #expect(account.displayName == "Modified" && account.attributes["city"] == "Oslo")
                let submitted = try #require(await received.all().last { $0.path == "modify" })
                let identity = (((submitted.body["data"] as? [String: Any])?["userSignUpInfo"] as? [String: Any])?["identities"] as? [[String: Any]])?.first
                #expect(identity?["signInType"] as? String == "federated" && identity?["issuer"] as? String == "facebook.com")

                // B2C_1_susi asks a new provider account for its attributes on a page.
                driver.cookies.removeAll()
                try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionStart: "prefill", onAttributeCollectionSubmit: "invalid"))
                var hinted = AuthorizationAttempt(harness: h)
                hinted.extra = [("domain_hint", "facebook.com")]
                let form = try await Self.facebook(h, driver, hinted, "fb3@example.com")
                #expect(form.status == .ok && form.text.contains(#"value="Oslo""#), "\(form.status) \(form.text.prefix(300))")
                let rejected = try await driver.submit(form, [("displayName", "Fay"), ("city", "Oslo")])
                #expect(rejected.status == .badRequest && rejected.text.contains("city: Pick another"))
                #expect(try await Self.federatedAccount(h).count == 1)
            }
        }
    }

    @Test("claims kept with a grant go into its tokens, never into Microsoft Graph's, and never half when they no longer pass")
    func keptClaims() throws {
        var api = GrantedScopes()
        api.resource = TokenResource(audience: "api://tasks", scopeNames: ["tasks.read"])
        var graph = GrantedScopes()
        graph.resource = TokenResource(audience: APIPermission.graphResource, scopeNames: ["User.Read"])
        let kept: [String: JSONValue] = ["loyaltyTier": .string("gold")]
        #expect(ExtraClaims(kept: kept, scopes: api).members.map(\.0) == ["loyaltyTier"])
        #expect(ExtraClaims(kept: kept, scopes: GrantedScopes()).members.map(\.0) == ["loyaltyTier"], "an ID token only")
        #expect(ExtraClaims(kept: kept, scopes: graph).members.isEmpty)
        #expect(ExtraClaims(kept: ["loyaltyTier": .string("gold"), "iss": .string("forged")], scopes: api).members.isEmpty)
        #expect(ExtraClaims(kept: nil, scopes: api).members.isEmpty)
    }
}
