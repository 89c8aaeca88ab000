import Foundation
import Hummingbird
import IdentityDirectory
import JOSE
import Logging
import TrustFramework
import UserJourneys
import WireCoding

/// `GET …/oauth2/v2.0/logout` (https://learn.microsoft.com/azure/active-directory-b2c/openid-connect#send-a-sign-out-request): ends the SSO session and returns
/// to `post_logout_redirect_uri` with `state`, or shows the signed-out page.
///
/// Stricter than B2C on one point, by choice: the return URI must be registered — for the app
/// named by `id_token_hint` (or `client_id`), or else for some app of the tenant — so logout can
/// never serve as an open redirector (RFC 9700 §4.11).
struct LogoutEndpoint: Sendable {
    let tenants: any TenantDirectory
    let sessions: any InteractionStore
    let keys: SigningKeyRing
    /// The tenant's custom policies sign with their own key sets: a hint they signed counts too.
    let policyKeys: PolicyKeySetLibrary
    let pages: PageRenderer
    let cookies: BrowserCookies
    let clock: any IdentityClock

    /// Errors are pages, written by the route group's ``PageErrorMiddleware``.
    @Sendable func handle(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        var parameters = RequestParameters(query: request.uri.query)
        if request.method == .post { parameters = try await FormBody.read(request, context: context) }
        let tenant = context.tenant
        // The return URI is checked first, so a bad one is refused before anything else.
        let target = parameters.nonEmpty("post_logout_redirect_uri")
        if let target, try await !isAllowed(target, parameters: parameters, tenant: tenant, flow: context.flow) {
            throw ProtocolFailure.postLogoutRedirectInvalid(target)
        }
        let cookieName = TransactionCookies.singleSignOn(for: tenant)
        // The browser may hold several sessions (Entra's account picker, SPEC §2.9): signing
        // out ends them all, as Entra's logout signs out of every account in the browser.
        let ids = SSOCookieValue.ids(request.cookies[cookieName]?.value)
        if let id = ids.first, let session = try await sessions.session(idHash: Secrets.sha256Hex(id), now: clock.now) {
            // A GET is a link any page can make a browser follow (the SSO cookie is SameSite=Lax):
            // without an ID token of this very session's user, the user confirms first
            // (OpenID Connect RP-Initiated Logout 1.0 §2: the OP should ask when it cannot tell
            // the request came from the user's app). The confirmation is a POST, which a
            // cross-site form cannot send with the cookie.
            if request.method == .get, try await hintSubject(parameters, tenant: tenant, flow: context.flow) != session.userID.uuidString.lowercased() {
                return try confirmation(request, parameters: parameters, tenant: tenant)
            }
            for id in ids { try await sessions.deleteSession(idHash: Secrets.sha256Hex(id)) }
            context.logger.info("signed out")
        }
        var response: Response
        if let target {
            var location = target
            if let state = parameters["state"] {
                location += (target.contains("?") ? "&" : "?") + FormEncoding.encode([("state", state)])
            }
            response = .redirecting(to: location)
        } else {
            response = .html(try pages.render(.signedOut, ["title": "Signed out"], tenant: tenant))
        }
        response.setCookie(cookies.expired(cookieName))
        return response
    }

    /// Which `id_token_hint`s count: this tenant's, from either face (B2C's issuer ends `/v2.0/`,
    /// Entra's `/v2.0`), expired or not (a hint at logout normally is): only the signature and
    /// the issuer matter. One rule for both uses of the hint.
    static func hintPolicy(_ tenant: Tenant) -> ClaimPolicy {
        let guid = tenant.guid
        return ClaimPolicy(issuers: .matching { $0.hasSuffix("/\(guid)/v2.0/") || $0.hasSuffix("/\(guid)/v2.0") }, checksExpiry: false)
    }

    /// The `sub` of a valid `id_token_hint` issued by this tenant, else nil.
    private func hintSubject(_ parameters: RequestParameters, tenant: Tenant, flow: UserFlow) async throws -> String? {
        guard let hint = parameters.nonEmpty("id_token_hint") else { return nil }
        guard let claims = try await verifiedHint(hint, tenant: tenant, flow: flow) else { return nil }
        // Entra's `sub` is pairwise, so the user is its `oid` (which B2C's tokens carry too,
        // equal to `sub`).
        return (claims.string("oid") ?? claims.subject)?.lowercased()
    }

    /// The hint's claims when one of this tenant's keys signed it: the service's published keys
    /// (a withdrawn key, `keys revoke`, is no longer ours) or, on a custom policy's URL, the key
    /// of the policy's own key set that the hint names (its JWT issuer's `issuer_secret`).
    private func verifiedHint(_ hint: String, tenant: Tenant, flow: UserFlow) async throws -> JWTClaims? {
        var keys = try await self.keys.publishedKeys().map { (kid: $0.kid, key: $0.privateKey.publicKey) }
        if let keySet = flow.customPolicy?.policy.tokenSigningKeySet, let kid = try? RS256.parse(hint).keyID,
            let key = try await policyKeys.verificationKey(tenantID: tenant.id, keySet: keySet, kid: kid)
        {
            keys.append((kid, key))
        }
        return JSONWebToken.verify(hint, publicKeys: keys, policy: Self.hintPolicy(tenant), now: clock.now)
    }

    private func confirmation(_ request: Request, parameters: RequestParameters, tenant: Tenant) throws -> Response {
        let names = ["post_logout_redirect_uri", "state", "client_id", "id_token_hint"]
        let fields = names.compactMap { name in parameters.nonEmpty(name).map { ["name": name, "value": $0] } }
        // The `?p=` URL form names the policy in the query; the POST keeps it there.
        let policy = RequestParameters(query: request.uri.query).nonEmpty("p").map { "?" + FormEncoding.encode([("p", $0)]) } ?? ""
        let values: [String: Any] = [
            "title": "Sign out?", "tenantName": tenant.displayName, "action": request.uri.path + policy, "fields": fields,
        ]
        // The confirmed sign-out ends at the app's page, which `isAllowed` checks on the POST.
        return .html(
            try pages.render(.signOut, values, tenant: tenant), formTargets: [parameters.nonEmpty("post_logout_redirect_uri")].compactMap { $0 })
    }

    private func isAllowed(_ target: String, parameters: RequestParameters, tenant: Tenant, flow: UserFlow) async throws -> Bool {
        var clientID = parameters.nonEmpty("client_id")
        if let hint = parameters.nonEmpty("id_token_hint") {
            guard let claims = try await verifiedHint(hint, tenant: tenant, flow: flow), claims.audience.count == 1
            else { return false }
            clientID = claims.audience[0]
        }
        if let clientID {
            guard let app = try await tenants.application(tenantID: tenant.id, clientID: clientID) else { return false }
            return app.isRegisteredRedirect(target)
        }
        return try await tenants.applications(tenantID: tenant.id).contains { $0.isRegisteredRedirect(target) }
    }
}
