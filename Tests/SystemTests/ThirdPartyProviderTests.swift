import Foundation
import IdentityClient
import Testing

/// The SDK against an OpenID Connect provider nobody here wrote: `oidc-provider-mock` (PyPI,
/// built on authlib), which `scripts/test` starts and names in `TODO_OIDC_MOCK_URL`. Proves
/// the SDK speaks plain OpenID Connect, not just our identity service's dialect.
@Suite("SDK against a third-party OpenID Connect provider")
struct ThirdPartyProviderTests {
    static let issuer = ProcessInfo.processInfo.environment["TODO_OIDC_MOCK_URL"]

    @Test("scripts/test provides the third-party provider when it requires it")
    func providerPresentWhenRequired() {
        if ProcessInfo.processInfo.environment["TODO_REQUIRE_OIDC_MOCK"] == "1" { #expect(Self.issuer != nil) }
    }

    @Test("confidential code flow, ID-token checks, accounts by sub, silent refresh, state check", .enabled(if: issuer != nil))
    func codeFlowAndRefresh() async throws {
        let issuer = try #require(Self.issuer)
        let clock = TestClock()
        let transport = CountingTransport()
        // The mock authenticates clients at its token endpoint by secret only (no PKCE-only
        // public clients), so this is the web-app path: a registered confidential client.
        let redirectURI = "http://127.0.0.1:8765/callback"
        let registration = try await URLSessionTransport().send(
            TransportRequest(
                method: "POST", url: URL(string: "\(issuer)/oauth2/clients")!, headers: ["Content-Type": "application/json"],
                body: Data(#"{"redirect_uris":["\#(redirectURI)"],"token_endpoint_auth_method":"client_secret_basic"}"#.utf8)))
        #expect(registration.status == 201)
        let client = try JSONDecoder().decode([String: JSONValue].self, from: registration.body)
        let clientID = try #require(client["client_id"]?.stringValue)
        let secret = try #require(client["client_secret"]?.stringValue)
        let app = ConfidentialClientApplication(
            configuration: ClientConfiguration(
                clientID: clientID, authority: try Authority(issuer), redirectURI: redirectURI, transport: transport, clock: clock.now),
            clientSecret: secret)
        let subject = "sdk-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let request = try await app.authorizationRequest(InteractiveParameters(scopes: ["email"]))
        // The mock's consent page is a form with a `sub` field, posted back to the same URL.
        let http = URLSessionTransport()
        let page = try await http.send(TransportRequest(method: "GET", url: request.url))
        #expect(page.status == 200)
        let answer = try await http.send(
            TransportRequest(
                method: "POST", url: request.url, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data("sub=\(subject.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)".utf8)))
        let location = try #require(answer.headers["location"], "the mock answered HTTP \(answer.status)")
        #expect(location.hasPrefix(redirectURI))
        var parameters = ScriptedWebAuthenticator.parameters(fromRedirect: try #require(URL(string: location)))
        let result = try await app.acquireToken(for: request, response: parameters)
        #expect(result.account.homeAccountID == subject)
        #expect(result.account.username == subject)
        #expect(result.idToken?.issuer == issuer)
        #expect(!result.accessToken.isEmpty)

        let cached = try await app.acquireTokenSilently(scopes: ["email"], account: result.account)
        #expect(cached.fromCache)
        clock.advance(3400)
        let refreshed = try await app.acquireTokenSilently(scopes: ["email"], account: result.account)
        #expect(!refreshed.fromCache)
        #expect(refreshed.accessToken != result.accessToken)
        #expect(transport.count("refresh_token") == 1)
        _ = try await app.signOut(result.account, postLogoutRedirectURI: nil)
        #expect(try await app.currentAccount() == nil)

        // A replayed redirect with another state is refused before any code is redeemed.
        parameters["state"] = "forged"
        await #expect(throws: IdentityError.stateMismatch) { try await app.acquireToken(for: request, response: parameters) }
    }
}
