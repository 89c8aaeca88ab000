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
            dataKey: service.dataKey, roles: DirectoryRoles(database: database),
            groups: DirectoryGroups(database: database), auditLog: service.directoryAudits)
    }
}

extension IdentityServer {
    /// The tenant's relying-party policies whose JWT issuer cannot sign now (its key set is
    /// missing, or holds no active RSA signing key), with the reason: a sign-in on them ends
    /// with that reason. `serve` warns about each at start, so a store from a build that signed
    /// custom policies with the service key does not fail only at the first sign-in.
    public func unsignablePolicies(tenantID: UUID) async throws -> [(policy: String, reason: String)] {
        var found: [(policy: String, reason: String)] = []
        for stored in try await service.customPolicies.policies(tenantID: tenantID) {
            guard let program = try? await service.customPolicies.program(tenantID: tenantID, id: stored.id), program.relyingParty != nil,
                let keySet = program.tokenSigningKeySet
            else { continue }
            do {
                _ = try await service.policyKeySets.signingKey(tenantID: tenantID, keySet: keySet)
            } catch let missing as PolicyKeySetError {
                found.append((stored.id, missing.message))
            }
        }
        return found
    }
}
