import Foundation
import Hummingbird
import JOSE
import Logging
import WireCoding

/// Discovery and JWKS (SPEC §2.2).
struct MetadataEndpoints: Sendable {
    let signingKeys: SigningKeyRing
    let hosts: HostPolicy

    /// The OpenID Provider configuration, echoing the host, tenant segment and policy placement
    /// of the request (research/b2c-protocol.md §1.4).
    @Sendable func discovery(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let (tenant, flow, path) = (context.tenant, context.flow, context.route)
        let origin = hosts.origin(of: request)
        if path.face == .entra { return entraDiscovery(origin: origin, tenant: tenant, route: path) }
        var body = JSONObjectBuilder()
        body.set("issuer", HostPolicy.issuer(origin: origin, tenant: tenant))
        body.set("authorization_endpoint", path.url(origin: origin, for: .authorize))
        body.set("token_endpoint", path.url(origin: origin, for: .token))
        body.set("end_session_endpoint", path.url(origin: origin, for: .logout))
        body.set("jwks_uri", path.url(origin: origin, for: .keys))
        body.set("response_modes_supported", ["query", "fragment", "form_post"])
        body.set(
            "response_types_supported",
            ["code", "code id_token", "code token", "code id_token token", "id_token", "id_token token", "token", "token id_token"])
        body.set("scopes_supported", ["openid"])
        body.set("subject_types_supported", ["pairwise"])
        body.set("id_token_signing_alg_values_supported", ["RS256"])
        body.set("token_endpoint_auth_methods_supported", ["client_secret_post", "client_secret_basic"])
        body.set("claims_supported", flow.claimsSupported)
        // Not in B2C's document, but RFC 8414 §2 lets clients learn that PKCE S256 is supported.
        body.set("code_challenge_methods_supported", ["S256"])
        var response = Response.json(body.object)
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }

    /// The document Entra publishes at `{authority}/v2.0/.well-known/openid-configuration`
    /// (SPEC §2.9): for `common`, `organizations` and `consumers` the issuer is the literal
    /// template `{base}/{tenantid}/v2.0` that validators fill with a token's `tid`; for a tenant
    /// it is that tenant's v2 issuer. Graph and `userinfo` are served on this host.
    func entraDiscovery(origin: String, tenant: Tenant, route: PolicyRoute) -> Response {
        var body = JSONObjectBuilder()
        body.set("token_endpoint", route.url(origin: origin, for: .token))
        body.set("token_endpoint_auth_methods_supported", ["client_secret_post", "client_secret_basic"])
        body.set("jwks_uri", route.url(origin: origin, for: .keys))
        body.set("response_modes_supported", ["query", "fragment", "form_post"])
        body.set("subject_types_supported", ["pairwise"])
        body.set("id_token_signing_alg_values_supported", ["RS256"])
        body.set("response_types_supported", ["code", "id_token", "code id_token", "id_token token"])
        body.set("scopes_supported", ["openid", "profile", "email", "offline_access"])
        body.set(
            "issuer",
            route.isMultiTenantAlias ? "\(origin)/{tenantid}/v2.0" : HostPolicy.issuer(origin: origin, tenant: tenant, face: .entra))
        body.set("request_uri_parameter_supported", false)
        body.set("userinfo_endpoint", "\(origin)/oidc/userinfo")
        body.set("authorization_endpoint", route.url(origin: origin, for: .authorize))
        body.set("http_logout_supported", true)
        body.set("frontchannel_logout_supported", true)
        body.set("end_session_endpoint", route.url(origin: origin, for: .logout))
        body.set(
            "claims_supported",
            [
                "sub", "iss", "cloud_instance_name", "cloud_instance_host_name", "cloud_graph_host_name", "msgraph_host", "aud", "exp",
                "iat", "auth_time", "acr", "nonce", "preferred_username", "name", "tid", "ver", "at_hash", "c_hash", "email",
            ])
        body.set("code_challenge_methods_supported", ["S256"])
        if route.isMultiTenantAlias {
            body.set("tenant_region_scope", json: .null)
        } else {
            body.set("tenant_region_scope", "NA")
        }
        let host = URLComponents(string: origin)?.host ?? origin
        body.set("cloud_instance_name", host)
        body.set("cloud_graph_host_name", host)
        body.set("msgraph_host", String(origin.drop { $0 != ":" }.dropFirst(3)))
        var response = Response.json(body.object)
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
