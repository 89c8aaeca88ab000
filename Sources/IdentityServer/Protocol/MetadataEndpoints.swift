import Foundation
import Hummingbird
import IdentityDirectory
import JOSE
import Logging
import TrustFramework
import UserJourneys
import WireCoding

/// Discovery and JWKS (SPEC §2.2).
struct MetadataEndpoints: Sendable {
    let signingKeys: SigningKeyRing
    let policyKeys: PolicyKeySetLibrary
    let hosts: HostPolicy

    /// The OpenID Provider configuration of the request's dialect, echoing its host, tenant
    /// segment and policy placement (https://github.com/coreos/go-oidc/issues/121).
    @Sendable func discovery(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let body = context.dialect.discovery(
            origin: hosts.origin(of: request), tenant: context.tenant, flow: context.flow, route: context.route)
        var response = Response.json(body)
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }

    /// `{"keys":[{"kid","nbf","use":"sig","kty":"RSA","e","n"}]}`: no `x5c`/`x5t`, like B2C
    /// (https://learn.microsoft.com/azure/active-directory-b2c/tokens-overview#validate-signature). A custom policy publishes its JWT issuer's key set, whose
    /// key signs its tokens (SPEC §2.12); a user flow, the service's key ring.
    @Sendable func jwks(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        var keys: [(kid: String, nbf: Date, n: String, e: String)]
        if let keySet = context.flow.customPolicy?.policy.tokenSigningKeySet {
            keys = try await policyKeys.publishedKeys(tenantID: context.tenant.id, keySet: keySet).map { key in
                (key.kid, key.notBefore ?? key.createdAt, key.n ?? "", key.e ?? "")
            }
        } else {
            keys = try await signingKeys.publishedKeys().map { key in
                let (n, e) = JWKSet.components(of: key.privateKey.publicKey)
                return (key.kid, key.activatedAt ?? key.createdAt, n, e)
            }
        }
        let jwks = JSONText.object([
            (
                "keys",
                .array(
                    keys.map { key in
                        .object([
                            ("kid", .string(key.kid)), ("nbf", .int(key.nbf.epochSeconds)), ("use", .string("sig")), ("kty", .string("RSA")),
                            ("e", .string(key.e)), ("n", .string(key.n)),
                        ])
                    })
            )
        ])
        var response = Response.json(jwks)
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }
}
