import Foundation
import Hummingbird
import Logging
import TodoModels

/// `GET …/oauth2/v2.0/logout` (research/b2c-protocol.md §5.7): ends the SSO session and returns
/// to `post_logout_redirect_uri` with `state`, or shows the signed-out page.
///
/// Stricter than B2C on one point, by choice: the return URI must be registered — for the app
/// named by `id_token_hint` (or `client_id`), or else for some app of the tenant — so logout can
/// never serve as an open redirector (RFC 9700 §4.11).
struct LogoutEndpoint: Sendable {
    let service: IdentityService
    var flow: InteractionFlow { InteractionFlow(service: service) }

    func handle(_ request: Request, context: IdentityRequestContext, path: EndpointPath) async throws -> Response {
        let parameters = RequestParameters(query: request.uri.query)
        let tenant: Tenant
        do {
            (tenant, _) = try await service.resolve(path)
        } catch let error as B2CError {
            return flow.errorPage(PageError(error), tenant: nil, context: context)
        }
        let cookieName = InteractionFlow.ssoCookie(for: tenant)
        if let id = request.cookies[cookieName]?.value, !id.isEmpty {
            try await service.interactions.deleteSession(idHash: Secrets.sha256Hex(id))
            context.logger.info("signed out")
        }
        var response: Response
        if let target = parameters.nonEmpty("post_logout_redirect_uri") {
            guard try await isAllowed(target, parameters: parameters, tenant: tenant) else {
                return flow.errorPage(PageError(B2CError.postLogoutRedirectInvalid(target)), tenant: tenant, context: context)
            }
            var location = target
            if let state = parameters["state"] {
                location += (target.contains("?") ? "&" : "?") + FormEncoding.encode([("state", state)])
            }
            response = .redirecting(to: location)
        } else {
            response = .html(try service.pages.render("signedout", ["title": "Signed out"], tenant: tenant))
        }
        response.setCookie(flow.expiredCookie(cookieName))
        return response
    }

    private func isAllowed(_ target: String, parameters: RequestParameters, tenant: Tenant) async throws -> Bool {
        var clientID = parameters.nonEmpty("client_id")
        if let hint = parameters.nonEmpty("id_token_hint") {
            // The hint may be expired (that is normal at logout); only its signature and issuer matter.
            // Only keys still published verify: a withdrawn key (keys revoke) is no longer ours.
            let keys = try await service.keys.publishedKeys()
            guard let claims = JSONWebToken.verify(hint, keys: keys), let audience = claims["aud"] as? String,
                let issuer = claims["iss"] as? String, issuer.hasSuffix("/\(tenant.guid)/v2.0/")
            else { return false }
            clientID = audience
        }
        if let clientID {
            guard let app = try await service.tenants.application(tenantID: tenant.id, clientID: clientID) else { return false }
            return app.isRegisteredRedirect(target)
        }
        return try await service.tenants.applications(tenantID: tenant.id).contains { $0.isRegisteredRedirect(target) }
    }
}
