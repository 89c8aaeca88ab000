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
@testable import TrustFramework

@testable import IdentityServer
@testable import UserJourneys

/// A custom policy's REST technical profile (`RestfulProvider`) as a validation profile of the
/// sign-up page, against a live endpoint on loopback: its claims sent as JSON with a bearer token
/// from a policy key set, its answer in the token, its `userMessage` on the page, its failure as
/// AADB2C90075.
@Suite("Custom policies: REST technical profiles")
struct CustomPolicyRestTests {
    actor Calls {
        var bodies: [(path: String, authorization: String?, body: String)] = []
        func add(_ path: String, _ authorization: String?, _ body: String) { bodies.append((path, authorization, body)) }
        func all() -> [(path: String, authorization: String?, body: String)] { bodies }
    }

    static func endpoint(_ calls: Calls) -> some ApplicationProtocol {
        let router = Router()
        // `SendClaimsIn` `Url` and `Header` (GET): the raw target and the claim headers are recorded.
        router.get("users/{email}/profile") { request, _ -> Response in
            await calls.add("url", request.headers[.authorization], request.head.path ?? "")
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"loyaltyNumber":"U-7"}"#)))
        }
        router.get("headers") { request, _ -> Response in
            let sent = ["email", "name"].map { "\($0)=\(request.headers[HTTPField.Name($0)!] ?? "")" }.joined(separator: ";")
            await calls.add("header", request.headers[.authorization], sent + ";evil=\(request.headers[HTTPField.Name("X-Evil")!] ?? "")")
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"loyaltyNumber":"H-9"}"#)))
        }
        router.post("{kind}") { request, context -> Response in
            let kind = context.parameters.get("kind") ?? ""
            let body = try await request.body.collect(upTo: 1 << 16)
            await calls.add(kind, request.headers[.authorization], String(buffer: body))
            func reply(_ status: HTTPResponse.Status, _ text: String) -> Response {
                Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
            }
            switch kind {
            case "ok": return reply(.ok, #"{"loyaltyNumber":"L-42","extra":{"tier":"gold"}}"#)
            case "refuse": return reply(.conflict, #"{"version":"1.0.0","status":409,"userMessage":"Sign-ups from this domain are closed."}"#)
            default: return reply(.internalServerError, #"{"error":"boom"}"#)
            }
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: Logger(label: "rest"))
    }

    /// The local-accounts policies with a REST check before the directory write, to `kind`.
    static func upload(
        _ h: IdentityHarness, port: Int, kind: String, scheme: String = "http", authentication: String = "Bearer",
        key: String = #"<Key Id="BearerAuthenticationToken" StorageReferenceId="B2C_1A_RestToken" />"#, sendClaimsIn: String = "Body",
        host: String? = nil
    ) async throws {
        var files = try PolicyFixtures.localAccounts()
        var base = String(decoding: files[0], as: UTF8.self)
        base = base.replacingOccurrences(
            of: #"<ClaimType Id="greeting">"#,
            with: #"<ClaimType Id="loyaltyNumber"><DisplayName>Loyalty number</DisplayName><DataType>string</DataType></ClaimType><ClaimType Id="greeting">"#)
        base = base.replacingOccurrences(
            of: #"<ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="Directory-Write" /></ValidationTechnicalProfiles>"#,
            with: #"<ValidationTechnicalProfiles><ValidationTechnicalProfile ReferenceId="REST-Check" /><ValidationTechnicalProfile ReferenceId="Directory-Write" /></ValidationTechnicalProfiles>"#)
        base = base.replacingOccurrences(
            of: #"<TechnicalProfile Id="Issuer">"#,
            with: """
                <TechnicalProfile Id="REST-Check">
                  <Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.RestfulProvider, Web.TPEngine, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null" />
                  <Metadata>
                    <Item Key="ServiceUrl">\(scheme)://\(host ?? "127.0.0.1:\(port)")/\(kind)</Item>
                    <Item Key="AuthenticationType">\(authentication)</Item>
                    <Item Key="SendClaimsIn">\(sendClaimsIn)</Item>
                  </Metadata>
                  <CryptographicKeys>\(key)</CryptographicKeys>
                  <InputClaims>
                    <InputClaim ClaimTypeReferenceId="email" />
                    <InputClaim ClaimTypeReferenceId="displayName" PartnerClaimType="name" />
                  </InputClaims>
                  <OutputClaims><OutputClaim ClaimTypeReferenceId="loyaltyNumber" /></OutputClaims>
                </TechnicalProfile>
                <TechnicalProfile Id="Issuer">
                """)
        files[0] = Data(base.utf8)
        files[1] = Data(
            String(decoding: files[1], as: UTF8.self).replacingOccurrences(
                of: #"<OutputClaim ClaimTypeReferenceId="greeting" />"#,
                with: #"<OutputClaim ClaimTypeReferenceId="greeting" /><OutputClaim ClaimTypeReferenceId="loyaltyNumber" />"#).utf8)
        try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id, secrets: ["B2C_1A_RestToken": "rest-token"])
        try await h.server.administration.uploadCustomPolicies(files, tenant: h.tenant)
    }

    static func signUp(_ h: IdentityHarness, _ driver: Driver, email: String) async throws -> (TestResponse, AuthorizationAttempt) {
        let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
        var page = try await driver.start(attempt, harness: h)
        page = try await driver.follow(try await driver.post(page.formAction ?? "", [("csrf_token", page.field("csrf_token") ?? ""), ("action", "signup")]))
        page = try await driver.submit(page, [("action", "send"), ("email", email)])
        page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
        let done = try await driver.submit(
            page, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "Rita")])
        return (done, attempt)
    }

    @Test("the REST answer's claims reach the token; the request carried the claims and the key set's bearer token")
    func continues() async throws {
        let calls = Calls()
        try await Self.endpoint(calls).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: port, kind: "ok")
                let (done, attempt) = try await Self.signUp(h, driver, email: "rita@example.com")
                let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text.prefix(400))")
                let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)).claims
                #expect(claims["loyaltyNumber"] as? String == "L-42")
                let call = try #require(await calls.all().first)
                #expect(call.authorization == "Bearer rest-token")
                let body = try JSONSerialization.jsonObject(with: Data(call.body.utf8)) as? [String: Any]
                #expect(body?["email"] as? String == "rita@example.com" && body?["name"] as? String == "Rita")
            }
        }
    }

    @Test("a 409 with a userMessage shows it on the form and writes nothing; a 500 ends the sign-up with AADB2C90075")
    func refusals() async throws {
        let calls = Calls()
        try await Self.endpoint(calls).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: port, kind: "refuse")
                let (refused, _) = try await Self.signUp(h, driver, email: "sam@example.com")
                #expect(refused.status == .badRequest && refused.text.contains("Sign-ups from this domain are closed."), "\(refused.text.prefix(300))")
                #expect(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "sam@example.com") == nil)
            }
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: port, kind: "boom")
                let (failed, _) = try await Self.signUp(h, driver, email: "tom@example.com")
                #expect(failed.redirectParameters["error"] == "server_error")
                #expect(failed.redirectParameters["error_description"]?.hasPrefix("AADB2C90075") == true, "\(failed.redirectParameters)")
                #expect(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "tom@example.com") == nil)
            }
        }
    }

    @Test(
        "SendClaimsIn Url fills the path and query placeholders, each value percent-encoded (a slash, a question mark or a hash stays inside its placeholder); Header sends each claim as a header, and a value with a line break is refused, not injected"
    )
    func urlAndHeader() async throws {
        let calls = Calls()
        try await Self.endpoint(calls).test(.live) { endpoint in
            let port = try #require(endpoint.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: port, kind: "users/{email}/profile?name={name}&amp;fixed=1", sendClaimsIn: "Url")
                let (done, attempt) = try await Self.signUp(h, driver, email: "rita@example.com")
                let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text.prefix(400))")
                let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)).claims
                #expect(claims["loyaltyNumber"] as? String == "U-7")
                let call = try #require(await calls.all().last)
                #expect(call.path == "url" && call.body == "/users/rita%40example.com/profile?name=Rita&fixed=1", "\(call)")
                #expect(call.authorization == "Bearer rest-token")
            }
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: port, kind: "users/{name}/profile", sendClaimsIn: "Url")
                let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
                var page = try await driver.start(attempt, harness: h)
                page = try await driver.follow(try await driver.post(page.formAction ?? "", [("csrf_token", page.field("csrf_token") ?? ""), ("action", "signup")]))
                page = try await driver.submit(page, [("action", "send"), ("email", "una@example.com")])
                page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
                _ = try await driver.submit(
                    page, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "../../admin?x=1#y")])
                let call = try #require(await calls.all().last)
                #expect(call.body == "/users/..%2F..%2Fadmin%3Fx%3D1%23y/profile", "a value cannot leave its placeholder: \(call)")
            }
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: port, kind: "headers", sendClaimsIn: "Header")
                let (done, _) = try await Self.signUp(h, driver, email: "hal@example.com")
                #expect(done.redirectParameters["code"] != nil, "\(done.status) \(done.text.prefix(400))")
                let call = try #require(await calls.all().last)
                #expect(call.path == "header" && call.body == "email=hal@example.com;name=Rita;evil=", "\(call)")
            }
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.upload(h, port: port, kind: "headers", sendClaimsIn: "Header")
                let before = await calls.all().count
                let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
                var page = try await driver.start(attempt, harness: h)
                page = try await driver.follow(try await driver.post(page.formAction ?? "", [("csrf_token", page.field("csrf_token") ?? ""), ("action", "signup")]))
                page = try await driver.submit(page, [("action", "send"), ("email", "ivy@example.com")])
                page = try await driver.submit(page, [("action", "verify"), ("email_ver_input", try await h.latestCode())])
                let injected = try await driver.submit(
                    page, [("action", "continue"), ("newPassword", "Passw0rd!"), ("reenterPassword", "Passw0rd!"), ("displayName", "Ivy\r\nX-Evil: 1")])
                let description = injected.redirectParameters["error_description"] ?? ""
                #expect(description.hasPrefix("AADB2C90075") && description.contains("InvalidRequest"), "refused before sending: \(description)")
                #expect(await calls.all().count == before, "nothing was sent")
                #expect(try await h.server.users.user(tenantID: h.tenant.id, provider: .local, signInName: "ivy@example.com") == nil)
            }
        }
    }

    @Test("a Url ServiceUrl's placeholders: none may sit before the path; each value fills its own, percent-encoded; an indexed JSON path reads an array item")
    func urlPlaceholdersAndPaths() throws {
        #expect(RestfulURL.placeholderBeforePath("https://{tenant}.example.com/a"))
        #expect(RestfulURL.placeholderBeforePath("https://api.example.com:{port}/a"))
        #expect(RestfulURL.placeholderBeforePath("https://user{x}@api.example.com/a"))
        #expect(!RestfulURL.placeholderBeforePath("https://api.example.com/{a}/{b}?{c}={d}"))
        #expect(
            RestfulURL.filled("https://api.example.com/{A}/x?{b}={c}", values: ["a": "one/two", "B": "k", "c": "v&w=1"])
                == "https://api.example.com/one%2Ftwo/x?k=v%26w%3D1")
        #expect(RestfulURL.filled("https://api.example.com/{missing}/x", values: [:]) == "https://api.example.com//x")
        #expect(RestfulURL.template("https://api.example.com/{a}") == "https://api.example.com/x")
        #expect(RestfulURL.filled("https://api.example.com/u/{a}/p", values: ["a": ".."]) == "https://api.example.com/u/%2E%2E/p", "a dot segment is a name")
        #expect(ProtocolFailure.policyError(code: "UserBlocked", message: "x").signInLogNumber == ProtocolFailure.policyErrorLogNumber)
        #expect(ProtocolFailure.policyError(code: "123456", message: "x").signInLogNumber == ProtocolFailure.policyErrorLogNumber)
        #expect(ProtocolFailure.userCancelled.signInLogNumber == 90091)
        let object = try JSONDecoder().decode(
            [String: JSONValue].self, from: Data(#"{"elements":[{"handle~":{"emailAddress":"li@example.com"}}]}"#.utf8))
        #expect(PolicyRestfulProvider.value(at: "elements[0].handle~.emailAddress", in: object) == .string("li@example.com"))
        #expect(PolicyRestfulProvider.value(at: "elements[1].handle~.emailAddress", in: object) == nil)
    }

    @Test("SendClaimsIn Url with a claim in the host, or Header with a claim named as a reserved header, is refused at upload by name")
    func urlAndHeaderAtUpload() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            do {
                try await Self.upload(h, port: 1, kind: "x", sendClaimsIn: "Url", host: "{email}.127.0.0.1:1")
                Issue.record("a claim in the host uploaded")
            } catch let rejection as PolicyRejection {
                #expect(rejection.description.contains("a claim in the host of its ServiceUrl"), "\(rejection.description)")
            }
            var files = try PolicyFixtures.localAccounts()
            let hosted = String(decoding: files[0], as: UTF8.self).replacingOccurrences(
                of: #"<TechnicalProfile Id="Issuer">"#,
                with: #"<TechnicalProfile Id="REST-Host"><Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.RestfulProvider, Web.TPEngine" /><Metadata><Item Key="ServiceUrl">http://127.0.0.1:1/x</Item><Item Key="AuthenticationType">None</Item><Item Key="SendClaimsIn">Header</Item></Metadata><InputClaims><InputClaim ClaimTypeReferenceId="email" PartnerClaimType="Host" /></InputClaims></TechnicalProfile><TechnicalProfile Id="Issuer">"#)
            files[0] = Data(hosted.utf8)
            do {
                try await h.server.administration.uploadCustomPolicies(files, tenant: h.tenant)
                Issue.record("a claim sent as the Host header uploaded")
            } catch let rejection as PolicyRejection {
                #expect(rejection.description.contains("in a header named 'host'"), "\(rejection.description)")
            }
        }
    }

    @Test("a ServiceUrl that is not https or loopback http is refused at upload")
    func serviceURL() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            do {
                try await Self.upload(h, port: 1, kind: "ok")
            } catch {
                Issue.record("loopback http is allowed: \(error)")
            }
            let files = try PolicyFixtures.localAccounts()
            let remote = String(decoding: files[0], as: UTF8.self).replacingOccurrences(
                of: #"<TechnicalProfile Id="Issuer">"#,
                with: #"<TechnicalProfile Id="REST-Remote"><Protocol Name="Proprietary" Handler="Web.TPEngine.Providers.RestfulProvider, Web.TPEngine" /><Metadata><Item Key="ServiceUrl">http://api.example.com/check</Item></Metadata></TechnicalProfile><TechnicalProfile Id="Issuer">"#)
            await #expect(throws: PolicyRejection.self) {
                try await h.server.administration.uploadCustomPolicies([Data(remote.utf8)], tenant: h.tenant)
            }
        }
    }
}
