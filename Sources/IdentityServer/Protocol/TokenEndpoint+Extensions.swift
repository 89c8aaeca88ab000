import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys

extension TokenEndpoint {
    /// External ID's OnTokenIssuanceStart for tokens issued without a page (a refresh, the
    /// password grant, native authentication): the flow's claims provider's claims, none for
    /// Microsoft Graph's tokens; its failure is the grant's (AADSTS1100001), its reason logged.
    func providedClaims(
        flow: UserFlow, tenant: Tenant, client: AppRegistration, user: UserAccount, scopes: GrantedScopes, request: Request,
        context: some IdentityContext
    ) async throws -> ExtraClaims {
        guard flow.extensions.onTokenIssuanceStart != nil, !scopes.isForMicrosoftGraph else { return ExtraClaims() }
        let caller = ExtensionCaller(
            client: client, issuer: HostPolicy.issuer(origin: hosts.origin(of: request), tenant: tenant, face: .entra),
            correlationID: context.correlationID, clientAddress: context.clientAddress)
        do throws(AuthenticationExtensionFailure) {
            return try await ExtensionCall(issuer: tokens).tokenClaims(boundIn: flow, tenant: tenant, caller: caller, user: user, now: clock.now)
        } catch {
            error.log(to: context.logger)
            throw ProtocolFailure.extensionFailed
        }
    }
}
