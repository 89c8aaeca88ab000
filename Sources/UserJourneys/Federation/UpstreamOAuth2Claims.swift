import AsyncHTTPClient
import Foundation
import IdentityDirectory
import JOSE
import NIOCore
import TodoModels
import WireCoding

extension UpstreamOIDC {
    /// A plain OAuth 2.0 provider's answer (B2C's OAuth2 technical profile): the access token of
    /// the token response taken to the claims endpoint, whose JSON object holds the user's claims
    /// (top-level values; numbers, such as many providers' numeric user ids, as text). The same
    /// account rules as an ID token's claims then apply.
    func claimsEndpointIdentity(_ answer: [String: JSONValue], endpoints: UpstreamOAuth2, provider: UpstreamProvider) async throws
        -> FederatedIdentity
    {
        guard case .string(let accessToken)? = answer["access_token"], !accessToken.isEmpty else {
            throw Failure(message: "the token response has no access_token")
        }
        var query: [(String, String)] = []
        if let format = endpoints.claimsFormat { query.append((format.name, format.value)) }
        if !endpoints.tokenInHeader { query.append((endpoints.tokenParameterName, accessToken)) }
        var url = endpoints.claimsEndpoint
        if !query.isEmpty { url += (url.contains("?") ? "&" : "?") + FormEncoding.encode(query) }
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        if endpoints.tokenInHeader { request.headers.add(name: "Authorization", value: "Bearer \(accessToken)") }
        let body: ByteBuffer
        let status: UInt
        do {
            (status, body) = try await Self.send(request)
        } catch {
            throw Failure(message: "the claims endpoint could not be reached")
        }
        guard (200..<300).contains(status), let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any]
        else {
            throw Failure(message: "the claims endpoint answered HTTP \(status) without a JSON object")
        }
        // An integer is kept as its exact digits: read as a double, two ids above 2^53 could
        // round to one, and two people to one account. A fraction stays a number, never an id.
        let integerTypes: Set<String> = ["q", "Q", "i", "I", "l", "L", "s", "S", "C"]
        let values = object.mapValues { value -> ClaimValue in
            if let number = value as? NSNumber, integerTypes.contains(String(cString: number.objCType)) {
                return .string(number.stringValue)
            }
            return ClaimValue(json: value)
        }
        // What the claims endpoint says of itself is not verified: `iss` is the provider's own.
        var claims = values
        claims["iss"] = .string(provider.issuer)
        return try identity(from: JWTClaims(values: claims), provider: provider)
    }
}
