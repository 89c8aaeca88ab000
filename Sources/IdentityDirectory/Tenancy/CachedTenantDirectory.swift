import Foundation
import Synchronization

/// Keeps tenant, flow and app lookups in memory for a few seconds. Every token request reads
/// them, and they change rarely (admin commands, a restart with a new `--tenant-config`), so
/// without this the database would answer the same five questions on every request. Writes
/// through this object clear the cache at once; changes made by another process show up within
/// `timeToLive`.
package final class CachedTenantDirectory: TenantDirectory {
    private let base: any TenantDirectory
    private let timeToLive: Duration
    private let clock = ContinuousClock()
    private let entries = Mutex<Entries>(Entries())
    /// Keys come from requests (the tenant segment of a URL, a `client_id`), and misses are
    /// cached too: without a bound, random values would grow the cache without end.
    static let capacity = 4096

    struct Entries {
        var values: [String: (value: any Sendable, storedAt: ContinuousClock.Instant)] = [:]
        /// Bumped by every write, so a load that started before it cannot store a stale value after it.
        var generation = 0
    }

    package init(_ base: any TenantDirectory, timeToLive: Duration = .seconds(5)) {
        self.base = base
        self.timeToLive = timeToLive
    }

    private func cached<T: Sendable>(_ key: String, _ load: () async throws -> T) async throws -> T {
        let now = clock.now
        let (cachedEntry, generation) = entries.withLock { ($0.values[key], $0.generation) }
        if let entry = cachedEntry, now - entry.storedAt < timeToLive, let value = entry.value as? T {
            return value
        }
        let value = try await load()
        let timeToLive = self.timeToLive
        entries.withLock { entries in
            guard entries.generation == generation else { return }
            if entries.values.count >= Self.capacity {
                entries.values = entries.values.filter { now - $0.value.storedAt < timeToLive }
                if entries.values.count >= Self.capacity { entries.values.removeAll() }
            }
            entries.values[key] = (value, now)
        }
        return value
    }

    package var uncached: any TenantDirectory { base.uncached }

    /// How many lookups are held (for tests).
    var count: Int { entries.withLock { $0.values.count } }

    private func invalidate() {
        entries.withLock {
            $0.values.removeAll()
            $0.generation += 1
        }
    }

    package func tenant(matching segment: String) async throws -> Tenant? {
        try await cached("tenant:\(segment.lowercased())") { try await base.tenant(matching: segment) }
    }

    package func defaultTenant() async throws -> Tenant? {
        try await cached("default-tenant") { try await base.defaultTenant() }
    }

    package func tenants() async throws -> [Tenant] { try await base.tenants() }

    package func userFlow(tenantID: UUID, name: String) async throws -> UserFlow? {
        try await cached("flow:\(tenantID):\(name.lowercased())") { try await base.userFlow(tenantID: tenantID, name: name) }
    }

    package func userFlows(tenantID: UUID) async throws -> [UserFlow] { try await base.userFlows(tenantID: tenantID) }

    package func application(tenantID: UUID, clientID: String) async throws -> AppRegistration? {
        try await cached("app:\(tenantID):\(clientID.lowercased())") { try await base.application(tenantID: tenantID, clientID: clientID) }
    }

    package func applications(tenantID: UUID) async throws -> [AppRegistration] {
        try await cached("apps:\(tenantID)") { try await base.applications(tenantID: tenantID) }
    }

    /// Never cached: a revoked secret must stop working at once.
    package func verifySecret(clientID: UUID, secret: String, now: Date) async throws -> Bool {
        try await base.verifySecret(clientID: clientID, secret: secret, now: now)
    }

    package func save(_ tenant: Tenant, now: Date) async throws {
        defer { invalidate() }
        try await base.save(tenant, now: now)
    }

    package func save(_ flow: UserFlow) async throws {
        defer { invalidate() }
        try await base.save(flow)
    }

    package func removeUserFlow(tenantID: UUID, name: String) async throws -> Bool {
        defer { invalidate() }
        return try await base.removeUserFlow(tenantID: tenantID, name: name)
    }

    package func save(_ application: AppRegistration, now: Date) async throws {
        defer { invalidate() }
        try await base.save(application, now: now)
    }

    package func addPasswordCredential(clientID: UUID, secret: String, now: Date, expiresAt: Date?, displayName: String?) async throws
        -> PasswordCredential
    {
        try await base.addPasswordCredential(clientID: clientID, secret: secret, now: now, expiresAt: expiresAt, displayName: displayName)
    }

    package func passwordCredentials(clientID: UUID) async throws -> [PasswordCredential] {
        try await base.passwordCredentials(clientID: clientID)
    }

    package func removePasswordCredential(clientID: UUID, keyID: UUID) async throws -> Bool {
        try await base.removePasswordCredential(clientID: clientID, keyID: keyID)
    }

    package func secretHashes(clientID: UUID) async throws -> [String] { try await base.secretHashes(clientID: clientID) }

    package func addSecretHash(clientID: UUID, hash: String, now: Date) async throws {
        try await base.addSecretHash(clientID: clientID, hash: hash, now: now)
    }

    package func removeSecrets(clientID: UUID) async throws {
        try await base.removeSecrets(clientID: clientID)
    }

    package func removeApplication(tenantID: UUID, clientID: UUID) async throws -> Bool {
        defer { invalidate() }
        return try await base.removeApplication(tenantID: tenantID, clientID: clientID)
    }
}
