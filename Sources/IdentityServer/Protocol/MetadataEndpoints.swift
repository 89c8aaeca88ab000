import Foundation
import Hummingbird
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

    /// `{"keys":[{"kid","nbf","use":"sig","kty":"RSA","e","n"}]}`: no `x5c`/`x5t`, like B2C
    /// (research/b2c-protocol.md §1.5).
    @Sendable func jwks(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let published = try await signingKeys.publishedKeys()
        let jwks = JSONText.object([
            (
                "keys",
                .array(
                    published.map { key in
                        .object([
                            ("kid", .string(key.kid)), ("nbf", .int((key.activatedAt ?? key.createdAt).epochSeconds)),
                            ("use", .string("sig")), ("kty", .string("RSA")), ("e", .string(Base64URL.encode(key.exponent))),
                            ("n", .string(Base64URL.encode(key.modulus))),
                        ])
                    })
            )
        ])
        var response = Response.json(jwks)
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }
}

/// Microsoft Graph's `GET /v1.0/me`, for the MSAL tutorial: answers with Graph's shape for a
/// token this service issued for `User.Read` (research/b2c-protocol.md §7).
struct GraphMe: Sendable {
    let keys: SigningKeyRing
    let users: any UserDirectory
    let tenants: any TenantDirectory
    let clock: any IdentityClock
    let hosts: HostPolicy

    @Sendable func handle(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        guard let header = request.headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            return graphError(.unauthorized, code: "InvalidAuthenticationToken", message: "Access token is empty.", context: context)
        }
        let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        // Only keys still published verify: a withdrawn key (keys revoke) is no longer ours.
        let published = try await keys.publishedKeys()
        let now = clock.now.epochSeconds
        guard let claims = JSONWebToken.verify(token, keys: published),
            let exp = (claims["exp"] as? NSNumber)?.int64Value, exp > now - 300,
            ((claims["nbf"] as? NSNumber)?.int64Value ?? 0) <= now + 300,
            let issuer = claims["iss"] as? String, issuer.hasPrefix(hosts.origin(of: request) + "/")
        else {
            return graphError(
                .unauthorized, code: "InvalidAuthenticationToken", message: "Access token validation failure.", context: context)
        }
        let scopes = ((claims["scp"] as? String) ?? "").split(separator: " ").map { $0.lowercased() }
        guard claims["aud"] as? String == APIPermission.graphResource, scopes.contains("user.read") else {
            return graphError(
                .forbidden, code: "Authorization_RequestDenied", message: "Insufficient privileges to complete the operation.",
                context: context)
        }
        guard let oid = claims["oid"] as? String, let id = UUID(uuidString: oid), let user = try await users.user(id: id) else {
            return graphError(
                .notFound, code: "Request_ResourceNotFound",
                message: "Resource does not exist or one of its queried reference-property objects are not present.", context: context)
        }
        let tenant = try await tenants.tenant(matching: user.tenantID.uuidString)
        let principal = user.email ?? "\(user.objectID)@\(tenant?.name ?? "localhost")"
        func value(_ attribute: UserAttribute) -> JSONText { user.value(of: attribute).map(JSONText.string) ?? .null }
        let body = JSONText.object([
            ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#users/$entity")),
            ("businessPhones", .array([])),
            ("displayName", .string(user.displayName)),
            ("givenName", value(.givenName)),
            ("jobTitle", value(.jobTitle)),
            ("mail", user.email.map(JSONText.string) ?? .null),
            ("mobilePhone", .null),
            ("officeLocation", value(.city)),
            ("preferredLanguage", .null),
            ("surname", value(.surname)),
            ("userPrincipalName", .string(principal)),
            ("id", .string(user.objectID)),
        ])
        return .json(body)
    }

    private func graphError(_ status: HTTPResponse.Status, code: String, message: String, context: IdentityRequestContext) -> Response {
        let body = JSONText.object([
            (
                "error",
                .object([
                    ("code", .string(code)), ("message", .string(message)),
                    (
                        "innerError",
                        .object([
                            ("date", .string(ISO8601DateFormatter().string(from: clock.now))),
                            ("request-id", .string(context.correlationID)), ("client-request-id", .string(context.correlationID)),
                        ])
                    ),
                ])
            )
        ])
        var response = Response.json(body, status: status)
        if status == .unauthorized { response.headers[.wwwAuthenticate] = "Bearer realm=\"\", error=\"invalid_token\"" }
        return response
    }
}
