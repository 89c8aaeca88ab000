import Foundation
import IdentityDirectory
import TrustFramework

extension UserFlow {
    /// A custom policy as the flow the protocol endpoints resolve: its name, its token
    /// lifetimes from the JWT issuer's metadata (`token_lifetime_secs`,
    /// `id_token_lifetime_secs`, `refresh_token_lifetime_secs`,
    /// `rolling_refresh_token_lifetime_secs`, B2C's defaults otherwise); everything else comes
    /// from the policy as it runs.
    init(customPolicy policy: CompiledPolicy, tenantID: UUID) {
        let issuer = policy.tokenIssuer
        var lifetimes = TokenLifetimes.default
        func seconds(_ key: String, in range: ClosedRange<Int>) -> Int? {
            issuer?.metadata[key].flatMap(Int.init).map { min(max($0, range.lowerBound), range.upperBound) }
        }
        if let value = seconds("token_lifetime_secs", in: 300...86_400) { lifetimes.accessTokenSeconds = value }
        if let value = seconds("id_token_lifetime_secs", in: 300...86_400) { lifetimes.idTokenSeconds = value }
        if let value = seconds("refresh_token_lifetime_secs", in: 86_400...7_776_000) { lifetimes.refreshTokenSeconds = value }
        if let value = issuer?.metadata["rolling_refresh_token_lifetime_secs"].flatMap(Int.init) {
            lifetimes.slidingWindowSeconds = value == 0 ? nil : min(max(value, 86_400), 31_536_000)
        }
        self.init(
            tenantID: tenantID, name: policy.id, type: .signUpOrSignIn, identityProviders: [.local], signUpAttributes: [],
            applicationClaims: [], lifetimes: lifetimes, emailVerification: true)
        customPolicy = CustomPolicyProgram(policy: policy)
        // A Facebook profile is answered by the simulated Facebook where the server serves it
        // (``IdentityService/offered(_:)`` takes it away otherwise).
        if policy.hasFacebookProfile { identityProviders.append(.facebook) }
    }
}
