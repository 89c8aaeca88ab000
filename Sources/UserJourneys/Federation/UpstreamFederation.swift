import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import TrustFramework
import WireCoding

/// `GET /{tenant}/oauth2/authresp`, B2C's federation callback (its redirect URI at every
/// provider): an upstream OpenID Connect provider's answer, found by its one-time `state`, or
/// else the simulated Facebook's.
package struct UpstreamFederation: Sendable {
    let service: IdentityService
    let simulatedFacebook: SimulatedFacebook
    let journeys: JourneyEngine

    /// The callback `provider`'s answers come back to: its own path, which its authorization
    /// request and code redemption both name.
    static func callback(for record: InteractionRecord, provider: UpstreamProvider) -> String {
        PolicyRoute(tenantSegment: record.request.tenantSegment, policy: nil, placement: .none).url(
            origin: record.request.origin, for: .federationCallback(provider: provider.name))
    }

    @Sendable package func callback(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let pathProvider = context.parameters.get("provider")
        let query: RequestParameters
        if request.method == .post, let pathProvider {
            // `response_mode` `form_post` (OAuth 2.0 Form Post Response Mode): the provider's page
            // posts the answer here. From another site that is a cross-site POST, which carries
            // no SameSite=Lax cookie; the answer is posted once more from this origin (a
            // same-site POST, which does), and only then is the one-time state spent.
            query = try await FormBody.read(request, context: context, upTo: 64 * 1024)
            if request.cookies[TransactionCookies.csrf] == nil {
                // Relayed once already and still no cookie: another browser's answer. Refused
                // before the state is looked up, so such a post cannot spend a sign-in's state.
                guard query["relayed"] == nil else {
                    throw PageError(
                        status: .forbidden, title: "Request blocked",
                        message: "This sign-in was started in another browser. Start again from the application.")
                }
                let fields = ["state", "id_token", "code", "error", "error_description", "iss"].compactMap { name in
                    query[name].map { (name, $0) }
                }
                // The callback's own path, made from the route's values: never the raw request
                // path, which a `//host/…` form would turn into another site's address.
                let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
                let segment = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }
                let action = "/\(segment(context.parameters.get("tenant") ?? ""))/oauth2/authresp/\(segment(pathProvider))"
                return RedirectResponder.respond(redirectURI: action, mode: .formPost, parameters: fields + [("relayed", "1")])
            }
        } else {
            query = RequestParameters(query: request.uri.query)
        }
        guard let state = query.nonEmpty("state"), state.count <= 128,
            let upstream = try await service.upstream.requests.take(stateHash: Secrets.sha256Hex(state), now: service.now)
        else {
            if pathProvider == nil { return try await simulatedFacebook.callback(request, context: context) }
            throw PageError(
                status: .badRequest, title: "Session expired",
                message: "This sign-in has expired or is not valid. Return to the application and start again.")
        }
        let record = try await journeys.transaction(upstream.interactionID)
        let tenant = try await service.callbackTenant(of: record, request: request, context: context)
        let (_, userFlow) = try await service.tenantAndFlow(of: record)
        let provider: UpstreamProvider
        do {
            guard let offered = try await service.federationProvider(named: upstream.provider, tenant: tenant, flow: userFlow) else {
                throw PageError(status: .badRequest, title: "Not available", message: "This identity provider is not offered here.")
            }
            provider = offered
        } catch PolicyProfileFailure.protocolFailure(let failure) {
            return try await journeys.fail(record, with: failure, context: context)
        }
        // Mix-up defence (RFC 9700 §4.4): the answer must come back on the callback of the
        // provider the state was issued for, which must still be the issuer it was sent to; and
        // where the provider names itself (RFC 9207 `iss`), it must be that issuer. Otherwise a
        // code another provider issued would be redeemed at this one, which then holds it.
        if let mismatch = try await mixUp(
            provider: provider, recorded: upstream, pathProvider: pathProvider, iss: query["iss"], context: context)
        {
            return try await journeys.fail(record, with: UpstreamOIDC.Failure(message: mismatch).b2cError, context: context)
        }
        if query["error"] == "access_denied" { return try await journeys.fail(record, with: .userCancelled, context: context) }
        // What the request asked for: an ID token in the posted form (`response_types` `id_token`),
        // else a code; never the other one, and never an ID token from a query.
        let wanted = provider.answersWithIDToken ? "id_token" : "code"
        guard query["error"] == nil, let credential = query.nonEmpty(wanted), wanted == "code" || request.method == .post else {
            let missing = provider.answersWithIDToken ? "no id_token was posted" : "no code"
            let failure = UpstreamOIDC.Failure(
                message:
                    "Error: \(TextRules.printable(query["error"] ?? missing)),Error Description: \(TextRules.printable(query["error_description"] ?? ""))"
            )
            return try await journeys.fail(record, with: failure.b2cError, context: context)
        }
        let identity: FederatedIdentity
        do {
            identity =
                provider.answersWithIDToken
                ? try await service.upstream.postedIdentity(idToken: credential, provider: provider, request: upstream, now: service.now)
                : try await service.upstream.redeem(
                    code: credential, provider: provider, tenant: tenant, request: upstream, callback: Self.callback(for: record, provider: provider),
                    now: service.now)
        } catch let failure as UpstreamOIDC.Failure {
            context.logger.warning("upstream sign-in refused", metadata: ["provider": "\(provider.name)", "reason": "\(failure.message)"])
            return try await journeys.fail(record, with: failure.b2cError, context: context)
        }
        context.logger.info("upstream sign-in", metadata: ["provider": "\(provider.name)", "idp": "\(provider.issuer)"])
        var answer = identity
        answer.via = upstream.provider
        return try await journeys.receive(answer, record: record, tenant: tenant, flow: userFlow, request: request, context: context)
    }

    /// Why this answer cannot be the recorded provider's, or nil when it is.
    private func mixUp(
        provider: UpstreamProvider, recorded: UpstreamRequest, pathProvider: String?, iss: String?, context: IdentityRequestContext
    ) async throws -> String? {
        let reason: String?
        if pathProvider?.lowercased() != provider.name.lowercased() {
            reason = "the answer came back on another provider's callback"
        } else if recorded.issuer != provider.issuer {
            reason = "the provider's issuer changed during the sign-in"
        } else if provider.oauth2 != nil {
            // A plain OAuth 2.0 provider has no issuer to name (RFC 9207 needs its metadata): its
            // own callback path and one-time state are what bind the answer to it.
            reason = nil
        } else if let iss {
            // A multi-tenant provider names the signing-in user's tenant; the ID token's checks
            // then hold it to the accepted ones.
            let accepted = iss == provider.issuer || (provider.validIssuerPrefixes ?? []).contains { !$0.isEmpty && iss.hasPrefix($0) }
            reason = accepted ? nil : "the answer names issuer \(TextRules.printable(iss)), not \(provider.issuer)"
        } else if (try? await service.upstream.metadata(of: provider))?.issuerInResponse == true {
            // RFC 9207 §2.4: a provider that says it sends `iss` must send it.
            reason = "the answer has no iss though the provider sends one"
        } else {
            reason = nil
        }
        if let reason {
            context.logger.warning("upstream answer refused", metadata: ["provider": "\(provider.name)", "reason": "\(reason)"])
        }
        return reason
    }

    package init(service: IdentityService, simulatedFacebook: SimulatedFacebook, journeys: JourneyEngine) {
        self.service = service
        self.simulatedFacebook = simulatedFacebook
        self.journeys = journeys
    }
}

extension IdentityService {
    /// The tenant and flow of a transaction a provider's answer names: a user flow, or a custom
    /// policy (`B2C_1A_…`) as the flow it runs as.
    func tenantAndFlow(of record: InteractionRecord) async throws -> (Tenant, UserFlow) {
        let gone = PageError(status: .notFound, title: "Not found", message: "The user flow no longer exists.")
        guard let tenant = try await tenants.tenant(matching: record.request.tenantID.uuidString) else { throw gone }
        if let flow = try await tenants.userFlow(tenantID: tenant.id, name: record.request.policy) { return (tenant, offered(flow)) }
        guard CustomPolicyID.names(record.request.policy),
            let policy = try await customPolicies.program(tenantID: tenant.id, id: record.request.policy)
        else { throw gone }
        return (tenant, offered(UserFlow(customPolicy: policy, tenantID: tenant.id)))
    }

    /// The provider `name` of `flow`: a declared provider the flow offers, or the custom policy's
    /// OpenID Connect profile of that id. Nil when the flow offers no such provider.
    func federationProvider(named name: String, tenant: Tenant, flow: UserFlow) async throws -> UpstreamProvider? {
        if let program = flow.customPolicy {
            guard let profile = program.policy.profile(name), PolicyFederation.isFederation(profile) else { return nil }
            return try await PolicyFederation(upstream: upstream, keySets: policyKeySets, dataKey: dataKey).provider(profile, tenant: tenant)
        }
        guard let provider = tenant.upstreamProvider(named: name), flow.identityProviders.contains(provider.kind) else { return nil }
        return provider
    }

    /// The tenant of a federation callback (`/{tenant}/oauth2/authresp`), which must be the
    /// transaction's, reached by the browser that started the transaction.
    func callbackTenant(of record: InteractionRecord, request: Request, context: IdentityRequestContext) async throws -> Tenant {
        let tenant = try await tenants.resolveSegment(PolicyResolver.decoded(context.parameters.get("tenant") ?? ""))
        guard tenant.id == record.request.tenantID else {
            throw PageError(status: .badRequest, title: "Invalid request", message: "The callback does not match the sign-in.")
        }
        try TransactionCookies.requireStartingBrowser(request, record: record)
        return tenant
    }
}
