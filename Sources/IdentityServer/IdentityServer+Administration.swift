import Foundation
import Storage
import TodoModels
import WireCoding
import IdentityDirectory

extension IdentityServer {
    /// The one door for changing the tenant's directory (``IdentityAdministration``).
    public var administration: IdentityAdministration {
        IdentityAdministration(
            tenants: service.tenants, users: service.users, keys: service.keys, hasher: service.hasher,
            secondFactors: service.secondFactors, customPolicies: service.customPolicies,
            policyKeySets: service.policyKeySets, clock: service.clock,
            dataKey: service.dataKey)
    }
}
