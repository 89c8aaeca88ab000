import CryptoExtras
import Foundation
import Hummingbird
import IdentityDirectory
import JOSE
import Logging
import Storage
import UserJourneys

/// The identity service: an Azure AD B2C-compatible OpenID Connect provider.
///
/// Built once per process (and per test) by ``make(configuration:database:dataKey:clock:logger:)``,
/// which runs the schema migrations; ``buildRouter()`` (IdentityRoutes.swift) gives the HTTP surface.
public final class IdentityServer: Sendable {
    public let configuration: IdentityServerConfiguration
    public let clock: any IdentityClock
    let tenants: any TenantDirectory
    let users: any UserDirectory
    let grants: any GrantStore
    let keys: SigningKeyRing
    let hasher: PasswordHasher
    let service: IdentityService
    let logger: Logger
    /// For work that must run once across instances sharing it (seeding).
    let database: any Database
    /// The admin console's templates, read once.
    let consolePages: ConsolePages

    private init(service: IdentityService, database: any Database, consolePages: ConsolePages, logger: Logger) {
        self.database = database
        self.consolePages = consolePages
        self.service = service
        self.configuration = service.configuration
        self.clock = service.clock
        self.tenants = service.tenants
        self.users = service.users
        self.grants = service.grants
        self.keys = service.keys
        self.hasher = service.hasher
        self.logger = logger
    }

    /// - Parameter dataKey: seals signing keys and server secrets in the database; every
    ///   instance sharing `database` needs the same one.
    public static func make(
        configuration: IdentityServerConfiguration, database: any Database, dataKey: DataKey, clock: (any IdentityClock)? = nil,
        logger: Logger
    ) async throws -> IdentityServer {
        // Where the test-control surface is on, its clock can be moved forward (`/dev/clock`).
        let clock = clock ?? (configuration.developmentMailbox ? AdjustableClock() : SystemClock())
        try await migrate(database, logger: logger)
        let keys = SigningKeyRing(database: database, dataKey: dataKey, clock: clock, keyBits: configuration.signingKeyBits)
        let policyKeySets = PolicyKeySetLibrary(database: database, dataKey: dataKey, clock: clock)
        let service = IdentityService(
            configuration: configuration, clock: clock, tenants: CachedTenantDirectory(SQLTenantDirectory(database: database)),
            users: SQLUserDirectory(database: database), grants: SQLGrantStore(database: database, dataKey: dataKey),
            interactions: SQLInteractionStore(database: database, dataKey: dataKey), consents: SQLConsentStore(database: database),
            secondFactors: SQLSecondFactorStore(database: database, dataKey: dataKey),
            customPolicies: CustomPolicyLibrary(database: database, clock: clock),
            policyKeySets: policyKeySets,
            signInLog: SignInLog(database: database, retention: configuration.logRetention),
            directoryAudits: DirectoryAuditLog(database: database, retention: configuration.logRetention),
            connectors: ConnectorCaller(dataKey: dataKey),
            upstream: UpstreamOIDC(
                directory: UpstreamDirectory(),
                requests: SQLUpstreamRequestStore(database: database, dataKey: dataKey), dataKey: dataKey),
            dataKey: dataKey,
            keys: keys,
            hasher: PasswordHasher(cost: configuration.passwordHashCost), pages: try PageRenderer(),
            issuer: TokenIssuer(keys: keys, policyKeys: policyKeySets, signer: SigningThreads(), groups: DirectoryGroups(database: database)), hosts: HostPolicy(configuration: configuration))
        return IdentityServer(service: service, database: database, consolePages: try ConsolePages(), logger: logger)
    }

    /// Brings `database` to this build's identity schema (for tools that restore a backup).
    public static func migrate(_ database: any Database, logger: Logger) async throws {
        try await IdentityMigrations.runner.run(on: database, logger: logger)
        try await IdentityMigrations.fillSkeletons(database, logger: logger)
    }

    /// RS256 signatures per second on one thread with the signer tokens are made with
    /// (``RS256Signer``, RSA-2048), and which library that is, for `todo-server crypto-cost` and
    /// the benchmarks' baselines.
    public static func measureSigningRate(count: Int = 500) throws -> (rate: Double, library: String) {
        let signer = RS256Signer(try _RSA.Signing.PrivateKey(keySize: .bits2048))
        let message = Array(String(repeating: "x", count: 900).utf8)
        _ = try signer.signature(for: message)
        let elapsed = try ContinuousClock().measure {
            for _ in 0..<count { _ = try signer.signature(for: message) }
        }
        return (Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18), signer.library)
    }

    /// Removes expired codes, tokens, transactions and sessions.
    public func sweep() async throws {
        _ = try await service.grants.sweep(now: clock.now)
        try await service.interactions.sweep(now: clock.now)
    }

    public func shutdown() async throws {
        // The sign-in records still queued are written first (the database closes after this),
        // within a bound: a database that is gone must not hold the exit.
        _ = try? await withDeadline(.seconds(5), "sign-in log") { [service] in await service.signIns.log.flushed() }
        // Both pools stop whatever the other one says.
        var hashing: (any Error)?
        do { try await hasher.shutdown() } catch { hashing = error }
        try await service.issuer.signer.shutdown()
        if let hashing { throw hashing }
    }

    /// Messages in the development outbox, newest first.
    public func outbox(tenantID: UUID, limit: Int = 50) async throws -> [OutboxMessage] {
        try await service.interactions.outbox(tenantID: tenantID, limit: limit)
    }
}
