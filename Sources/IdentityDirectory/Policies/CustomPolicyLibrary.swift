import Foundation
import SQLKit
import Synchronization
import Storage
import TrustFramework

/// A tenant's custom policy as uploaded: its id, the base it names, and its XML exactly as sent
/// (Graph's `$value` gives back what was put).
public struct CustomPolicy: Sendable, Equatable {
    public var id: String
    public var baseID: String?
    public var body: String
    public var uploadedAt: Date
}

/// A refused upload or delete, with every problem found: Graph answers it as B2C does, one
/// message naming the policy and the tenant, then each problem.
public struct PolicyRejection: Error, Equatable, CustomStringConvertible {
    public var policyID: String
    public var tenantName: String
    public var problems: [String]

    public var description: String {
        "Validation failed: \(problems.count) validation error(s) found in policy \"\(policyID.uppercased())\" of tenant \"\(tenantName)\". "
            + problems.joined(separator: " ")
    }
}

/// The tenants' custom policies (SPEC §2.12): upload checks a policy whole (its file, its base
/// chain merged, and every stored policy built on it) and stores it only when all pass; delete
/// refuses a policy others are built on. Writes of one tenant's policies run one at a time, so
/// two concurrent uploads cannot each pass against the other's old state.
package struct CustomPolicyLibrary: Sendable {
    let database: any Database
    let clock: any IdentityClock
    /// Compiled relying parties, by tenant and id, with the revisions of their chains.
    let compiled = CompiledPolicyCache()

    /// B2C's limit on policies per tenant ("Azure AD B2C service limits").
    static let maximumPolicies = 200

    package func policies(tenantID: UUID) async throws -> [CustomPolicy] {
        let rows = try await database.rows(
            "SELECT policy_id, base_policy_id, body, uploaded_at FROM custom_policies WHERE tenant_id = ? ORDER BY policy_id_lower",
            [.text(tenantID.uuidString.lowercased())])
        return try rows.map { row in
            CustomPolicy(
                id: try row.text("policy_id"), baseID: try row.optionalText("base_policy_id"), body: try row.text("body"),
                uploadedAt: Date(timeIntervalSince1970: TimeInterval(try row.integer("uploaded_at"))))
        }
    }

    func policy(tenantID: UUID, id: String) async throws -> CustomPolicy? {
        try await policies(tenantID: tenantID).first { $0.id.lowercased() == id.lowercased() }
    }

    /// Checks and stores `body` as the policy `expectedID` (the URL's id, when there is one).
    /// Returns the policy and whether it is new.
    package func upload(_ body: Data, tenant: Tenant, expectedID: String? = nil) async throws -> (CustomPolicy, created: Bool) {
        try await upload([(body, expectedID)], tenant: tenant)[0]
    }

    /// Checks and stores a set of policies together (a directory of them, bases and relying
    /// parties in any order): all of them, or none when any problem is found.
    /// With `dryRun`, only checks (a declaration checks its policies before writing anything);
    /// `declaredKeySets` (lower-cased id → the kinds of key it will hold, ``PolicyKeyKinds``)
    /// count as existing then, as the declaration makes them.
    func upload(
        _ files: [(body: Data, expectedID: String?)], tenant: Tenant, dryRun: Bool = false, declaredKeySets: [String: Set<String>] = [:]
    ) async throws -> [(
        CustomPolicy, created: Bool
    )] {
        var incoming: [(policy: CustomPolicy, root: PolicyElement)] = []
        for (body, expectedID) in files {
            let root: PolicyElement
            do {
                root = try PolicyXML.parse(body)
            } catch let failure as PolicyXML.Failure {
                throw PolicyRejection(policyID: expectedID ?? "", tenantName: tenant.name, problems: [failure.message])
            }
            let id = root["PolicyId"] ?? ""
            guard let text = String(data: body, encoding: .utf8) else {
                throw PolicyRejection(policyID: id, tenantName: tenant.name, problems: ["The policy is not UTF-8 text."])
            }
            var problems = PolicyCheck.file(root, tenantName: tenant.name)
            if let expectedID, expectedID.lowercased() != id.lowercased() {
                problems.append("The PolicyId '\(id)' differs from the id in the request, '\(expectedID)'.")
            }
            if incoming.contains(where: { $0.policy.id.lowercased() == id.lowercased() }) {
                problems.append("The policy '\(id)' is given twice.")
            }
            guard problems.isEmpty else { throw PolicyRejection(policyID: id, tenantName: tenant.name, problems: problems) }
            let policy = CustomPolicy(id: id, baseID: root.child("BasePolicy")?.child("PolicyId")?.text, body: text, uploadedAt: clock.now)
            incoming.append((policy, root))
        }
        let batch = incoming
        // The read, the checks and the write in one transaction (SQLite's one writer) under the
        // tenant's advisory lock (PostgreSQL): a concurrent upload cannot slip in between.
        return try await lockedTransaction(tenantID: tenant.id) { sql in
                let tenantKey = tenant.id.uuidString.lowercased()
                var stored = try Self.parsed(try await Self.policies(sql, tenantKey: tenantKey))
                let results = batch.map { ($0.policy, created: stored[$0.policy.id.lowercased()] == nil) }
                for (policy, root) in batch { stored[policy.id.lowercased()] = root }
                if stored.count > Self.maximumPolicies {
                    throw PolicyRejection(
                        policyID: batch[0].policy.id, tenantName: tenant.name,
                        problems: ["A tenant may have at most \(Self.maximumPolicies) policies."])
                }
                // A declared set that holds keys already is left as it is by the declaration.
                let keySets = try await Self.keyKinds(sql, tenantKey: tenantKey).merging(dryRun ? declaredKeySets : [:]) { stored, _ in stored }
                for (policy, root) in batch {
                    var problems = Self.problems(introducing: policy.id.lowercased(), in: stored)
                    for reference in PolicyCheck.keyReferences(root) {
                        let needs = PolicyKeyKinds.needed(by: reference.key)
                        let kinds = keySets[PolicyKeySetLibrary.normalizedID(reference.keySet).lowercased()] ?? []
                        guard !needs.accepts(kinds) else { continue }
                        problems.append(
                            "TechnicalProfile '\(reference.profile)' names the policy key set '\(reference.keySet)' (key '\(reference.key)'), "
                                + "which does not exist in this tenant or holds no \(needs.description): make it and add one first.")
                    }
                    guard problems.isEmpty else { throw PolicyRejection(policyID: policy.id, tenantName: tenant.name, problems: problems) }
                }
                guard !dryRun else { return results }
                for (policy, _) in batch {
                    let key = policy.id.lowercased()
                    try await sql.raw("DELETE FROM custom_policies WHERE tenant_id = \(bind: tenantKey) AND policy_id_lower = \(bind: key)").run()
                    try await sql.raw(
                        """
                        INSERT INTO custom_policies (tenant_id, policy_id_lower, policy_id, base_policy_id, body, uploaded_at, revision)
                        VALUES (\(bind: tenantKey), \(bind: key), \(bind: policy.id), \(bind: policy.baseID), \(bind: policy.body), \(bind: Int64(policy.uploadedAt.timeIntervalSince1970)), \(bind: UUID().uuidString.lowercased()))
                        """
                    ).run()
                }
                return results
        }
    }

    /// The kinds of key (``PolicyKeyKinds``) each of the tenant's key sets holds, by lower-cased id.
    static func keyKinds(_ sql: any SQLDatabase, tenantKey: String) async throws -> [String: Set<String>] {
        let rows = try await sql.raw(
            "SELECT key_set_id_lower, kty, use, x5c FROM trust_framework_keys WHERE tenant_id = \(bind: tenantKey)"
        ).all()
        var kinds: [String: Set<String>] = [:]
        for row in rows {
            let set = try row.decode(column: "key_set_id_lower", as: String.self)
            let certificate = (try? row.decode(column: "x5c", as: String?.self)) ?? nil
            let kty = certificate == nil ? try row.decode(column: "kty", as: String.self) : "x509"
            kinds[set, default: []].insert(PolicyKeyKinds.kind(kty: kty, use: try row.decode(column: "use", as: String.self)))
        }
        return kinds
    }

    /// The problems of policy `id` in `stored` and of every stored policy whose chain runs through it.
    static func problems(introducing id: String, in stored: [String: PolicyElement]) -> [String] {
        var problems: [String] = []
        for key in stored.keys.sorted() {
            let chain: [PolicyElement]
            do {
                chain = try Self.chain(of: key, in: stored)
            } catch let broken as ChainProblem {
                if key == id || broken.passesThrough(id) { problems.append(broken.message) }
                continue
            } catch {
                continue
            }
            guard chain.contains(where: { $0["PolicyId"]?.lowercased() == id }) else { continue }
            let found = PolicyCheck.effective(PolicyMerge.effective(chain))
            problems += key == id ? found : found.map { "Policy '\(chain.last?["PolicyId"] ?? key)', built on it: \($0)" }
        }
        return problems
    }

    /// A tenant's stored policies, read in `sql` (a transaction's connection).
    static func policies(_ sql: any SQLDatabase, tenantKey: String) async throws -> [CustomPolicy] {
        try await sql.raw(
            "SELECT policy_id, base_policy_id, body, uploaded_at FROM custom_policies WHERE tenant_id = \(bind: tenantKey) ORDER BY policy_id_lower"
        ).all().map { row in
            CustomPolicy(
                id: try row.decode(column: "policy_id", as: String.self), baseID: try row.decode(column: "base_policy_id", as: String?.self),
                body: try row.decode(column: "body", as: String.self),
                uploadedAt: Date(timeIntervalSince1970: TimeInterval(try row.decode(column: "uploaded_at", as: Int64.self))))
        }
    }

    static func parsed(_ policies: [CustomPolicy]) throws -> [String: PolicyElement] {
        var parsed: [String: PolicyElement] = [:]
        for policy in policies { parsed[policy.id.lowercased()] = try PolicyXML.parse(Data(policy.body.utf8)) }
        return parsed
    }

    /// Deletes a policy no other policy names as its base; false when there was none.
    func delete(tenant: Tenant, id: String) async throws -> Bool {
        try await lockedTransaction(tenantID: tenant.id) { sql in
                let tenantKey = tenant.id.uuidString.lowercased()
                let all = try await Self.policies(sql, tenantKey: tenantKey)
                let dependents = all.filter { $0.baseID?.lowercased() == id.lowercased() }.map(\.id)
                guard dependents.isEmpty else {
                    throw PolicyRejection(
                        policyID: id, tenantName: tenant.name,
                        problems: ["The policy is the base of \(dependents.joined(separator: ", ")); delete those first."])
                }
                guard all.contains(where: { $0.id.lowercased() == id.lowercased() }) else { return false }
                try await sql.raw(
                    "DELETE FROM custom_policies WHERE tenant_id = \(bind: tenantKey) AND policy_id_lower = \(bind: id.lowercased())"
                ).run()
                return true
        }
    }

    /// A transaction holding the tenant's policy lock: on PostgreSQL a transaction-scoped
    /// advisory lock taken as its first statement, on the transaction's own connection (no
    /// second connection is waited for while it is held); SQLite has one writer at a time.
    private func lockedTransaction<T: Sendable>(tenantID: UUID, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T)
        async throws -> T
    {
        let key = Self.lockKey(tenantID: tenantID)
        let postgres = database.engine == .postgres
        return try await database.transaction { sql in
            if postgres { try await sql.raw("SELECT pg_advisory_xact_lock(\(bind: key))").run() }
            return try await body(sql)
        }
    }

    /// A base chain that cannot be built: a missing base, a cycle, or too many levels.
    struct ChainProblem: Error {
        var message: String
        var visited: [String]
        func passesThrough(_ id: String) -> Bool { visited.contains(id) }
    }

    /// The chain of `id`, root first and `id` last. Policies are keyed by lower-cased id, as B2C
    /// compares them; messages name each as its file wrote it.
    static func chain(of id: String, in policies: [String: PolicyElement]) throws -> [PolicyElement] {
        var chain: [PolicyElement] = []
        var visited: [String] = []
        var next: (key: String, written: String)? = (id.lowercased(), policies[id.lowercased()]?["PolicyId"] ?? id)
        let start = next!.written
        var referrer = start
        while let current = next {
            guard !visited.contains(current.key) else {
                throw ChainProblem(message: "The base policies of '\(start)' form a cycle through '\(current.written)'.", visited: visited)
            }
            guard let policy = policies[current.key] else {
                throw ChainProblem(
                    message: "The base policy '\(current.written)' of '\(referrer)' was not found in the tenant; upload it first.",
                    visited: visited)
            }
            visited.append(current.key)
            guard visited.count <= PolicyCheck.maximumChainLength else {
                throw ChainProblem(
                    message: "The policy '\(start)' has more than \(PolicyCheck.maximumChainLength) levels of base policies.", visited: visited)
            }
            chain.insert(policy, at: 0)
            referrer = policy["PolicyId"] ?? current.written
            next = policy.child("BasePolicy")?.child("PolicyId").map { ($0.text.lowercased(), $0.text) }
        }
        return chain
    }

    /// The advisory-lock key of a tenant's policy writes (PostgreSQL; SQLite has one writer).
    static func lockKey(tenantID: UUID) -> Int64 {
        let bytes = withUnsafeBytes(of: tenantID.uuid) { Array($0) }
        return bytes.prefix(8).reduce(Int64(0x1A)) { ($0 << 8) | Int64($1) } ^ 0x4346_5054  // "CFPT"
    }

    /// The compiled relying-party policy `id`, compiled again only when a policy of its chain
    /// changed (one query of the tenant's revisions per call); nil when there is no such policy
    /// or it is not a relying party (a base cannot be run).
    package func program(tenantID: UUID, id: String) async throws -> CompiledPolicy? {
        let rows = try await database.rows(
            "SELECT policy_id_lower, base_policy_id, revision FROM custom_policies WHERE tenant_id = ?",
            [.text(tenantID.uuidString.lowercased())])
        var revisions: [String: (base: String?, revision: String)] = [:]
        for row in rows {
            revisions[try row.text("policy_id_lower")] = (try row.optionalText("base_policy_id")?.lowercased(), try row.text("revision"))
        }
        var fingerprint: [String] = []
        var next: String? = id.lowercased()
        while let current = next, let entry = revisions[current], fingerprint.count <= PolicyCheck.maximumChainLength {
            fingerprint.append("\(current)@\(entry.revision)")
            next = entry.base
        }
        guard !fingerprint.isEmpty else { return nil }
        let key = "\(tenantID.uuidString.lowercased())/\(id.lowercased())"
        let print = fingerprint.joined(separator: ",")
        // A miss is cached too: asking for a base policy's metadata again and again parses nothing.
        if let cached = compiled.get(key, fingerprint: print) { return cached }
        // Only the chain's files are parsed.
        let chainIDs = Set(fingerprint.map { String($0.split(separator: "@")[0]) })
        var parsed: [String: PolicyElement] = [:]
        for policy in try await policies(tenantID: tenantID) where chainIDs.contains(policy.id.lowercased()) {
            parsed[policy.id.lowercased()] = try PolicyXML.parse(Data(policy.body.utf8))
        }
        let chain = try? Self.chain(of: id.lowercased(), in: parsed)
        let effective = chain.map(PolicyMerge.effective)
        let program = effective.flatMap { $0.child("RelyingParty") != nil ? CompiledPolicy($0) : nil }
        compiled.put(key, fingerprint: print, program)
        return program
    }

    package init(database: any Database, clock: any IdentityClock) {
        self.database = database
        self.clock = clock
    }
}

/// Compiled policies by key and the fingerprint of the chain they were compiled from.
final class CompiledPolicyCache: Sendable {
    private let entries = Mutex<[String: (fingerprint: String, policy: CompiledPolicy?)]>([:])
    /// Entries kept at most (a tenant has at most 200 policies; a few tenants fit).
    static let capacity = 1000

    /// The cached compilation: `.some(nil)` is a cached "not a relying party".
    func get(_ key: String, fingerprint: String) -> CompiledPolicy?? {
        entries.withLock { entries in entries[key].flatMap { $0.fingerprint == fingerprint ? .some($0.policy) : nil } }
    }

    func put(_ key: String, fingerprint: String, _ policy: CompiledPolicy?) {
        entries.withLock { entries in
            if entries.count >= Self.capacity, entries[key] == nil { entries.removeAll() }
            entries[key] = (fingerprint, policy)
        }
    }
}
