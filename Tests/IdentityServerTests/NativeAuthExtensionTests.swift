import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Logging
import Storage
import TestSupport
import Testing
import Yams

@testable import IdentityServer
@testable import UserJourneys

/// External ID's custom authentication extensions (SPEC §2.15) on a real loopback endpoint:
/// Microsoft's request envelope with a bearer token from the tenant's Entra issuer for the
/// extension's resource, as Entra's authentication events app; each event's actions do what
/// External ID does with them; a failing or blocking extension creates nothing.
@Suite("Custom authentication extensions")
struct NativeAuthExtensionTests {
    typealias Received = APIConnectorTests.Received
    typealias S = NativeAuthSignUpTests

    static func endpoint(_ received: Received) -> Application<RouterResponder<BasicRequestContext>> {
        let router = Router()
        router.post("{kind}") { request, context -> Response in
            let kind = context.parameters.get("kind") ?? ""
            let body = try await request.body.collect(upTo: 1 << 16)
            await received.add(kind, request.headers[.authorization], String(buffer: body))
            func answer(_ dataType: String, _ action: String) -> Response {
                let text = #"{"data":{"@odata.type":"microsoft.graph.\#(dataType)","actions":[{"@odata.type":"microsoft.graph.\#(action)}]}}"#
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
            }
            switch kind {
            case "prefill":
                return answer("onAttributeCollectionStartResponseData", #"attributeCollectionStart.setPrefillValues","inputs":{"displayName":"Prefilled","city":"Oslo"}"#)
            case "startblock":
                return answer("onAttributeCollectionStartResponseData", #"attributeCollectionStart.showBlockPage","message":"Sign-ups are closed.""#)
            case "modify":
                return answer("onAttributeCollectionSubmitResponseData", #"attributeCollectionSubmit.modifyAttributeValues","attributes":{"displayName":"Modified"}"#)
            case "invalid":
                return answer(
                    "onAttributeCollectionSubmitResponseData",
                    #"attributeCollectionSubmit.showValidationError","message":"Not that city.","attributeErrors":{"city":"Pick another"}"#)
            case "claims":
                return answer(
                    "onTokenIssuanceStartResponseData",
                    #"tokenIssuanceStart.provideClaimsForToken","claims":{"loyaltyTier":"gold","tags":["a","b"],"oid":"forged","OID":"forged","xms_cc":"x","other":"x"}"#)
            case "otp": return answer("OnOtpSendResponseData", #"OtpSend.continueWithDefaultBehavior""#)
            case "blockbyaddress":
                // Blocks the sign-up of one address only.
                guard String(buffer: body).contains("blocked@example.com") else {
                    return answer("onAttributeCollectionStartResponseData", #"attributeCollectionStart.continueWithDefaultBehavior""#)
                }
                return answer("onAttributeCollectionStartResponseData", #"attributeCollectionStart.showBlockPage","message":"Not this address.""#)
            case "submitblock":
                return answer("onAttributeCollectionSubmitResponseData", #"attributeCollectionSubmit.showBlockPage","message":"Sign-up refused.""#)
            case "badmodify":
                return answer("onAttributeCollectionSubmitResponseData", #"attributeCollectionSubmit.modifyAttributeValues","attributes":{"displayName":""}"#)
            case "clearcity":
                return answer("onAttributeCollectionSubmitResponseData", #"attributeCollectionSubmit.modifyAttributeValues","attributes":{"city":""}"#)
            case "wrongevent": return answer("onTokenIssuanceStartResponseData", #"tokenIssuanceStart.provideClaimsForToken","claims":{}"#)
            default: return Response(status: .internalServerError)
            }
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: Logger(label: "extension"))
    }

    /// The dev tenant's extensions on `port`, and `flow` binding `bindings`.
    static func configure(_ h: IdentityHarness, port: Int, _ bindings: FlowExtensions, flow name: String = "B2C_1_susi") async throws {
        var tenant = h.tenant
        func ext(_ name: String, _ event: AuthenticationExtension.Event, claims: [String]? = nil) -> AuthenticationExtension {
            // The longest wait allowed: a loaded test machine is not a failing extension.
            AuthenticationExtension(
                name: name, event: event, url: "http://127.0.0.1:\(port)/\(name)", resourceId: "api://extensions.example/\(name)", claims: claims,
                timeoutSeconds: 10)
        }
        tenant.authenticationExtensions = [
            ext("prefill", .onAttributeCollectionStart), ext("startblock", .onAttributeCollectionStart),
            ext("modify", .onAttributeCollectionSubmit), ext("invalid", .onAttributeCollectionSubmit), ext("wrongevent", .onAttributeCollectionSubmit),
            ext("claims", .onTokenIssuanceStart, claims: ["loyaltyTier", "tags", "oid", "OID", "xms_cc"]), ext("otp", .onOtpSend),
            ext("broken", .onOtpSend), ext("brokenclaims", .onTokenIssuanceStart, claims: ["loyaltyTier"]),
            ext("brokensubmit", .onAttributeCollectionSubmit), ext("blockbyaddress", .onAttributeCollectionStart),
            ext("submitblock", .onAttributeCollectionSubmit), ext("badmodify", .onAttributeCollectionSubmit), ext("clearcity", .onAttributeCollectionSubmit),
        ]
        try await h.server.tenants.save(tenant, now: Date())
        var flow = try #require(try await h.server.tenants.userFlow(tenantID: tenant.id, name: name))
        flow.signUpAttributes = [.displayName, .builtIn(.city)]
        flow.extensions = bindings
        try await h.server.tenants.save(flow)
    }

    static func start(_ h: IdentityHarness, _ driver: Driver, _ email: String) async throws -> TestResponse {
        try await S.call(
            h, driver, "signup/v1.0/start",
            [("username", email), ("challenge_type", "oob password redirect"), ("password", "Str0ng-Pass!"), ("attributes", #"{"displayName":"Typed"}"#)])
    }

    @Test("a sign-up through four extensions: the code goes to OnOtpSend, not the outbox; prefill and modify set the details; the claims provider's declared claims reach the tokens, a protected one never")
    func fullSignUp() async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.configure(
                    h, port: port,
                    FlowExtensions(onTokenIssuanceStart: "claims", onAttributeCollectionStart: "prefill", onAttributeCollectionSubmit: "modify", onOtpSend: "otp"))
                let started = try await Self.start(h, driver, "ext@example.com")
                let challenged = try await S.call(h, driver, "signup/v1.0/challenge", [("continuation_token", try S.continuation(started))])
                #expect(challenged.json["challenge_type"] as? String == "oob", "\(challenged.text)")
                #expect(try await h.server.outbox(tenantID: h.tenant.id).isEmpty, "the extension sends the code")
                let otp = try #require(await received.all().first { $0.path == "otp" })
                let otpData = try #require(otp.body["data"] as? [String: Any])
                #expect(otp.body["type"] as? String == "microsoft.graph.authenticationEvent.emailOtpSend")
                #expect(otp.body["source"] as? String == "/tenants/\(h.tenant.guid)/applications/\(h.clientID)")
                #expect(otpData["@odata.type"] as? String == "microsoft.graph.onOtpSendCalloutData")
                let otpContext = try #require(otpData["otpContext"] as? [String: Any])
                #expect(otpContext["identifier"] as? String == "ext@example.com")
                let code = try #require(otpContext["oneTimeCode"] as? String)
                // The caller's token: Entra's authentication events app, for the extension's resource.
                let bearer = try #require(otp.authorization?.split(separator: " ").last.map(String.init))
                let tokenClaims = DecodedJWT(bearer).claims
                #expect(tokenClaims["aud"] as? String == "api://extensions.example/otp")
                #expect(tokenClaims["azp"] as? String == AuthenticationExtension.callerAppID || tokenClaims["appid"] as? String == AuthenticationExtension.callerAppID)
                #expect(tokenClaims["iss"] as? String == "\(IdentityHarness.origin)/\(h.tenant.guid)/v2.0")
                #expect((tokenClaims["exp"] as? Int ?? 0) - (tokenClaims["iat"] as? Int ?? 0) <= 300)

                let done = try await S.call(
                    h, driver, "signup/v1.0/continue", [("continuation_token", try S.continuation(challenged)), ("grant_type", "oob"), ("oob", code)])
                let user = try #require(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "ext@example.com"), "\(done.text)")
                #expect(user.displayName == "Modified" && user.attributes["city"] == "Oslo")
                let start = try #require(await received.all().first { $0.path == "prefill" })
                let info = try #require((start.body["data"] as? [String: Any])?["userSignUpInfo"] as? [String: Any])
                #expect(((info["identities"] as? [[String: Any]])?.first?["issuerAssignedId"] as? String) == "ext@example.com")
                let submit = try #require(await received.all().first { $0.path == "modify" })
                let submitted = (submit.body["data"] as? [String: Any])?["userSignUpInfo"] as? [String: Any]
                #expect(((submitted?["attributes"] as? [String: Any])?["city"] as? [String: Any])?["value"] as? String == "Oslo")

                let tokens = try await S.signIn(h, driver, try S.continuation(done), username: "ext@example.com")
                let claims = DecodedJWT(try #require(tokens.json["id_token"] as? String, "\(tokens.text)")).claims
                #expect(claims["loyaltyTier"] as? String == "gold" && claims["tags"] as? [String] == ["a", "b"])
                #expect(claims["oid"] as? String == user.objectID && claims["other"] == nil && claims["OID"] == nil && claims["xms_cc"] == nil)
                // The OTP event says where it comes from.
                #expect(((otpData["authenticationContext"] as? [String: Any])?["requestType"] as? String) == "signUp")
                // None go into a token for Microsoft Graph.
                let initiated = try await S.call(h, driver, "oauth2/v2.0/initiate", [("username", "ext@example.com"), ("challenge_type", "password redirect")])
                let challenged2 = try await S.call(
                    h, driver, "oauth2/v2.0/challenge", [("continuation_token", try S.continuation(initiated)), ("challenge_type", "password redirect")])
                let graph = try await S.call(
                    h, driver, "oauth2/v2.0/token",
                    [("continuation_token", try S.continuation(challenged2)), ("grant_type", "password"), ("password", "Str0ng-Pass!"),
                     ("scope", "openid https://graph.microsoft.com/User.Read")])
                let graphToken = DecodedJWT(try #require(graph.json["access_token"] as? String, "\(graph.text)")).claims
                #expect(graphToken["aud"] as? String != nil && graphToken["loyaltyTier"] == nil)
                let issuance = try #require(await received.all().first { $0.path == "claims" })
                let context = (issuance.body["data"] as? [String: Any])?["authenticationContext"] as? [String: Any]
                #expect((context?["user"] as? [String: Any])?["id"] as? String == user.objectID)

                // A refresh issues tokens again: the claims provider is asked again.
                let asked = await received.all().filter { $0.path == "claims" }.count
                let refreshed = try await S.call(
                    h, driver, "oauth2/v2.0/token", [("grant_type", "refresh_token"), ("refresh_token", try #require(tokens.json["refresh_token"] as? String))])
                let again = DecodedJWT(try #require(refreshed.json["id_token"] as? String, "\(refreshed.text)")).claims
                #expect(again["loyaltyTier"] as? String == "gold")
                #expect(await received.all().filter { $0.path == "claims" }.count == asked + 1)
            }
        }
    }

    @Test("an OnAttributeCollectionSubmit value given empty clears what the sign-up collected")
    func submitClears() async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.configure(h, port: port, FlowExtensions(onAttributeCollectionSubmit: "clearcity"))
                let started = try await S.call(
                    h, driver, "signup/v1.0/start",
                    [("username", "clear@example.com"), ("challenge_type", "oob password redirect"), ("password", "Str0ng-Pass!"),
                     ("attributes", #"{"displayName":"Clara","city":"Oslo"}"#)])
                let challenged = try await S.call(h, driver, "signup/v1.0/challenge", [("continuation_token", try S.continuation(started))])
                let done = try await S.call(
                    h, driver, "signup/v1.0/continue",
                    [("continuation_token", try S.continuation(challenged)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
                #expect(done.json["continuation_token"] != nil, "\(done.text)")
                let user = try #require(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "clear@example.com"))
                #expect(user.displayName == "Clara" && user.attributes["city"] == nil)
            }
        }
    }

    @Test("refusals: a start that blocks, a submit's validation error, an answer of another event, an OnOtpSend that fails; nothing is made")
    func refusals() async throws {
        let received = Received()
        try await Self.endpoint(received).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                func signUp(_ email: String, _ bindings: FlowExtensions) async throws -> TestResponse {
                    try await Self.configure(h, port: port, bindings)
                    let started = try await Self.start(h, driver, email)
                    let challenged = try await S.call(h, driver, "signup/v1.0/challenge", [("continuation_token", try S.continuation(started))])
                    return try await S.call(
                        h, driver, "signup/v1.0/continue",
                        [("continuation_token", try S.continuation(challenged)), ("grant_type", "oob"), ("oob", try await h.latestCode(digits: 8))])
                }
                let blocked = try await signUp("a@example.com", FlowExtensions(onAttributeCollectionStart: "startblock"))
                #expect(S.error(blocked).0 == "access_denied" && (blocked.json["error_description"] as? String)?.contains("Sign-ups are closed.") == true, "\(blocked.text)")
                #expect(blocked.json["continuation_token"] is String)
                let invalid = try await signUp("b@example.com", FlowExtensions(onAttributeCollectionSubmit: "invalid"))
                #expect(S.error(invalid) == ("invalid_grant", 55_107, "attribute_validation_failed"), "\(invalid.text)")
                #expect((invalid.json["invalid_attributes"] as? [[String: Any]])?.first?["name"] as? String == "city")
                // Refused details sent with the attributes grant: the same token stays usable.
                let again = try #require(invalid.json["continuation_token"] as? String)
                let resent = try await S.call(
                    h, driver, "signup/v1.0/continue", [("continuation_token", again), ("grant_type", "attributes"), ("attributes", #"{"city":"Bergen"}"#)])
                #expect(S.error(resent).2 == "attribute_validation_failed" && resent.json["continuation_token"] as? String == again, "\(resent.text)")
                #expect(S.error(try await S.call(
                    h, driver, "signup/v1.0/continue", [("continuation_token", again), ("grant_type", "attributes"), ("attributes", #"{"city":"Oslo"}"#)])).2
                    == "attribute_validation_failed")
                let wrong = try await signUp("c@example.com", FlowExtensions(onAttributeCollectionSubmit: "wrongevent"))
                #expect(S.error(wrong) == ("server_error", 1_100_001, nil), "\(wrong.text)")
                #expect((wrong.json["error_description"] as? String)?.contains("wrongevent") == false, "the reason stays in the log")
                // A binding to an extension the tenant does not declare fails closed.
                let dangling = try await signUp("e@example.com", FlowExtensions(onAttributeCollectionSubmit: "nonexistent"))
                #expect(S.error(dangling) == ("server_error", 1_100_001, nil), "\(dangling.text)")
                #expect(try await S.users(h) == 0)
                // A claims provider that fails: the sign-in's proof is not spent, the same step may try again.
                try await Self.configure(h, port: port, FlowExtensions(onTokenIssuanceStart: "brokenclaims"))
                _ = try await h.addUser("f@example.com", password: "Passw0rd!", name: "F")
                let initiated = try await S.call(h, driver, "oauth2/v2.0/initiate", [("username", "f@example.com"), ("challenge_type", "password redirect")])
                let passwordStep = try await S.call(
                    h, driver, "oauth2/v2.0/challenge", [("continuation_token", try S.continuation(initiated)), ("challenge_type", "password redirect")])
                let fields = [
                    ("continuation_token", try S.continuation(passwordStep)), ("grant_type", "password"), ("password", "Passw0rd!"), ("scope", "openid"),
                ]
                #expect(S.error(try await S.call(h, driver, "oauth2/v2.0/token", fields)) == ("server_error", 1_100_001, nil))
                #expect(S.error(try await S.call(h, driver, "oauth2/v2.0/token", fields)) == ("server_error", 1_100_001, nil), "not 55200: the step was not spent")
                try await Self.configure(h, port: port, FlowExtensions(onOtpSend: "broken"))
                let started = try await Self.start(h, driver, "d@example.com")
                let failed = try await S.call(h, driver, "signup/v1.0/challenge", [("continuation_token", try S.continuation(started))])
                #expect(S.error(failed) == ("server_error", 1_100_001, nil), "\(failed.text)")
            }
        }
    }

    @Test("the YAML declares extensions and binds them per flow; export writes them back; bad bindings and protected claims are refused")
    func declaration() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            var yaml = try await h.server.administration.exportTenant(tenantID: h.tenant.id, withUsers: false)
            var declaration = try YAMLDecoder().decode(TenantDeclaration.self, from: yaml)
            declaration.authenticationExtensions = [
                AuthenticationExtension(
                    name: "claims", event: .onTokenIssuanceStart, url: "https://claims.example/api", resourceId: "api://claims", claims: ["tier"])
            ]
            let index = try #require(declaration.userFlows.firstIndex { $0.name == "B2C_1_susi" })
            declaration.userFlows[index].authenticationExtensions = FlowExtensions(onTokenIssuanceStart: "claims")
            declaration.userFlows[index].emailSignIn = .oneTimePasscode
            _ = try await declaration.apply(to: h.server.administration, baseDirectory: URL(fileURLWithPath: "/tmp"))
            let flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_susi"))
            #expect(flow.extensions.onTokenIssuanceStart == "claims" && flow.emailSignIn == .oneTimePasscode)
            yaml = try await h.server.administration.exportTenant(tenantID: h.tenant.id, withUsers: false)
            #expect(yaml.contains("OnTokenIssuanceStart") && yaml.contains("onTokenIssuanceStart: claims") && yaml.contains("emailSignIn: oneTimePasscode"), "\(yaml)")
            let (_, changes) = try await YAMLDecoder().decode(TenantDeclaration.self, from: yaml).applyReporting(
                to: h.server.administration, baseDirectory: URL(fileURLWithPath: "/tmp"))
            #expect(changes.isEmpty, "\(changes)")

            var bad = declaration
            bad.userFlows[index].authenticationExtensions = FlowExtensions(onOtpSend: "claims")
            #expect(bad.extensionProblems().contains { $0.contains("not OnOtpSend") })
            bad.userFlows[index].authenticationExtensions = FlowExtensions(onOtpSend: "missing")
            #expect(bad.extensionProblems().contains { $0.contains("is not one of the authenticationExtensions") })
            bad.authenticationExtensions?[0].claims = ["oid"]
            #expect(bad.extensionProblems().contains { $0.contains("'oid' cannot be provided") })
            bad.authenticationExtensions?[0].claims = ["Sub", "xms_pl"]
            #expect(bad.extensionProblems().filter { $0.contains("cannot be provided") }.count == 2)
            // RFC 9068's access-token names and Entra's restricted set are protected too.
            for name in ["scope", "client_id", "jti", "resource", "appidacr", "azpacr", "acrs", "email_verified", "aio", "pwd_url"] {
                bad.authenticationExtensions?[0].claims = [name.uppercased()]
                #expect(bad.extensionProblems().contains { $0.contains("cannot be provided") }, "\(name)")
            }
            bad.authenticationExtensions?[0].resourceId = "https://graph.microsoft.com"
            #expect(bad.extensionProblems().contains { $0.contains("resourceId must be the extension's own API") })
        }
    }
}
