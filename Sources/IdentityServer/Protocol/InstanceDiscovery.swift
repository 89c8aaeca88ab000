import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// `GET {base}/{tenant}/discovery/instance?api-version=1.1&authorization_endpoint=…`: Entra's
/// instance discovery, through which MSAL validates an authority before it trusts it
/// (SPEC §2.9; MSAL Python `authority.py` calls it with `api-version=1.0`). It answers for the
/// hosts this service serves: the tenant discovery endpoint of the authorization endpoint's
/// tenant, on this service's origin (MSAL drops the port when it writes that endpoint), and the
/// host's aliases. Any other host is `invalid_instance` (AADSTS50049), in Entra's JSON form.
struct InstanceDiscovery: Sendable {
    let hosts: HostPolicy
    let clock: any IdentityClock

    @Sendable func handle(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let query = RequestParameters(query: request.uri.query)
        let origin = hosts.origin(of: request)
        var tenant = PolicyResolver.decoded(context.parameters.get("tenant") ?? "common")
        var named: String?
        if let endpoint = query.nonEmpty("authorization_endpoint") {
            guard let url = URLComponents(string: endpoint), ["https", "http"].contains(url.scheme?.lowercased() ?? ""),
                let host = url.host?.lowercased(), hosts.allowedHosts.contains(host),
                let first = url.path.split(separator: "/").first
            else {
                return TokenErrorResponder.respond(
                    .invalidInstance, correlationID: context.correlationID, now: clock.now, face: .entra, origin: origin)
            }
            tenant = first.removingPercentEncoding ?? String(first)
            named = host
        }
        let ownHost = URLComponents(string: origin)?.host ?? "localhost"
        var aliases = [named ?? ownHost]
        if !aliases.contains(ownHost) { aliases.append(ownHost) }
        let route = PolicyRoute(tenantSegment: tenant, policy: nil, placement: .none)
        let body = JSONText.object([
            ("tenant_discovery_endpoint", .string(route.url(origin: origin, for: .discovery))),
            ("api-version", .string(query.nonEmpty("api-version") ?? "1.1")),
            (
                "metadata",
                .array([
                    .object([
                        ("preferred_network", .string(aliases[0])), ("preferred_cache", .string(aliases[0])),
                        ("aliases", .array(aliases.map(JSONText.string))),
                    ])
                ])
            ),
        ])
        var response = Response.json(body)
        response.headers[.cacheControl] = "public, max-age=3600"
        return response
    }
}

/// `GET {base}/error?code=N`: the page Entra's `error_uri` points at (SPEC §2.9).
struct EntraErrorPage: Sendable {
    let pages: PageRenderer

    @Sendable func handle(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let code = RequestParameters(query: request.uri.query).nonEmpty("code").flatMap { Int($0) }
        guard let code, (0...99_999_999).contains(code) else { throw HTTPError(.notFound) }
        let values: [String: Any] = [
            "title": "Error AADSTS\(code)",
            "message":
                "The Microsoft identity platform reports this condition as AADSTS\(code). The error_description your application received says what went wrong, with its trace and correlation ids.",
            "code": "AADSTS\(code)",
        ]
        return .html(try pages.render(.error, values, tenant: nil))
    }
}
