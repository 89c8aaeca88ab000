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

    /// Runs `body` with the extension endpoint on loopback (its port, and what it received) and
    /// a harness on `engine`.
    static func run(
        _ engine: DatabaseEngine = .sqlite, _ body: @escaping @Sendable (IdentityHarness, Driver, Int, Received) async throws -> Void
    ) async throws {
        let received = Received()
        try await E.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(engine) { h, driver in try await body(h, driver, port, received) }
        }
    }

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
        "a hosted sign-up through four extensions: the code goes to OnOtpSend, the form shows the start's values, the submit's make the account, the claims provider's are in the code's tokens, and each refresh asks it again",
        arguments: TestDatabase.engines)
    func hostedSignUp(engine: DatabaseEngine) async throws {
        try await Self.run(engine) { h, driver, port, received in
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
        // A refresh issues tokens again: the claims provider is asked again.
        let refreshed = try await driver.refresh(h, token: try #require(tokens.json["refresh_token"] as? String), policy: "B2C_1_sign_up")
        let again = DecodedJWT(try #require(refreshed.json["id_token"] as? String, "\(refreshed.text)")).claims
        #expect(again["loyaltyTier"] as? String == "gold" && again["tags"] as? [String] == ["a", "b"])
        #expect(await received.all().map(\.path) == ["otp", "prefill", "modify", "claims", "claims"])
        // Unbound, it is asked no more, and its claims are gone.
        try await E.configure(h, port: port, FlowExtensions(), flow: "B2C_1_sign_up")
        let later = try await driver.refresh(h, token: try #require(refreshed.json["refresh_token"] as? String), policy: "B2C_1_sign_up")
        let plain = DecodedJWT(try #require(later.json["id_token"] as? String, "\(later.text)")).claims
        #expect(plain["loyaltyTier"] == nil && plain["oid"] as? String == user.objectID)
        #expect(await received.all().count == 5)
        }
    }

    @Test("refusals on the sign-up page: a start that blocks (also for a form posted without the page), a submit's validation error, a failing submit; nothing is made")
    func hostedRefusals() async throws {
        try await Self.run { h, driver, port, received in
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

    @Test("a claims provider that fails ends a hosted sign-in before any code: AADB2C90075 on B2C's face, AADSTS1100001 on Entra's")
    func tokenIssuanceFailure() async throws {
        try await Self.run { h, driver, port, received in
        _ = try await h.addUser("claims@example.com")
        try await E.configure(h, port: port, FlowExtensions(onTokenIssuanceStart: "brokenclaims"))
        let signedIn = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "claims@example.com")
        #expect(signedIn.redirectParameters["code"] == nil && b2cCode(redirect: signedIn) == "AADB2C90075", "\(signedIn.status)")
        #expect(await received.all().map(\.path) == ["brokenclaims"])
        #expect(ProtocolFailure.extensionFailed.entra.code == 1_100_001)
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
        try await Self.run { h, driver, port, received in
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

    @Test("the start answers for the address the account gets: another address proven after it asks again, and a block holds for a reload or a posted form without a new call")
    func startFollowsTheAddress() async throws {
        try await Self.run { h, driver, port, received in
        try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionStart: "blockbyaddress"), flow: "B2C_1_sign_up")
        let (allowed, _) = try await Self.detailsPage(h, driver, "fine@example.com") { try await h.latestCode() }
        #expect(allowed.status == .ok && allowed.text.contains("newPassword"), "\(allowed.status)")
        // Another address, proven in the same journey.
        var page = try await driver.submit(allowed, [("step", "restart")])
        page = try await driver.submit(page, [("step", "send"), ("email", "blocked@example.com")])
        let blocked = try await driver.submit(page, [("step", "verify"), ("code", try await h.latestCode())])
        #expect(blocked.status == .forbidden && blocked.text.contains("Not this address."), "\(blocked.status)")
        // The first address's form, posted now, makes no account for the second.
        let posted = try await Self.create(driver, allowed, "blocked@example.com")
        #expect(posted.status == .forbidden && posted.text.contains("Not this address."), "\(posted.status)")
        #expect(try await Self.account(h, "blocked@example.com") == nil)
        #expect(try await Self.account(h, "fine@example.com") == nil)
        #expect(await received.all().count == 2, "once per address")
        }
    }

    @Test("the submit's block and a value it gives that the flow's rules refuse: no account either way")
    func submitBlocksAndBadValues() async throws {
        try await Self.run { h, driver, port, received in
        try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionSubmit: "submitblock"), flow: "B2C_1_sign_up")
        let (page, _) = try await Self.detailsPage(h, driver, "refused@example.com") { try await h.latestCode() }
        let blocked = try await Self.create(driver, page, "refused@example.com")
        #expect(blocked.status == .forbidden && blocked.text.contains("Sign-up refused."), "\(blocked.status)")
        #expect(try await Self.account(h, "refused@example.com") == nil)

        try await E.configure(h, port: port, FlowExtensions(onAttributeCollectionSubmit: "badmodify"), flow: "B2C_1_sign_up")
        let (again, _) = try await Self.detailsPage(h, driver, "badvalue@example.com") { try await h.latestCode() }
        let failed = try await Self.create(driver, again, "badvalue@example.com")
        #expect(b2cCode(redirect: failed) == "AADB2C90075", "\(failed.status)")
        #expect(try await Self.account(h, "badvalue@example.com") == nil)
        }
    }

    @Test("OnOtpSend on the reset page: called for an address with an account and one without alike, naming no account; a failing or undeclared one ends the sign-up for the app")
    func otpOnPages() async throws {
        try await Self.run { h, driver, port, received in
        _ = try await h.addUser("known@example.com")
        try await E.configure(h, port: port, FlowExtensions(onOtpSend: "otp"), flow: "B2C_1_reset")
        for email in ["known@example.com", "unknown@example.com"] {
            let page = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_reset"), harness: h)
            let sent = try await driver.submit(page, [("step", "send"), ("email", email)])
            #expect(sent.status == .ok && sent.text.contains("Verification code has been sent"), "\(sent.status)")
        }
        let calls = await received.all()
        #expect(calls.map(\.path) == ["otp", "otp"])
        for call in calls {
            let data = try #require(call.body["data"] as? [String: Any])
            #expect((data["authenticationContext"] as? [String: Any])?["user"] == nil)
            #expect(((data["authenticationContext"] as? [String: Any])?["requestType"] as? String) == "passwordReset")
        }
        #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)

        for binding in ["broken", "nosuch"] {
            try await E.configure(h, port: port, FlowExtensions(onOtpSend: binding), flow: "B2C_1_sign_up")
            let page = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_sign_up"), harness: h)
            let failed = try await driver.submit(page, [("step", "send"), ("email", "otp-\(binding)@example.com")])
            #expect(failed.redirectParameters["error"] == "server_error" && b2cCode(redirect: failed) == "AADB2C90075", "\(binding): \(failed.status)")
        }
        #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("the password grant asks the claims provider too: its claims in the tokens, its failure the grant's")
    func passwordGrant() async throws {
        try await Self.run { h, driver, port, received in
        _ = try await h.addUser("ropc@example.com")
        try await E.configure(h, port: port, FlowExtensions(onTokenIssuanceStart: "claims"), flow: "B2C_1_ROPC")
        let granted = try await driver.ropc(h, username: "ropc@example.com", password: Self.password)
        #expect(DecodedJWT(try #require(granted.json["id_token"] as? String, "\(granted.text)")).claims["loyaltyTier"] as? String == "gold")
        try await E.configure(h, port: port, FlowExtensions(onTokenIssuanceStart: "brokenclaims"), flow: "B2C_1_ROPC")
        let refused = try await driver.ropc(h, username: "ropc@example.com", password: Self.password)
        #expect(refused.json["error"] as? String == "server_error" && b2cCode(refused) == "AADB2C90075", "\(refused.text)")
        #expect(refused.json["access_token"] == nil && !refused.text.contains("HTTP 500"), "the reason stays in the log")
        }
    }

    @Test("an extension declares at most 50 claims, as many as a token takes")
    func declaredClaimsBound() throws {
        var ext = AuthenticationExtension(
            name: "many", event: .onTokenIssuanceStart, url: "https://api.example/claims", resourceId: "api://claims",
            claims: (0...ExtraClaims.maximumCount).map { "claim\($0)" })
        #expect(ext.problems().contains { $0.contains("at most 50 claims") })
        ext.claims = Array(ext.claims!.prefix(ExtraClaims.maximumCount))
        #expect(ext.problems().isEmpty)
    }

    @Test("a sign-in for Microsoft Graph does not ask the claims provider, on the pages, at their code's refresh or by the password grant")
    func graphSignInsAskNothing() async throws {
        try await Self.run { h, driver, port, received in
            _ = try await h.addUser("graph@example.com")
            for flow in ["B2C_1_susi", "B2C_1_ROPC"] {
                try await E.configure(h, port: port, FlowExtensions(onTokenIssuanceStart: "claims"), flow: flow)
            }
            let attempt = AuthorizationAttempt(harness: h, scope: "openid offline_access User.Read")
            let signedIn = try await driver.signIn(h, attempt: attempt, email: "graph@example.com")
            let code = try #require(signedIn.redirectParameters["code"], "\(signedIn.status)")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            let access = DecodedJWT(try #require(tokens.json["access_token"] as? String, "\(tokens.text)")).claims
            #expect(access["aud"] as? String == APIPermission.graphResource && access["loyaltyTier"] == nil)
            let refreshed = try await driver.refresh(h, token: try #require(tokens.json["refresh_token"] as? String), policy: "B2C_1_susi")
            #expect(refreshed.status == .ok && refreshed.json["access_token"] != nil, "\(refreshed.text)")
            let ropc = try await driver.ropc(h, username: "graph@example.com", password: Self.password, scope: "openid User.Read")
            #expect(ropc.status == .ok, "\(ropc.text)")
            #expect(await received.all().isEmpty)
        }
    }
}
