import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import NIOCore
import WireCoding

/// The loopback OpenID Connect provider ``UpstreamProviderTests`` and the custom-policy
/// federation tests sign in through: discovery (single- and multi-tenant), JWKS, a token
/// endpoint whose ID token the script shapes, connectors, and a plain OAuth 2.0 token and claims
/// endpoint.
extension UpstreamProviderTests {
    /// What the loopback provider's token endpoint puts in its ID token.
    actor Script {
        var flavour = "good"
        var nonce = ""
        /// Extra members of the discovery document (JSON, with a leading comma).
        var metadataExtras = ""
        /// Each token request's Authorization header and form body, in order.
        var tokenCalls: [(authorization: String?, body: String)] = []
        func set(_ flavour: String, nonce: String) {
            self.flavour = flavour
            self.nonce = nonce
        }
        func get() -> (String, String) { (flavour, nonce) }
        func advertise(_ extras: String) { metadataExtras = extras }
        func recordToken(_ authorization: String?, _ body: String) { tokenCalls.append((authorization, body)) }
        /// The plain OAuth 2.0 endpoints' calls: the token request's method and parameters, and
        /// each claims request's query and Authorization header.
        var oauth2TokenCalls: [(method: String, parameters: String)] = []
        var claimsCalls: [(query: String, authorization: String?)] = []
        func recordOAuth2Token(_ method: String, _ parameters: String) { oauth2TokenCalls.append((method, parameters)) }
        func recordClaims(_ query: String, _ authorization: String?) { claimsCalls.append((query, authorization)) }
    }

    static func provider(_ script: Script, port: @escaping @Sendable () -> Int) throws -> Application<RouterResponder<BasicRequestContext>>
    {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let router = Router()
        router.get(".well-known/openid-configuration") { _, _ -> Response in
            let base = "http://127.0.0.1:\(port())"
            let extras = await script.metadataExtras
            let body =
                #"{"issuer":"\#(base)","authorization_endpoint":"\#(base)/authorize","token_endpoint":"\#(base)/token","jwks_uri":"\#(base)/jwks"\#(extras)}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        // Entra's multi-tenant metadata (`common`): one template issuer for every tenant.
        router.get("common/v2.0/.well-known/openid-configuration") { _, _ -> Response in
            let base = "http://127.0.0.1:\(port())"
            let body =
                #"{"issuer":"\#(base)/{tenantid}/v2.0","authorization_endpoint":"\#(base)/authorize","token_endpoint":"\#(base)/token","jwks_uri":"\#(base)/jwks"}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.get("jwks") { _, _ -> Response in
            let (n, e) = JWKSet.components(of: key.publicKey)
            // An encryption key first, which a token without `kid` is never checked against.
            let (on, oe) = JWKSet.components(of: other.publicKey)
            let body =
                #"{"keys":[{"kty":"RSA","kid":"e1","use":"enc","n":"\#(on)","e":"\#(oe)"},{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":"\#(n)","e":"\#(e)"}]}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        // The flow's "after federating" connector, on the same loopback server.
        router.post("connector") { request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 16))
            let step = body.contains("\"step\":\"PostFederationSignup\"") ? "Prefilled" : "Wrong step"
            let reply = #"{"version":"1.0.0","action":"Continue","givenName":"\#(step)"}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: reply)))
        }
        router.post("blockconnector") { _, _ -> Response in
            let reply = #"{"version":"1.0.0","action":"ShowBlockPage","userMessage":"No sign-ups from this provider."}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: reply)))
        }
        // A plain OAuth 2.0 provider on the same server (B2C's OAuth2 technical profile): its
        // token endpoint answers an access token, its claims endpoint a JSON object for it.
        @Sendable func oauth2Token(_ request: Request, _ method: String) async throws -> Response {
            let parameters = method == "GET" ? (request.uri.query ?? "") : String(buffer: try await request.body.collect(upTo: 1 << 16))
            await script.recordOAuth2Token(method, parameters)
            let body = await script.get().0 == "noaccess" ? #"{"token_type":"bearer"}"# : #"{"access_token":"oauth2-at","token_type":"bearer"}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.get("oauth2/token") { request, _ in try await oauth2Token(request, "GET") }
        router.post("oauth2/token") { request, _ in try await oauth2Token(request, "POST") }
        router.get("oauth2/me") { request, _ -> Response in
            let query = request.uri.query ?? ""
            await script.recordClaims(query, request.headers[.authorization])
            let presented = query.contains("access_token=oauth2-at") || query.contains("token=oauth2-at")
                || request.headers[.authorization] == "Bearer oauth2-at"
            guard presented, await script.get().0 != "claimsfail" else { return Response(status: .unauthorized) }
            // `bigid`: an id above 2^53, which a double would round; `spoof`: the provider names
            // another issuer and another user in its own answer.
            let body = switch await script.get().0 {
            case "bigid": #"{"id":9007199254740993,"name":"Big Id"}"#
            case "spoof": #"{"id":4242,"name":"OAuth Person","iss":"https://other-idp.example","sub":"victim"}"#
            default: #"{"id":4242,"name":"OAuth Person","email":"oauth@example.com","verified":true}"#
            }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.post("token") { request, _ -> Response in
            let form = String(buffer: try await request.body.collect(upTo: 1 << 16))
            await script.recordToken(request.headers[.authorization], form)
            let (flavour, nonce) = await script.get()
            let now = Int(Date().timeIntervalSince1970)
            let issuer = "http://127.0.0.1:\(port())"
            let claims: String
            switch flavour {
            case "expired":
                claims =
                    #"{"iss":"\#(issuer)","aud":"local-client","sub":"s1","nonce":"\#(nonce)","iat":\#(now - 7200),"exp":\#(now - 3600)}"#
            case "nonce":
                claims = #"{"iss":"\#(issuer)","aud":"local-client","sub":"s1","nonce":"other","iat":\#(now),"exp":\#(now + 600)}"#
            case "audience":
                claims = #"{"iss":"\#(issuer)","aud":"someone-else","sub":"s1","nonce":"\#(nonce)","iat":\#(now),"exp":\#(now + 600)}"#
            case "mt-a", "mt-b", "mt-mismatch":
                // A tenant's user through the multi-tenant metadata: its own tenant's issuer and `tid`.
                let (named, tid) = flavour == "mt-b" ? (Self.tenantB, Self.tenantB) : (Self.tenantA, flavour == "mt-a" ? Self.tenantA : Self.tenantB)
                claims =
                    #"{"iss":"\#(issuer)/\#(named)/v2.0","tid":"\#(tid)","aud":"local-client","sub":"s-\#(tid.prefix(4))","oid":"o-\#(tid.prefix(4))","nonce":"\#(nonce)","iat":\#(now),"exp":\#(now + 600)}"#
            default: claims = #"{"iss":"\#(issuer)","aud":"local-client","sub":"s1","nonce":"\#(nonce)","iat":\#(now),"exp":\#(now + 600)}"#
            }
            let signer = flavour == "forged" || flavour == "nokid-forged" ? other : key
            var token = try RS256.sign(claims: Array(claims.utf8), keyID: "k1", with: RS256Signer(signer))
            if flavour.hasPrefix("nokid") {
                // RFC 7515 makes `kid` optional: oidc-provider-mock on a current authlib leaves it out.
                let input = Base64URL.encode(Array(#"{"alg":"RS256","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
                token = input + "." + Base64URL.encode(try RS256Signer(signer).signature(for: Array(input.utf8)))
            }
            let body = #"{"access_token":"at","token_type":"Bearer","id_token":"\#(token)"}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: Logger(label: "idp"))
    }

    /// The tenants of the loopback provider's multi-tenant metadata.
    static let tenantA = "aaaaaaaa-0000-4000-8000-000000000001"
    static let tenantB = "bbbbbbbb-0000-4000-8000-000000000002"

    final class PortBox: @unchecked Sendable {
        // Set once before the first request arrives.
        var value = 0
    }
}
