import Foundation
import TrustFramework

extension TenantDeclaration {
    /// A policy key set the tenant's custom policies name by `StorageReferenceId` (SPEC §2.12):
    ///
    /// ```yaml
    /// policyKeys:
    ///   - { id: TokenSigningKeyContainer, generate: sig }   # an RSA key made here, once
    ///   - { id: FacebookSecret, secret: "…" }              # a secret, in clear
    /// ```
    ///
    /// A set is made with its key when it is missing or holds no key; a set that has keys is left
    /// as it is (keys are rotated with `todo-server policies keys` or Graph, not by re-applying).
    public struct PolicyKeyPart: Codable, Sendable {
        var id: String
        /// `sig` or `enc`: an RSA key made here.
        var generate: String?
        /// A secret (an identity provider's client secret, a REST API's password).
        var secret: String?
        /// `sig` (default) or `enc`, for a secret.
        var use: String?

        var normalizedID: String { PolicyKeySetLibrary.normalizedID(id) }
    }

    func policyKeyProblems() -> [String] {
        var problems: [String] = []
        for part in policyKeys ?? [] {
            let label = "policyKeys \(part.id)"
            if !CustomPolicyID.isValid(part.normalizedID) { problems.append("\(label): the id may use letters, digits and underscores only") }
            switch (part.generate, part.secret) {
            case (let use?, nil) where ["sig", "enc"].contains(use): break
            case (_?, nil): problems.append("\(label): generate must be sig or enc")
            case (nil, let secret?):
                if secret.isEmpty || secret.utf8.count > 4096 { problems.append("\(label): secret must be 1 to 4096 bytes") }
                if let use = part.use, !["sig", "enc"].contains(use) { problems.append("\(label): use must be sig or enc") }
            default: problems.append("\(label): give one of generate or secret")
            }
        }
        let ids = (policyKeys ?? []).map { $0.normalizedID.lowercased() }
        if Set(ids).count != ids.count { problems.append("policyKeys ids must be unique (case-insensitive)") }
        return problems
    }

    /// Makes the declared key sets that are missing or empty; notes each one made.
    func applyPolicyKeys(tenantID: UUID, library: PolicyKeySetLibrary, note: (String, String, Bool?) -> Void) async throws {
        for part in policyKeys ?? [] {
            let stored = try await library.keySet(tenantID: tenantID, id: part.id)
            if let stored, !stored.keys.isEmpty { continue }
            let set: PolicyKeySet
            if let stored { set = stored } else { set = try await library.create(tenantID: tenantID, id: part.id) }
            if let use = part.generate {
                _ = try await library.generateKey(tenantID: tenantID, keySet: set.id, use: use, kty: "RSA", notBefore: nil, expires: nil)
            } else if let secret = part.secret {
                _ = try await library.uploadSecret(tenantID: tenantID, keySet: set.id, use: part.use ?? "sig", value: secret, notBefore: nil, expires: nil)
            }
            note("policy key set", set.id, stored.map { _ in false })
        }
    }

    /// The declared key sets (lower-cased, with their prefix) and the kind of key each will hold:
    /// they count as present when the declaration's policies are checked before anything is written.
    var declaredKeySets: [String: Set<String>] {
        var kinds: [String: Set<String>] = [:]
        for part in policyKeys ?? [] {
            let kind = part.generate.map { PolicyKeyKinds.kind(kty: "RSA", use: $0) } ?? PolicyKeyKinds.kind(kty: "oct", use: part.use ?? "sig")
            kinds[part.normalizedID.lowercased(), default: []].insert(kind)
        }
        return kinds
    }
}
