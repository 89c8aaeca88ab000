import Foundation
import Hummingbird
import IdentityDirectory
import JOSE
import Logging
import UserJourneys
import WireCoding

/// Discovery and JWKS (SPEC §2.2).
struct MetadataEndpoints: Sendable {
    let signingKeys: SigningKeyRing
    let hosts: HostPolicy

    /// The OpenID Provider configuration of the request's dialect, echoing its host, tenant
    /// segment and policy placement (research/b2c-protocol.md §1.4).
    @Sendable func discovery(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let body = context.dialect.discovery(
            origin: hosts.origin(of: request), tenant: context.tenant, flow: context.flow, route: context.route)
        var response = Response.json(body)
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }

    /// `{"keys":[{"kid","nbf","use":"sig","kty":"RSA","e","n"}]}`: no `x5c`/`x5t`, like B2C
    /// (research/b2c-protocol.md §1.5).
    @Sendable func jwks(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let published = try await signingKeys.publishedKeys()
        let jwks = JSONText.object([
            (
                "keys",
                .array(
                    published.map { key in
                        let (n, e) = JWKSet.components(of: key.privateKey.publicKey)
                        return .object([
                            ("kid", .string(key.kid)), ("nbf", .int((key.activatedAt ?? key.createdAt).epochSeconds)),
                            ("use", .string("sig")), ("kty", .string("RSA")), ("e", .string(e)), ("n", .string(n)),
                        ])
                    })
            )
        ])
        var response = Response.json(jwks)
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }
}
