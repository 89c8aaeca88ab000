import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import Logging
import ServerSupport
import WireCoding

/// A local stand-in for facebook.com, so `B2C_1_facebook` and `domain_hint=facebook.com` work
/// with no network (SPEC §2.7). It speaks the same shape as the real exchange: B2C redirects to
/// the provider's dialog, the provider redirects back to `{tenant}/oauth2/authresp` with a code,
/// and B2C turns the asserted identity into a stub account with its own object id
/// (https://github.com/MicrosoftDocs/azure-docs/issues/48396).
package struct SimulatedFacebook: Sendable {
    let service: IdentityService
    let journeys: JourneyEngine

    static let dialogPath = "/facebook.com/dialog/oauth"

    static let notOffered = PageError(status: .badRequest, title: "Not available", message: "This sign-in does not offer Facebook.")

    /// The simulated provider answers only requests that name this machine and came straight
    /// from it: a `Host` that came through a proxy or a DNS name pointing here gets nothing, nor
    /// does a request a local reverse proxy forwarded (its `Host` may well say 127.0.0.1) (the
    /// second outside attack's F-2).
    static func requireLoopback(_ request: Request) throws {
        let forwarded = ["Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP"].contains { name in
            HTTPField.Name(name).map { request.headers[$0] != nil } ?? false
        }
        guard Loopback.isAuthority(request.head.authority ?? ""), !forwarded else {
            throw PageError(
                status: .forbidden, title: "Not available",
                message: "The simulated Facebook answers on this machine only (localhost, 127.0.0.1 or [::1]).")
        }
    }

    static func authorizeURL(record: InteractionRecord) -> String {
        let callback = PolicyRoute(tenantSegment: record.request.tenantSegment, policy: nil, placement: .none).url(
            origin: record.request.origin, for: .federationCallback(provider: nil))
        let query = FormEncoding.encode([
            ("client_id", "todob2c-simulated"), ("redirect_uri", callback), ("state", record.id), ("response_type", "code"),
            ("scope", "email public_profile"),
        ])
        return "\(record.request.origin)\(dialogPath)?\(query)"
    }

    /// The callback must be this service's own `…/oauth2/authresp` on the request's origin, so the
    /// simulated provider cannot be used as an open redirector.
    private func checkedCallback(_ value: String?, request: Request) throws -> String {
        guard let value, let url = URLComponents(string: value),
            "\(url.scheme ?? "")://\(url.host ?? "")\(url.port.map { ":\($0)" } ?? "")" == service.origin(of: request),
            url.path.lowercased().hasSuffix("/oauth2/authresp"), url.query == nil
        else {
            throw PageError(status: .badRequest, title: "Invalid request", message: "The redirect_uri is not this service's callback.")
        }
        return value
    }

    /// `GET|POST /facebook.com/dialog/oauth`.
    /// Errors are pages, written by the route group's ``PageErrorMiddleware``.
    @Sendable package func dialog(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try Self.requireLoopback(request)
        let query = RequestParameters(query: request.uri.query)
        var form = RequestParameters(pairs: [])
        if request.method == .post { form = try await FormBody.read(request, context: context) }
        let parameters = request.method == .post ? form : query
        let callback = try checkedCallback(parameters["redirect_uri"], request: request)
        let record = try await journeys.transaction(parameters["state"])
        let (tenant, userFlow) = try await service.tenantAndFlow(of: record)
        guard userFlow.offersFacebook else { throw Self.notOffered }
        try TransactionCookies.requireStartingBrowser(request, record: record)
        if request.method == .get {
            let values: [String: Any] = [
                "title": "Log in to Facebook (simulated)", "action": Self.dialogPath, "state": record.id,
                "redirectURI": callback, "csrf": request.cookies[TransactionCookies.csrf]?.value ?? "",
                "email": record.request.loginHint ?? "", "name": "",
            ]
            return .html(try service.pages.render(.facebook, values, tenant: tenant))
        }
        guard TransactionCookies.checkCSRF(request: request, form: form, record: record) else {
            throw PageError(
                status: .forbidden, title: "Request blocked",
                message: "The form could not be verified. Start again from the application.")
        }
        if form["cancel"] == "1" {
            return .redirecting(
                to: callback + "?"
                    + FormEncoding.encode([("error", "access_denied"), ("error_reason", "user_denied"), ("state", record.id)]))
        }
        let email = (form["email"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let name = (form["name"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard let address = EmailAddress(email), case .success(let validName) = UserAttribute.displayName.validate(name),
            !validName.isEmpty
        else {
            let values: [String: Any] = [
                "title": "Log in to Facebook (simulated)", "action": Self.dialogPath, "state": record.id,
                "redirectURI": callback, "csrf": form["csrf_token"] ?? "", "email": email, "name": name,
                "error": "Enter an email address and a name.",
            ]
            return .html(try service.pages.render(.facebook, values, tenant: tenant), status: .badRequest)
        }
        let parts = validName.split(separator: " ", maxSplits: 1).map(String.init)
        let identity = FederatedIdentity(
            provider: .facebook, subject: Self.facebookID(for: address), email: address.display, displayName: validName,
            givenName: parts.first, surname: parts.count > 1 ? parts[1] : nil)
        let code = Secrets.randomToken()
        try await service.interactions.saveFederationCode(
            code, interactionID: record.id, identity: identity, expiresAt: service.now.addingTimeInterval(300))
        return .redirecting(to: callback + "?" + FormEncoding.encode([("code", code), ("state", record.id)]))
    }

    /// A stable numeric id per simulated Facebook account, like Facebook's app-scoped ids.
    static func facebookID(for email: EmailAddress) -> String {
        let digest = SHA256.hash(data: Data(email.canonical.utf8))
        let number = digest.prefix(7).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return String(number)
    }

    /// `GET /{tenant}/oauth2/authresp`: the provider's answer.
    @Sendable func callback(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        guard service.configuration.servesSimulatedFacebook else { throw Self.notOffered }
        try Self.requireLoopback(request)
        let query = RequestParameters(query: request.uri.query)
        let record = try await journeys.transaction(query["state"])
        let tenant = try await service.callbackTenant(of: record, request: request, context: context)
        let (_, userFlow) = try await service.tenantAndFlow(of: record)
        guard userFlow.offersFacebook else { throw Self.notOffered }
        if query["error"] != nil { return try await journeys.fail(record, with: .userCancelled, context: context) }
        guard let code = query.nonEmpty("code"), let taken = try await service.interactions.takeFederationCode(code, now: service.now),
            taken.interactionID == record.id
        else {
            throw PageError(
                status: .badRequest, title: "Sign-in failed", message: "The identity provider's answer is not valid or has expired.")
        }
        var identity = taken.identity
        // Graph's `/me` fields by their names (`id`, `name`, `first_name`, `last_name`, `email`),
        // which a custom policy's Facebook profile maps by `PartnerClaimType`.
        var graph = ["id": identity.subject, "name": identity.displayName]
        graph["first_name"] = identity.givenName
        graph["last_name"] = identity.surname
        graph["email"] = identity.email
        identity.claims = graph
        return try await journeys.receive(identity, record: record, tenant: tenant, flow: userFlow, request: request, context: context)
    }

    package init(service: IdentityService, journeys: JourneyEngine) {
        self.service = service
        self.journeys = journeys
    }
}
