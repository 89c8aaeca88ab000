import Foundation
import HummingbirdTesting
import Storage
import TestSupport
import Testing
import WireCoding

@testable import IdentityDirectory
@testable import IdentityServer
@testable import TrustFramework
@testable import UserJourneys

/// A custom policy's plain OAuth 2.0 identity provider (SPEC §2.12; B2C's `Protocol Name="OAuth2"`
/// technical profile, oauth2-technical-profile.md): no discovery and no ID token. The code is
/// redeemed at `AccessTokenEndpoint`, the user's claims read from `ClaimsEndpoint` with the access
/// token, and its id (`PartnerClaimType` of `issuerUserId`) keys the account.
@Suite("Custom policies: OAuth 2.0 identity providers")
struct CustomPolicyOAuth2Tests {
    static func withOAuth2Provider(
        extraMetadata: String = "", _ body: @escaping @Sendable (IdentityHarness, Driver, UpstreamProviderTests.Script, Int) async throws -> Void
    ) async throws {
        let script = UpstreamProviderTests.Script()
        let box = UpstreamProviderTests.PortBox()
        try await UpstreamProviderTests.provider(script, port: { box.value }).test(.live) { idp in
            box.value = try #require(idp.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                try await CustomPolicyFederationTests.upload(h, port: box.value, extraMetadata: extraMetadata, oauth2: true)
                try await body(h, driver, script, box.value)
            }
        }
    }

    @Test("the code goes to AccessTokenEndpoint with client_secret_post, the token to ClaimsEndpoint in its query; the numeric id keys one account")
    func signUpThenSignIn() async throws {
        let format = #"<Item Key="ClaimsEndpointFormatName">format</Item><Item Key="ClaimsEndpointFormat">json</Item>"#
        try await Self.withOAuth2Provider(extraMetadata: format) { h, driver, script, port in
            let first = try await CustomPolicyFederationTests.signIn(h, driver, script: script)
            let code = try #require(first.response.redirectParameters["code"], "\(first.response.status) \(first.response.location ?? first.response.text.prefix(400).description)")
            let user = try #require(try await h.server.users.users(tenantID: h.tenant.id).first)
            #expect(user.signInName == "4242" && user.displayName == "OAuth Person" && user.passwordHash == nil)
            let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: first.attempt, code: code).json["id_token"] as? String)).claims
            #expect(claims["sub"] as? String == user.objectID && claims["newUser"] as? Bool == true)

            let token = try #require(await script.oauth2TokenCalls.last)
            #expect(token.method == "POST" && token.parameters.contains("client_secret=loopback-secret") && token.parameters.contains("grant_type=authorization_code"))
            let claimsCall = try #require(await script.claimsCalls.last)
            #expect(claimsCall.query.contains("access_token=oauth2-at") && claimsCall.query.contains("format=json") && claimsCall.authorization == nil)
            #expect(await script.tokenCalls.isEmpty, "no OpenID Connect token request")

            let second = try await CustomPolicyFederationTests.signIn(h, driver, script: script)
            #expect(second.response.redirectParameters["code"] != nil)
            #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1, "the same account by the same id")
            _ = port
        }
    }

    @Test("HttpBinding GET, the token in the Authorization header under another name, the scope as written")
    func bindings() async throws {
        let metadata = #"<Item Key="HttpBinding">GET</Item><Item Key="BearerTokenTransmissionMethod">AuthorizationHeader</Item>"#
        try await Self.withOAuth2Provider(extraMetadata: metadata) { h, driver, script, _ in
            driver.cookies = [:]
            let attempt = AuthorizationAttempt(harness: h, policy: "B2C_1A_test_susi")
            let unified = try await driver.follow(try await driver.start(attempt, harness: h))
            let toProvider = try await driver.submit(unified, [("action", "provider"), ("exchange", "LoopbackExchange")])
            let authorize = try #require(toProvider.location.flatMap(URLComponents.init(string:)))
            #expect(authorize.path == "/oauth2/authorize")
            #expect(authorize.queryItems?.first { $0.name == "scope" }?.value == "read:user", "no openid forced onto a plain OAuth 2.0 provider")
            let state = try #require(authorize.queryItems?.first { $0.name == "state" }?.value)
            let back = try await driver.follow(
                try await driver.get("/\(h.tenant.name)/oauth2/authresp/Loopback-OIDC?" + Form.encode([("code", "c-get"), ("state", state)])))
            #expect(back.redirectParameters["code"] != nil, "\(back.status) \(back.location ?? back.text.prefix(300).description)")
            let token = try #require(await script.oauth2TokenCalls.last)
            #expect(token.method == "GET" && token.parameters.contains("code=c-get"))
            let claimsCall = try #require(await script.claimsCalls.last)
            #expect(claimsCall.authorization == "Bearer oauth2-at" && !claimsCall.query.contains("oauth2-at"))
        }
    }

    @Test("an id above 2^53 is kept to the digit; a claims endpoint naming another issuer and user proves only its own id")
    func exactAndOwnIds() async throws {
        try await Self.withOAuth2Provider { h, driver, script, _ in
            let big = try await CustomPolicyFederationTests.signIn(h, driver, script: script, flavour: "bigid")
            #expect(big.response.redirectParameters["code"] != nil, "\(big.response.status) \(big.response.location ?? "")")
            #expect(try await h.server.users.users(tenantID: h.tenant.id).map(\.signInName) == ["9007199254740993"])
            let spoofed = try await CustomPolicyFederationTests.signIn(h, driver, script: script, flavour: "spoof")
            #expect(spoofed.response.redirectParameters["code"] != nil)
            let names = try await h.server.users.users(tenantID: h.tenant.id).map(\.signInName).sorted()
            #expect(names == ["4242", "9007199254740993"], "its own id, not the victim its answer named")
        }
    }

    @Test("no access token, or a claims endpoint that refuses it, ends the sign-in with AADB2C90273 and creates no one")
    func refusals() async throws {
        try await Self.withOAuth2Provider { h, driver, script, _ in
            for flavour in ["noaccess", "claimsfail"] {
                let (back, _, _) = try await CustomPolicyFederationTests.signIn(h, driver, script: script, flavour: flavour)
                #expect(b2cCode(redirect: back) == "AADB2C90273", "\(flavour): \(back.status) \(back.location ?? back.text.prefix(300).description)")
            }
            #expect(try await h.server.users.users(tenantID: h.tenant.id).isEmpty)
        }
    }

    @Test("through oidc-provider-mock as a plain OAuth 2.0 server: its authorize page, its token endpoint, its userinfo as the claims endpoint")
    func mockProvider() async throws {
        if ProcessInfo.processInfo.environment["TODO_REQUIRE_OIDC_MOCK"] == "1" { #expect(UpstreamProviderTests.mock != nil) }
        guard let mock = UpstreamProviderTests.mock else { return }
        try await IdentityHarness.run(.sqlite) { h, driver in
            let client = try await CustomPolicyFederationTests.mockClient(h, mock: mock, user: "olli", name: "Olli OAuth")
            let subject = client.subject
            // The mock's userinfo gives `sub`, not `id`: the profile maps issuerUserId from it.
            try await CustomPolicyFederationTests.upload(
                h, clientID: client.id, secret: client.secret,
                extraMetadata: #"<Item Key="BearerTokenTransmissionMethod">AuthorizationHeader</Item>"#, oauth2: true,
                oauth2Endpoints: ["\(mock)/oauth2/authorize", "\(mock)/oauth2/token", "\(mock)/userinfo"], issuerUserIdClaim: "sub",
                scope: "openid profile")
            var oids: [String] = []
            for _ in 0..<2 {
                let claims = try await CustomPolicyFederationTests.mockSignIn(h, driver, mock: mock, subject: subject)
                oids.append(try #require(claims["sub"] as? String))
                #expect(claims["name"] as? String == "Olli OAuth")
            }
            #expect(oids[0] == oids[1])
            let account = try #require(try await h.server.users.users(tenantID: h.tenant.id).first)
            #expect(account.signInName == subject && account.objectID == oids[0])
        }
    }

    @Test("a multi-tenant OpenID Connect provider (Entra's common metadata): a token of an accepted tenant signs in; another tenant's, or a tid that is not its issuer's, is AADB2C90273")
    func multiTenant() async throws {
        let script = UpstreamProviderTests.Script()
        let box = UpstreamProviderTests.PortBox()
        try await UpstreamProviderTests.provider(script, port: { box.value }).test(.live) { idp in
            box.value = try #require(idp.port)
            try await IdentityHarness.run(.sqlite) { h, driver in
                let accepted = "http://127.0.0.1:\(box.value)/\(UpstreamProviderTests.tenantA)"
                try await CustomPolicyFederationTests.upload(
                    h, metadata: "http://127.0.0.1:\(box.value)/common/v2.0/.well-known/openid-configuration",
                    extraMetadata: #"<Item Key="DiscoverMetadataByTokenIssuer">true</Item><Item Key="ValidTokenIssuerPrefixes">\#(accepted)</Item>"#)
                let good = try await CustomPolicyFederationTests.signIn(h, driver, script: script, flavour: "mt-a")
                #expect(good.response.redirectParameters["code"] != nil, "\(good.response.status) \(good.response.location ?? good.response.text.prefix(300).description)")
                let user = try #require(try await h.server.users.users(tenantID: h.tenant.id).first)
                #expect(user.signInName == "s-aaaa")
                for flavour in ["mt-b", "mt-mismatch"] {
                    let refused = try await CustomPolicyFederationTests.signIn(h, driver, script: script, flavour: flavour)
                    #expect(b2cCode(redirect: refused.response) == "AADB2C90273", "\(flavour): \(refused.response.location ?? "")")
                }
                #expect(try await h.server.users.users(tenantID: h.tenant.id).count == 1)
            }
        }
        // Without ValidTokenIssuerPrefixes the template issuer is not the metadata URL's: refused.
        var single = UpstreamProvider(name: "p", metadataUrl: "https://idp.example/common/v2.0/.well-known/openid-configuration", clientId: "c")
        #expect(!single.isIssuerTemplate("https://idp.example/{tenantid}/v2.0"))
        single.validIssuerPrefixes = ["https://idp.example/"]
        #expect(single.isIssuerTemplate("https://idp.example/{tenantid}/v2.0"))
        #expect(!single.isIssuerTemplate("https://elsewhere.example/{tenantid}/v2.0"))
        #expect(single.tenantIssuer(template: "https://idp.example/{tenantid}/v2.0", tenantID: "t/../x", claimed: "https://idp.example/t/../x/v2.0") == nil)
    }

    @Test("a provider elsewhere cannot point this server's token or claims requests at loopback")
    func noLocalEndpointsFromElsewhere() async throws {
        var provider = UpstreamProvider(name: "p", metadataUrl: "https://idp.example/authorize", clientId: "c")
        for (token, claims) in [("http://127.0.0.1:9/token", "https://idp.example/me"), ("https://idp.example/token", "https://169.254.169.254/me")] {
            provider.oauth2 = UpstreamOAuth2(
                authorizationEndpoint: "https://idp.example/authorize", tokenEndpoint: token, claimsEndpoint: claims, tokenInHeader: true,
                tokenParameterName: "access_token", claimsFormat: nil, tokenByGet: false)
            await #expect(throws: UpstreamOIDC.Failure.self, "\(token) \(claims)") {
                _ = try await UpstreamDirectory().metadata(provider)
            }
        }
        provider.oauth2?.claimsEndpoint = "https://idp.example/me"
        #expect(try await UpstreamDirectory().metadata(provider).tokenEndpoint == "https://idp.example/token")
    }

    @Test("an OAuth2 profile this service cannot run is refused at upload, naming what it lacks")
    func uploadChecks() {
        let complete = [
            "authorization_endpoint": "https://idp.example/authorize", "AccessTokenEndpoint": "https://idp.example/token",
            "ClaimsEndpoint": "https://idp.example/me", "client_id": "c",
        ]
        #expect(PolicyCheck.oAuth2Problem(id: "P", metadata: complete, complete: true) == nil)
        var missing = complete
        missing["ClaimsEndpoint"] = nil
        #expect(PolicyCheck.oAuth2Problem(id: "P", metadata: missing, complete: true) == "TechnicalProfile 'P' has no ClaimsEndpoint.")
        #expect(PolicyCheck.oAuth2Problem(id: "P", metadata: missing, complete: false) == nil, "a base may leave it to its extension")
        for (key, value) in [
            ("AccessTokenEndpoint", "http://idp.example/token"), ("response_types", "id_token"), ("AccessTokenResponseFormat", "xml"),
            ("HttpBinding", "PUT"), ("token_endpoint_auth_method", "private_key_jwt"),
        ] {
            var bad = complete
            bad[key] = value
            #expect(PolicyCheck.oAuth2Problem(id: "P", metadata: bad, complete: true)?.contains(key) == true, "\(key)")
        }
        // A METADATA on an OAuth2 profile would be its identity, unchecked: refused.
        var named = complete
        named["METADATA"] = "facebook.com"
        #expect(PolicyCheck.oAuth2Problem(id: "P", metadata: named, complete: false)?.contains("METADATA") == true)
        // Facebook's profile is the simulated Facebook's, whatever its metadata.
        #expect(PolicyCheck.oAuth2Problem(id: "FB", metadata: ["ProviderName": "facebook"], complete: true) == nil)
    }
}
