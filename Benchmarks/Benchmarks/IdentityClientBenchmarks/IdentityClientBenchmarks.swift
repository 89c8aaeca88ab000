import Benchmark
import Foundation
import IdentityClient

/// The SDK's hot paths, all in process (a canned identity service answers over an in-memory
/// transport, so nothing here measures the network):
/// - silent acquisition answered from the token cache (what every API call does first);
/// - PKCE + state + nonce + authorize URL building;
/// - ID-token parsing.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(3))

    Benchmark("Silent acquisition from cache") { benchmark, context in
        for _ in benchmark.scaledIterations {
            blackHole(try await context.app.acquireTokenSilently(scopes: ["tasks"], account: context.account))
        }
    } setup: {
        try await CannedIdentity.signedIn()
    }

    Benchmark("PKCE and authorize URL building") { benchmark, app in
        for _ in benchmark.scaledIterations {
            blackHole(try await app.authorizationRequest(InteractiveParameters(scopes: ["tasks"], loginHint: "alice@example.com")))
        }
    } setup: {
        try await CannedIdentity.confidential()
    }

    Benchmark("ID-token parsing") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try IDToken(CannedIdentity.idToken))
        }
    }
}

/// A B2C-shaped identity service in memory: discovery and a token endpoint.
struct CannedIdentity: HTTPTransport {
    static let issuer = "http://127.0.0.1:5080/2f3e71ec-0de4-4ba3-a3b3-283a88f5e15d/v2.0/"
    static let clientID = "85220b35-cb8a-47d2-9c0c-3f14d1147d3f"

    static let idToken: String = {
        let claims: [String: Any] = [
            "iss": issuer, "aud": clientID, "exp": Date().timeIntervalSince1970 + 86_400, "iat": Date().timeIntervalSince1970,
            "sub": "b9610085-1610-4d30-9468-cc150131ddb8", "oid": "b9610085-1610-4d30-9468-cc150131ddb8", "name": "Alice",
            "emails": ["alice@example.com"], "tfp": "B2C_1_susi", "ver": "1.0",
        ]
        let payload = try! JSONSerialization.data(withJSONObject: claims)
        func encode(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        return
            "\(encode(Data(#"{"typ":"JWT","alg":"RS256","kid":"k"}"#.utf8))).\(encode(payload)).\(encode(Data(repeating: 7, count: 256)))"
    }()

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        if request.url.path.hasSuffix("openid-configuration") {
            let base = "http://127.0.0.1:5080/todob2c.onmicrosoft.com/b2c_1_susi"
            let body =
                #"{"issuer":"\#(Self.issuer)","authorization_endpoint":"\#(base)/oauth2/v2.0/authorize","token_endpoint":"\#(base)/oauth2/v2.0/token","end_session_endpoint":"\#(base)/oauth2/v2.0/logout","jwks_uri":"\#(base)/discovery/v2.0/keys"}"#
            return TransportResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(body.utf8))
        }
        let clientInfo = Data(
            #"{"uid":"b9610085-1610-4d30-9468-cc150131ddb8-b2c_1_susi","utid":"2f3e71ec-0de4-4ba3-a3b3-283a88f5e15d"}"#.utf8
        )
        .base64EncodedString()
        let body =
            #"{"access_token":"\#(Self.idToken)","id_token":"\#(Self.idToken)","token_type":"Bearer","expires_in":3600,"refresh_token":"r","client_info":"\#(clientInfo)"}"#
        return TransportResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(body.utf8))
    }

    struct SignedIn: Sendable {
        var app: PublicClientApplication
        var account: Account
    }

    static func configuration() throws -> ClientConfiguration {
        ClientConfiguration(
            clientID: clientID, authority: try Authority("http://127.0.0.1:5080/todob2c.onmicrosoft.com/B2C_1_susi"),
            transport: CannedIdentity())
    }

    /// Signed in with ROPC against the canned service, so the cache holds a valid token.
    static func signedIn() async throws -> SignedIn {
        let app = PublicClientApplication(configuration: try configuration())
        let result = try await app.acquireToken(username: "alice@example.com", password: "x", scopes: ["tasks"])
        return SignedIn(app: app, account: result.account)
    }

    static func confidential() async throws -> ConfidentialClientApplication {
        let app = ConfidentialClientApplication(configuration: try configuration(), clientSecret: "secret")
        _ = try await app.authorizationRequest(InteractiveParameters(scopes: ["tasks"]))  // discovery, once
        return app
    }
}
