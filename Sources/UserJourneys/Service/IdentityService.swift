import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import Storage

/// The identity service's dependencies, built once by ``IdentityServer/make(configuration:database:dataKey:clock:logger:)``
/// and shared by the controllers that need most of them (the interactive flow and the token grants).
package struct IdentityService: Sendable {
    package let configuration: IdentityServerConfiguration
    package let clock: any IdentityClock
    package let tenants: any TenantDirectory
    package let users: any UserDirectory
    package let grants: any GrantStore
    package let interactions: any InteractionStore
    package let consents: any ConsentStore
    package let secondFactors: any SecondFactorStore
    /// The tenants' custom policies (SPEC §2.12).
    package let customPolicies: CustomPolicyLibrary
    /// The tenants' policy key sets.
    package let policyKeySets: PolicyKeySetLibrary
    /// The clients that present policy certificates (a REST profile's `ClientCertificate`).
    package let certificateClients: ClientCertificateClients
    /// The sign-in log (SPEC §2.13).
    package let signIns: SignInRecorder
    /// The audit log of admin changes (SPEC §2.13), written by ``IdentityAdministration``.
    package let directoryAudits: DirectoryAuditLog
    /// Calls the tenants' API connectors.
    package let connectors: ConnectorCaller
    /// Federation with the tenants' upstream OpenID Connect providers.
    let upstream: UpstreamOIDC
    /// Seals what leaves the database (an export's password hashes) as it seals what is in it.
    package let dataKey: DataKey
    package let keys: SigningKeyRing
    package let hasher: PasswordHasher
    package let pages: PageRenderer
    package let issuer: TokenIssuer
    /// Which request hosts are trusted for URLs and issuers, from ``configuration``.
    package let hosts: HostPolicy
    /// Faults armed through the test-control surface (`/dev/faults`).
    package let faults = FaultInjector()

    package var now: Date { clock.now }

    /// The tenants' custom authentication extensions, called with tokens of this issuer.
    package var extensions: ExtensionCall { ExtensionCall(issuer: issuer) }

    var passwords: PasswordAuthenticator {
        PasswordAuthenticator(users: users, hasher: hasher, lockout: configuration.lockout, secrets: interactions, clock: clock)
    }

    package func origin(of request: Request) -> String { hosts.origin(of: request) }
    func isAllowedHost(_ request: Request) -> Bool { hosts.isAllowedHost(request) }
    func issuer(origin: String, tenant: Tenant, face: ProtocolFace = .b2c) -> String {
        HostPolicy.issuer(origin: origin, tenant: tenant, face: face)
    }

    /// The flow a policy-less (Entra) request runs for `client`: its app-bound user flow
    /// (External ID, SPEC §2.9), else the tenant's default that the route resolved.
    package func entraFlow(for client: AppRegistration, resolved: UserFlow) async throws -> UserFlow {
        guard let name = client.userFlow, name.lowercased() != resolved.name.lowercased() else { return resolved }
        guard let flow = try await tenants.userFlow(tenantID: client.tenantID, name: name) else {
            throw ProtocolFailure.unknownPolicy(name, tenant: client.tenantID.uuidString.lowercased())
        }
        return offered(flow)
    }

    /// The flow as this server offers it: without the simulated Facebook unless it is served.
    package func offered(_ flow: UserFlow) -> UserFlow {
        guard !configuration.servesSimulatedFacebook, flow.identityProviders.contains(.facebook) else { return flow }
        var offered = flow
        offered.identityProviders.removeAll { $0 == .facebook }
        if offered.identityProviders.isEmpty { offered.identityProviders = [.local] }
        return offered
    }

    package init(
        configuration: IdentityServerConfiguration,
        clock: any IdentityClock,
        tenants: any TenantDirectory,
        users: any UserDirectory,
        grants: any GrantStore,
        interactions: any InteractionStore,
        consents: any ConsentStore,
        secondFactors: any SecondFactorStore,
        customPolicies: CustomPolicyLibrary,
        policyKeySets: PolicyKeySetLibrary,
        signInLog: SignInLog,
        directoryAudits: DirectoryAuditLog,
        connectors: ConnectorCaller,
        upstream: UpstreamOIDC,
        dataKey: DataKey,
        keys: SigningKeyRing,
        hasher: PasswordHasher,
        pages: PageRenderer,
        issuer: TokenIssuer,
        hosts: HostPolicy
    ) {
        self.configuration = configuration
        self.clock = clock
        self.tenants = tenants
        self.users = users
        self.grants = grants
        self.interactions = interactions
        self.consents = consents
        self.secondFactors = secondFactors
        self.customPolicies = customPolicies
        self.policyKeySets = policyKeySets
        self.certificateClients = ClientCertificateClients(extraTrust: configuration.outboundCACertificatePath)
        self.signIns = SignInRecorder(log: signInLog, tenants: tenants, users: users)
        self.directoryAudits = directoryAudits
        self.connectors = connectors
        self.upstream = upstream
        self.dataKey = dataKey
        self.keys = keys
        self.hasher = hasher
        self.pages = pages
        self.issuer = issuer
        self.hosts = hosts
    }
}
