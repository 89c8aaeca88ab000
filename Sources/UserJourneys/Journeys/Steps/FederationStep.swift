import Foundation
import Hummingbird
import IdentityDirectory

/// The identity provider the person picked (B2C's `FacebookExchange` or an OpenID Connect
/// provider's claims exchange): the browser goes to the provider, and its answer comes back to
/// the federation callback, which hands the asserted identity to this step.
struct FederationStep: OrchestrationStep {
    let upstream: UpstreamOIDC

    let id = "IdentityProviderExchange"

    func applies(to run: JourneyRun) -> Bool {
        guard run.claims.userID == nil, case .provider = run.claims.selection else { return false }
        return true
    }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        guard case .provider(let name) = run.claims.selection else { return .next }
        // Nothing may be asked of the person: not even the provider's metadata is fetched.
        guard run.authorization.prompt != .silent else { return .fail(.noSession) }
        if name == IdentityProviderKind.facebook.rawValue, run.flow.offersFacebook {
            return .interact(.redirecting(to: SimulatedFacebook.authorizeURL(record: run.record)))
        }
        guard let provider = run.tenant.upstreamProvider(named: name), run.flow.identityProviders.contains(provider.kind) else {
            throw PageError(status: .badRequest, title: "Not available", message: "This identity provider is not offered here.")
        }
        do {
            let url = try await upstream.authorizationURL(
                provider: provider, record: run.record, callback: UpstreamFederation.callback(for: run.record, provider: provider),
                now: run.now)
            return .interact(.redirecting(to: url))
        } catch let failure as UpstreamOIDC.Failure {
            run.logger.warning("upstream provider unusable", metadata: ["provider": "\(provider.name)", "reason": "\(failure.message)"])
            return .fail(failure.b2cError)
        }
    }

    /// The provider's answer: only the provider this journey picked may answer it.
    func receive(_ identity: FederatedIdentity, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard case .provider(let name) = run.claims.selection,
            identity.provider == (run.tenant.upstreamProvider(named: name)?.kind ?? IdentityProviderKind(rawValue: name))
        else { throw JourneyEngine.notThisStep }
        var attributes: [String: String] = [:]
        attributes[UserAttribute.givenName.rawValue] = identity.givenName
        attributes[UserAttribute.surname.rawValue] = identity.surname
        run.claims.federated = FederatedSignUp(
            provider: identity.provider, subject: identity.subject, email: identity.email, displayName: identity.displayName,
            attributes: attributes, connectorCalled: false, emailVerified: identity.emailVerified)
        return .next
    }
}
