import AsyncHTTPClient
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import JOSE
import Logging
import NIOCore
import Storage
import TestSupport
import Testing
@testable import UserJourneys
import WireCoding

@testable import IdentityServer

/// Upstream OpenID Connect providers (SPEC §2.11): a sign-in federated with a provider nobody
/// here wrote (`oidc-provider-mock`, which `scripts/test` starts and names in
/// `TODO_OIDC_MOCK_URL`), and the ID tokens this service must refuse (forged, expired, another
/// nonce, another audience), from a provider on loopback that answers what the test asks.
@Suite("Upstream OpenID Connect providers")
struct UpstreamProviderTests {
    static let mock = ProcessInfo.processInfo.environment["TODO_OIDC_MOCK_URL"]

    /// Each provider's own callback (the mix-up defence of RFC 9700 §4.4.2).
    static func callback(_ h: IdentityHarness, provider: String) -> String {
        "\(IdentityHarness.origin)/\(h.tenant.name)/oauth2/authresp/\(provider)"
    }

    /// The dev tenant with `provider` offered by `B2C_1_susi`.
    static func offer(_ h: IdentityHarness, _ provider: UpstreamProvider) async throws {
        var tenant = h.tenant
        var provider = provider
        provider.clientSecret = try provider.clientSecret.map {
            try h.server.service.dataKey.seal($0, context: UpstreamProvider.sealingContext(tenantID: tenant.id, name: provider.name))
        }
        tenant.identityProviders = [provider]
        try await h.server.tenants.save(tenant, now: Date())
        var flow = try #require(try await h.server.tenants.userFlow(tenantID: tenant.id, name: "B2C_1_susi"))
        flow.identityProviders.append(provider.kind)
        try await h.server.tenants.save(flow)
    }

    /// One request with redirects not followed (the mock's answers redirect to this service).
    static func send(_ method: String, _ url: String, json: String? = nil, form: String? = nil) async throws -> (
        status: Int, location: String?, body: Data
    ) {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        do {
            var request = HTTPClientRequest(url: url)
            request.method = .init(rawValue: method)
            if let json {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: json))
            }
            if let form {
                request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                request.body = .bytes(ByteBuffer(string: form))
            }
            let response = try await client.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 20)
            try await client.shutdown()
            return (Int(response.status.code), response.headers.first(name: "location"), Data(buffer: body))
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    @Test(
        "sign in through oidc-provider-mock: button, domain_hint, the provider's claims, idp = its issuer, the same account next time; a client registered for client_secret_post (B2C's default) or client_secret_basic (declared)",
        arguments: [UpstreamProvider.TokenEndpointAuthMethod.clientSecretPost, .clientSecretBasic])
    func mockProvider(method: UpstreamProvider.TokenEndpointAuthMethod) async throws {
        if ProcessInfo.processInfo.environment["TODO_REQUIRE_OIDC_MOCK"] == "1" { #expect(Self.mock != nil) }
        guard let mock = Self.mock else { return }
        try await IdentityHarness.run(.sqlite) { h, driver in
            let registration = try await Self.send(
                "POST", "\(mock)/oauth2/clients",
                json: #"{"redirect_uris":["\#(Self.callback(h, provider: "mockidp"))"],"token_endpoint_auth_method":"\#(method.rawValue)"}"#
            )
            let client = try JSONDecoder().decode([String: JSONValue].self, from: registration.body)
            let clientID = try #require(client["client_id"]?.stringValue)
            let subject = "upstream-\(UUID().uuidString.prefix(8).lowercased())"
            _ = try await Self.send(
                "PUT", "\(mock)/users/\(subject)",
                json:
                    #"{"email":"uma@example.com","email_verified":true,"name":"Uma Upstream","given_name":"Uma","family_name":"Upstream"}"#)
            try await Self.offer(
                h,
                UpstreamProvider(
                    name: "mockidp", displayName: "Mock IdP", metadataUrl: "\(mock)/.well-known/openid-configuration", clientId: clientID,
                    clientSecret: client["client_secret"]?.stringValue,
                    // client_secret_post is the default: declared only for the other.
                    tokenEndpointAuthMethod: method == .clientSecretPost ? nil : method))

            var oid: String?
            for round in 0..<2 {
                var attempt = AuthorizationAttempt(harness: h)
                let toProvider: TestResponse
                if round == 0 {
                    let page = try await driver.start(attempt, harness: h)
                    #expect(page.text.contains("id=\"mockidpExchange\"") && page.text.contains("Mock IdP"))
                    toProvider = try await driver.get(try #require(page.link(id: "mockidpExchange")))
                } else {
                    attempt.extra = [("domain_hint", "mockidp"), ("prompt", "login")]
                    toProvider = try await driver.start(attempt, harness: h)
                }
                let authorize = try #require(toProvider.location, "\(toProvider.status) \(toProvider.text.prefix(300))")
                #expect(authorize.hasPrefix("\(mock)/oauth2/authorize?"))
                let query = URLComponents(string: authorize)?.queryItems ?? []
                #expect(query.first { $0.name == "code_challenge_method" }?.value == "S256")
                #expect(query.first { $0.name == "nonce" }?.value?.isEmpty == false)
                // The mock's page: pick the user, as a person would.
                let answer = try await Self.send("POST", authorize, form: "sub=\(subject)")
                let back = try #require(answer.location, "the mock answered \(answer.status)")
                #expect(back.hasPrefix(Self.callback(h, provider: "mockidp") + "?"))
                var done = try await driver.follow(try await driver.get(back))
                if round == 0 {
                    // A first sign-in in a sign-up flow: the attribute page, prefilled from the provider.
                    #expect(done.text.contains("value=\"uma@example.com\" autocomplete=\"email\" readonly"))
                    #expect(done.field("displayName") == "Uma Upstream" && done.field("givenName") == "Uma")
                    done = try await driver.submit(
                        done, [("displayName", "Uma U."), ("givenName", "Uma"), ("surname", done.field("surname") ?? "")])
                }
                let code = try #require(
                    done.redirectParameters["code"], "\(done.status) \(done.location ?? done.text.prefix(300).description)")
                let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String))
                    .claims
                #expect(claims["idp"] as? String == mock)
                #expect(claims["name"] as? String == "Uma U.")
                #expect(claims["given_name"] as? String == "Uma")
                #expect(claims["newUser"] as? Bool == (round == 0 ? true : nil))
                if round == 0 { oid = claims["oid"] as? String } else { #expect(claims["oid"] as? String == oid) }
            }
            let account = try #require(
                try await h.server.users.user(tenantID: h.tenant.id, provider: .upstream(issuer: mock), signInName: subject))
            #expect(account.email == "uma@example.com" && account.emailVerified)
        }
    }

    @Test(
        "an ID token that is forged, expired, for another nonce or another audience ends the sign-in with AADB2C90273; a good one signs in")
    func refusedTokens() async throws {
        let script = Script()
        let box = PortBox()
        try await Self.provider(script, port: { box.value }).test(.live) { idp in
            box.value = try #require(idp.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.offer(
                    h,
                    UpstreamProvider(
                        name: "local", displayName: "Local IdP",
                        metadataUrl: "http://127.0.0.1:\(box.value)/.well-known/openid-configuration", clientId: "local-client"))
                var tenant = try #require(try await h.server.tenants.tenant(matching: h.tenant.guid))
                tenant.apiConnectors = [APIConnector(name: "prefill", url: "http://127.0.0.1:\(box.value)/connector", timeoutSeconds: 2)]
                try await h.server.tenants.save(tenant, now: Date())
                var susi = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_susi"))
                susi.connectors = FlowConnectors(afterFederatingIdentityProvider: "prefill")
                try await h.server.tenants.save(susi)
                for flavour in ["forged", "nokid-forged", "expired", "nonce", "audience", "good", "nokid"] {
                    driver.cookies = [:]
                    var attempt = AuthorizationAttempt(harness: h)
                    attempt.extra = [("domain_hint", "127.0.0.1")]
                    let toProvider = try await driver.start(attempt, harness: h)
                    let authorize = try #require(toProvider.location.flatMap(URLComponents.init(string:)), "\(toProvider.text.prefix(300))")
                    let items = authorize.queryItems ?? []
                    let state = try #require(items.first { $0.name == "state" }?.value)
                    await script.set(flavour, nonce: try #require(items.first { $0.name == "nonce" }?.value))
                    let back = try await driver.follow(
                        try await driver.get(
                            "/\(h.tenant.name)/oauth2/authresp/local?" + Form.encode([("code", "c-\(flavour)"), ("state", state)])))
                    if flavour == "good" {
                        // The attribute page, prefilled by the connector; the account only after it.
                        #expect(back.field("givenName") == "Prefilled", "\(back.status) \(back.text.prefix(300))")
                        #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
                        let done = try await driver.submit(back, [("displayName", "Local Person"), ("givenName", "Prefilled")])
                        #expect(done.redirectParameters["code"] != nil, "\(done.status) \(done.location ?? "")")
                    } else if flavour == "nokid" {
                        // The same account again, from a token without `kid`: any signing key of the provider verifies it.
                        #expect(back.redirectParameters["code"] != nil, "\(back.status) \(back.location ?? back.text.prefix(300).description)")
                    } else {
                        #expect(
                            b2cCode(redirect: back) == "AADB2C90273",
                            "\(flavour): \(back.status) \(back.location ?? back.text.prefix(200).description)")
                        // The state was used: replaying the callback finds no sign-in.
                        let replay = try await driver.get(
                            "/\(h.tenant.name)/oauth2/authresp/local?" + Form.encode([("code", "again"), ("state", state)]))
                        #expect(replay.redirectParameters["code"] == nil)
                    }
                }
                #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
            }
        }
    }

    @Test("the attribute page cannot be posted past the after-federating connector: before it answers, or after it blocked")
    func connectorCannotBeSkipped() async throws {
        let script = Script()
        let box = PortBox()
        try await Self.provider(script, port: { box.value }).test(.live) { idp in
            box.value = try #require(idp.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await Self.offer(
                    h,
                    UpstreamProvider(
                        name: "local", metadataUrl: "http://127.0.0.1:\(box.value)/.well-known/openid-configuration",
                        clientId: "local-client"))
                var tenant = try #require(try await h.server.tenants.tenant(matching: h.tenant.guid))
                tenant.apiConnectors = [
                    APIConnector(name: "block", url: "http://127.0.0.1:\(box.value)/blockconnector", timeoutSeconds: 2)
                ]
                try await h.server.tenants.save(tenant, now: Date())
                var susi = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_susi"))
                susi.connectors = FlowConnectors(afterFederatingIdentityProvider: "block")
                try await h.server.tenants.save(susi)

                var attempt = AuthorizationAttempt(harness: h)
                attempt.extra = [("domain_hint", "local")]
                let toProvider = try await driver.start(attempt, harness: h)
                let items = try #require(toProvider.location.flatMap(URLComponents.init(string:))?.queryItems)
                await script.set("good", nonce: try #require(items.first { $0.name == "nonce" }?.value))
                let state = try #require(items.first { $0.name == "state" }?.value)
                // The callback's answer, not followed: straight to a POST of the attribute form.
                let toPage = try await driver.get(
                    "/\(h.tenant.name)/oauth2/authresp/local?" + Form.encode([("code", "c"), ("state", state)]))
                let pageURL = try #require(toPage.location)
                let csrf = try #require(driver.cookies[TransactionCookies.csrf])
                let skipped = try await driver.post(pageURL, [("csrf_token", csrf), ("displayName", "Skipper")])
                #expect(skipped.redirectParameters["code"] == nil)
                #expect(skipped.text.contains("No sign-ups from this provider."))
                #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
                // Blocked: the form is gone for good.
                let again = try await driver.post(pageURL, [("csrf_token", csrf), ("displayName", "Skipper")])
                #expect(again.status == .forbidden && again.redirectParameters["code"] == nil)
                #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
            }
        }
    }

    @Test("outbound URLs: https anywhere, http on loopback only, no credentials; one issuer per provider")
    func outboundRule() throws {
        #expect(OutboundURL.isAllowed("https://idp.example.com/.well-known/openid-configuration"))
        #expect(OutboundURL.isAllowed("http://127.0.0.1:7071/api") && OutboundURL.isAllowed("http://localhost:1/x"))
        #expect(!OutboundURL.isAllowed("http://idp.example.com/x") && !OutboundURL.isAllowed("http://10.0.0.5/x"))
        #expect(!OutboundURL.isAllowed("https://user:pw@idp.example.com/") && !OutboundURL.isAllowed("file:///etc/passwd"))
        #expect(!OutboundURL.isAllowed("http+unix://%2Ftmp%2Fsock/x"))
        // Loopback is numeric or a loopback name: a DNS name that begins 127. is anybody's.
        for url in ["http://127.attacker.example/x", "http://127.0.0.1.attacker.example/", "http://127.0.0.01x/", "http://127..0.1/"] {
            #expect(!OutboundURL.isAllowed(url), "\(url)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbound-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bad = directory.appendingPathComponent("bad.yaml")
        try """
        tenant: { name: contoso.onmicrosoft.com }
        apiConnectors: [{ name: c1, url: http://api.example.com/check, auth: none }]
        identityProviders:
          - { name: one, type: openIdConnect, metadataUrl: https://idp.example.com/.well-known/openid-configuration, clientId: a }
          - { name: two, type: openIdConnect, metadataUrl: https://idp.example.com/.well-known/openid-configuration, clientId: b }
        userFlows: [{ name: B2C_1_in, type: signIn, apiConnectors: { beforeCreatingUser: c1 } }]
        """.write(to: bad, atomically: true, encoding: .utf8)
        do {
            _ = try TenantDeclaration.load(path: bad.path)
            Issue.record("accepted")
        } catch let error as TenantDeclaration.DeclarationError {
            #expect(error.description.contains("API connector 'c1': url must be https (or http on loopback)"))
            #expect(error.description.contains("identity providers must have different issuers"))
            #expect(error.description.contains("B2C_1_in: afterFederatingIdentityProvider and beforeCreatingUser are sign-up steps"))
        }
    }

    @Test("a remote provider's metadata cannot point the server's own requests at loopback or link-local addresses")
    func localTargets() {
        let remote = "https://idp.example.com/.well-known/openid-configuration"
        for target in [
            "http://127.0.0.1:8080/token", "https://localhost/jwks", "http://[::1]/keys", "http://169.254.169.254/latest/meta-data",
            "https://[fe80::1]/jwks", "http://0.0.0.0:5432/", "https://api.localhost/token", "https://127.1/token",
            "https://2130706433/jwks", "https://0x7f.1/jwks", "https://[::ffff:127.0.0.1]/jwks", "https://[0:0:0:0:0:0:0:1]/jwks",
            "https://[::ffff:169.254.169.254]/latest",
        ] {
            #expect(OutboundURL.localTarget(among: ["https://idp.example.com/token", target], declared: remote) == target, "\(target)")
        }
        #expect(OutboundURL.localTarget(among: ["https://idp.example.com/token", "https://idp.example.com/jwks"], declared: remote) == nil)
        // A provider declared on loopback (development) may name loopback endpoints.
        #expect(
            OutboundURL.localTarget(
                among: ["http://127.0.0.1:9000/token"], declared: "http://127.0.0.1:9000/.well-known/openid-configuration") == nil)
    }

    @Test("every outbound call connects only to a public address, or to loopback for a loopback URL; private and link-local never")
    func outboundAddresses() async throws {
        for url in [
            "https://169.254.169.254/latest/meta-data", "https://[fe80::1]/", "https://[fd00:ec2::254]/", "https://10.0.0.5/check",
            "https://172.16.3.4/", "https://192.168.1.1/", "https://100.64.0.1/", "https://0.0.0.0/", "https://[::]/",
            "https://[::ffff:10.0.0.1]/", "https://224.0.0.1/",
            // Forms the resolver reads as loopback, behind a URL that is no loopback literal.
            "https://127.1/token", "https://2130706433/jwks", "https://0x7f.1/jwks", "https://[::ffff:127.0.0.1]/",
        ] {
            await #expect(throws: OutboundURL.Refused.self, "\(url)") {
                _ = try await OutboundURL.execute(HTTPClientRequest(url: url), timeout: .seconds(2), maximumBytes: 16)
            }
        }
        // A loopback URL reaches loopback (a local endpoint in development), and a public address passes the check.
        #expect(try await OutboundURL.connectionAddress(for: "http://127.0.0.1:9/x").address == "127.0.0.1")
        #expect(try await OutboundURL.connectionAddress(for: "https://93.184.215.14/").address == "93.184.215.14")
        #expect(try await OutboundURL.connectionAddress(for: "https://[2606:4700::1111]/").address == "2606:4700::1111")
        #expect(OutboundURL.AddressScope.of(v4: 0x0808_0808) == .publicInternet)
        #expect(OutboundURL.AddressScope.of(v4: 0xAC1F_0001) == .local && OutboundURL.AddressScope.of(v4: 0xAC20_0001) == .publicInternet)
    }

    @Test("a provider's email is proven only when its email_verified says so; a user id the name rules would rewrite is refused")
    func claimsMapping() throws {
        let provider = UpstreamProvider(name: "p", metadataUrl: "https://idp.example.com/.well-known/openid-configuration", clientId: "c")
        let oidc = UpstreamOIDC(directory: UpstreamDirectory(), requests: NoRequests(), dataKey: .generate())
        #expect(try oidc.identity(from: ["sub": "s", "email": "a@example.com", "email_verified": true], provider: provider).emailVerified)
        #expect(!(try oidc.identity(from: ["sub": "s", "email": "a@example.com"], provider: provider).emailVerified))
        #expect(
            !(try oidc.identity(from: ["sub": "s", "email": "a@example.com", "email_verified": false], provider: provider).emailVerified))
        #expect(throws: UpstreamOIDC.Failure.self) { try oidc.identity(from: ["sub": "two  spaces"], provider: provider) }
    }

    struct NoRequests: UpstreamRequestStore {
        func save(_ request: UpstreamRequest, stateHash: String, expiresAt: Date) async throws {}
        func take(stateHash: String, now: Date) async throws -> UpstreamRequest? { nil }
    }
}

extension UpstreamProviderTests {
    /// Starts a sign-in with the provider named `hint`; the state and nonce it sent.
    static func startUpstream(_ h: IdentityHarness, _ driver: Driver, hint: String) async throws -> (state: String, nonce: String) {
        driver.cookies = [:]
        var attempt = AuthorizationAttempt(harness: h)
        attempt.extra = [("domain_hint", hint)]
        let toProvider = try await driver.start(attempt, harness: h)
        let items = try #require(toProvider.location.flatMap(URLComponents.init(string:))?.queryItems, "\(toProvider.text.prefix(300))")
        #expect(items.first { $0.name == "redirect_uri" }?.value == Self.callback(h, provider: hint))
        return (try #require(items.first { $0.name == "state" }?.value), try #require(items.first { $0.name == "nonce" }?.value))
    }

    @Test(
        "identity-provider mix-up: an answer on another provider's callback, on B2C's shared callback, or naming another issuer is refused before any code is redeemed"
    )
    func mixUp() async throws {
        let honest = Script()
        let evil = Script()
        let honestPort = PortBox()
        let evilPort = PortBox()
        try await Self.provider(honest, port: { honestPort.value }).test(.live) { honestIdP in
            honestPort.value = try #require(honestIdP.port)
            try await Self.provider(evil, port: { evilPort.value }).test(.live) { evilIdP in
                evilPort.value = try #require(evilIdP.port)
                try await IdentityHarness.run(.sqlite) { h, driver in
                    var tenant = h.tenant
                    tenant.identityProviders = [
                        UpstreamProvider(
                            name: "honest", metadataUrl: "http://127.0.0.1:\(honestPort.value)/.well-known/openid-configuration",
                            clientId: "local-client"),
                        UpstreamProvider(
                            name: "evil", metadataUrl: "http://127.0.0.1:\(evilPort.value)/.well-known/openid-configuration",
                            clientId: "local-client"),
                    ]
                    try await h.server.tenants.save(tenant, now: Date())
                    var flow = try #require(try await h.server.tenants.userFlow(tenantID: tenant.id, name: "B2C_1_susi"))
                    flow.identityProviders += tenant.identityProviders.map(\.kind)
                    try await h.server.tenants.save(flow)

                    // The person picked the malicious provider, which sent the browser on to the
                    // honest one: the honest code comes back with the malicious provider's state.
                    let misrouted: [(String, [(String, String)])] = [
                        ("honest", []), ("", []), ("evil", [("iss", "http://127.0.0.1:\(honestPort.value)")]),
                    ]
                    for (callback, extra) in misrouted {
                        let (state, nonce) = try await Self.startUpstream(h, driver, hint: "evil")
                        await evil.set("good", nonce: nonce)
                        let path = "/\(h.tenant.name)/oauth2/authresp" + (callback.isEmpty ? "" : "/\(callback)")
                        let back = try await driver.follow(
                            try await driver.get(path + "?" + Form.encode([("code", "honest-code"), ("state", state)] + extra)))
                        #expect(b2cCode(redirect: back) == "AADB2C90273", "\(callback): \(back.status) \(back.text.prefix(200))")
                    }
                    #expect(await evil.tokenCalls.isEmpty, "no code was sent to the provider that did not issue it")
                    #expect(await honest.tokenCalls.isEmpty)

                    // A provider that says it names itself must: an answer without iss is refused.
                    await evil.advertise(#","authorization_response_iss_parameter_supported":true"#)
                    await h.server.service.upstream.directory.forget()
                    let evilIssuer = "http://127.0.0.1:\(evilPort.value)"
                    let (state, nonce) = try await Self.startUpstream(h, driver, hint: "evil")
                    await evil.set("good", nonce: nonce)
                    let bare = try await driver.follow(
                        try await driver.get("/\(h.tenant.name)/oauth2/authresp/evil?" + Form.encode([("code", "c"), ("state", state)])))
                    #expect(b2cCode(redirect: bare) == "AADB2C90273")
                    #expect(await evil.tokenCalls.isEmpty)

                    // Its own answer, on its own callback, naming itself: redeemed there.
                    let (good, goodNonce) = try await Self.startUpstream(h, driver, hint: "evil")
                    await evil.set("good", nonce: goodNonce)
                    let done = try await driver.follow(
                        try await driver.get(
                            "/\(h.tenant.name)/oauth2/authresp/evil?" + Form.encode([("code", "c"), ("state", good), ("iss", evilIssuer)])))
                    #expect(b2cCode(redirect: done) == nil, "\(done.status) \(done.location ?? done.text.prefix(300).description)")
                    #expect(await evil.tokenCalls.count == 1)
                }
            }
        }
    }

    @Test(
        "the client secret goes in the body by default (B2C's client_secret_post), in Basic when declared or when the provider lists only that"
    )
    func tokenEndpointAuthMethod() async throws {
        let script = Script()
        let box = PortBox()
        try await Self.provider(script, port: { box.value }).test(.live) { idp in
            box.value = try #require(idp.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                let cases: [(UpstreamProvider.TokenEndpointAuthMethod?, String, basic: Bool)] = [
                    (nil, "", false),
                    (nil, #","token_endpoint_auth_methods_supported":["client_secret_basic"]"#, true),
                    (nil, #","token_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post"]"#, false),
                    (.clientSecretBasic, "", true),
                    (.clientSecretPost, #","token_endpoint_auth_methods_supported":["client_secret_basic"]"#, false),
                ]
                for (index, (declared, extras, basic)) in cases.enumerated() {
                    await script.advertise(extras)
                    // A new name each round: metadata is cached per provider URL, so a new path too.
                    try await Self.offer(
                        h,
                        UpstreamProvider(
                            name: "local", metadataUrl: "http://127.0.0.1:\(box.value)/.well-known/openid-configuration",
                            clientId: "local client", clientSecret: "s3cret:&=", tokenEndpointAuthMethod: declared))
                    await h.server.service.upstream.directory.forget()
                    let (state, nonce) = try await Self.startUpstream(h, driver, hint: "local")
                    await script.set("audience", nonce: nonce)
                    _ = try await driver.get("/\(h.tenant.name)/oauth2/authresp/local?" + Form.encode([("code", "c"), ("state", state)]))
                    let call = try #require(await script.tokenCalls.last)
                    #expect(await script.tokenCalls.count == index + 1)
                    let form = Dictionary(uniqueKeysWithValues: Form.decode(call.body).map { ($0.0, $0.1) })
                    if basic {
                        // RFC 6749 §2.3.1: each part form-encoded, then Basic.
                        let encoded = try #require(call.authorization?.split(separator: " ").last, "case \(index)")
                        let pair = String(decoding: Data(base64Encoded: String(encoded)) ?? Data(), as: UTF8.self)
                        #expect(
                            Form.decode(pair.replacingOccurrences(of: ":", with: "=")).first.map { [$0.0, $0.1] } == [
                                "local client", "s3cret:&=",
                            ])
                        #expect(form["client_secret"] == nil && form["client_id"] == nil, "case \(index)")
                    } else {
                        #expect(call.authorization == nil, "case \(index)")
                        #expect(form["client_id"] == "local client" && form["client_secret"] == "s3cret:&=", "case \(index)")
                    }
                }
            }
        }
    }
}
