import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import Storage

/// The identity service's dependencies, built once by ``IdentityServer/make(configuration:database:dataKey:clock:logger:)``
/// and shared by the controllers that need most of them (the interactive flow and the token grants).
struct IdentityService: Sendable {
    let configuration: IdentityServerConfiguration
    let clock: any IdentityClock
    let tenants: any TenantDirectory
    let users: any UserDirectory
    let grants: any GrantStore
    let interactions: any InteractionStore
    let consents: any ConsentStore
    let secondFactors: any SecondFactorStore
    /// The tenants' custom policies (SPEC §2.12).
    let customPolicies: CustomPolicyLibrary
    /// The tenants' policy key sets.
    let policyKeySets: PolicyKeySetLibrary
    /// Calls the tenants' API connectors.
    let connectors: ConnectorCaller
    /// Federation with the tenants' upstream OpenID Connect providers.
    let upstream: UpstreamOIDC
    /// Seals what leaves the database (an export's password hashes) as it seals what is in it.
    let dataKey: DataKey
    let keys: SigningKeyRing
    let hasher: PasswordHasher
    let pages: PageRenderer
    let issuer: TokenIssuer
    /// Which request hosts are trusted for URLs and issuers, from ``configuration``.
    let hosts: HostPolicy
    /// Faults armed through the test-control surface (`/dev/faults`).
    let faults = FaultInjector()

    var now: Date { clock.now }

    var passwords: PasswordAuthenticator {
        PasswordAuthenticator(users: users, hasher: hasher, lockout: configuration.lockout, secrets: interactions, clock: clock)
    }

    func origin(of request: Request) -> String { hosts.origin(of: request) }
    func isAllowedHost(_ request: Request) -> Bool { hosts.isAllowedHost(request) }
    func issuer(origin: String, tenant: Tenant, face: ProtocolFace = .b2c) -> String {
        HostPolicy.issuer(origin: origin, tenant: tenant, face: face)
    }

    /// The flow a policy-less (Entra) request runs for `client`: its app-bound user flow
    /// (External ID, SPEC §2.9), else the tenant's default that the route resolved.
    func entraFlow(for client: AppRegistration, resolved: UserFlow) async throws -> UserFlow {
        guard let name = client.userFlow, name.lowercased() != resolved.name.lowercased() else { return resolved }
        guard let flow = try await tenants.userFlow(tenantID: client.tenantID, name: name) else {
            throw ProtocolFailure.unknownPolicy(name, tenant: client.tenantID.uuidString.lowercased())
        }
        return offered(flow)
    }

    /// The flow as this server offers it: without the simulated Facebook unless it is served.
    func offered(_ flow: UserFlow) -> UserFlow {
        guard !configuration.servesSimulatedFacebook, flow.identityProviders.contains(.facebook) else { return flow }
        var offered = flow
        offered.identityProviders.removeAll { $0 == .facebook }
        if offered.identityProviders.isEmpty { offered.identityProviders = [.local] }
        return offered
    }
}
