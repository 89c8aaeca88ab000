import Foundation
import Hummingbird
import TodoModels
import WireCoding

/// `GET /{tenant}/oauth2/authresp`, B2C's federation callback (its redirect URI at every
/// provider): an upstream OpenID Connect provider's answer, found by its one-time `state`, or
/// else the simulated Facebook's.
struct UpstreamFederation: Sendable {
    let service: IdentityService
    let simulatedFacebook: SimulatedFacebook
    var flow: InteractionFlow { InteractionFlow(service: service) }

    static func callback(for record: InteractionRecord) -> String {
        PolicyRoute(tenantSegment: record.request.tenantSegment, policy: nil, placement: .none).url(
            origin: record.request.origin, for: .federationCallback)
    }

    @Sendable func callback(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let query = RequestParameters(query: request.uri.query)
        guard let state = query.nonEmpty("state"), state.count <= 128,
            let upstream = try await service.upstream.requests.take(stateHash: Secrets.sha256Hex(state), now: service.now)
        else { return try await simulatedFacebook.callback(request, context: context) }
        let record = try await flow.interaction(upstream.interactionID)
        let tenant = try await flow.callbackTenant(of: record, request: request, context: context)
        let (_, userFlow) = try await flow.tenantAndFlow(of: record)
        guard let provider = tenant.upstreamProvider(named: upstream.provider), userFlow.identityProviders.contains(provider.kind) else {
            throw PageError(status: .badRequest, title: "Not available", message: "This identity provider is not offered here.")
        }
        if query["error"] == "access_denied" { return try await flow.fail(record, with: .userCancelled, context: context) }
        guard query["error"] == nil, let code = query.nonEmpty("code") else {
            let failure = UpstreamOIDC.Failure(
                message:
                    "Error: \(TextRules.printable(query["error"] ?? "no code")),Error Description: \(TextRules.printable(query["error_description"] ?? ""))"
            )
            return try await flow.fail(record, with: failure.b2cError, context: context)
        }
        let identity: FederatedIdentity
        do {
            identity = try await service.upstream.redeem(
                code: code, provider: provider, tenant: tenant, request: upstream, callback: Self.callback(for: record), now: service.now)
        } catch let failure as UpstreamOIDC.Failure {
            context.logger.warning("upstream sign-in refused", metadata: ["provider": "\(provider.name)", "reason": "\(failure.message)"])
            return try await flow.fail(record, with: failure.b2cError, context: context)
        }
        context.logger.info("upstream sign-in", metadata: ["provider": "\(provider.name)", "idp": "\(provider.issuer)"])
        return try await flow.finishFederated(
            identity, record: record, tenant: tenant, userFlow: userFlow, request: request, context: context)
    }
}
