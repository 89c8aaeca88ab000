import Foundation
import Storage
import TodoModels
import TrustFramework
import WireCoding
import Yams

extension TenantDeclaration {
    /// The tenant, made the default, with its flows and apps. Existing apps with the same client
    /// id are updated; their secrets are replaced by the declared ones.
    public func apply(to administration: IdentityAdministration, baseDirectory: URL) async throws -> Tenant {
        try await applyReporting(to: administration, baseDirectory: baseDirectory, includeUsers: false).tenant
    }

    /// ``apply(to:baseDirectory:)``, saying what changed: one line per tenant, flow, app and user
    /// that was added or updated. Applying the same file twice changes nothing the second time.
    /// - Parameter includeUsers: whether the declaration's `users` are applied. `serve
    ///   --tenant-config` leaves them out: applied at every start, they would undo what Graph
    ///   changed since (a disabled account, a new password, a deleted user).
    public func applyReporting(to administration: IdentityAdministration, baseDirectory: URL, includeUsers: Bool = true) async throws -> (
        tenant: Tenant, changes: [String]
    ) {
        var changes: [String] = []
        // For the audit record: how many of each kind of thing changed, without names (a user's
        // is an email), so its size does not grow with the declaration.
        var counts: [String: (added: Int, updated: Int)] = [:]
        func note(_ kind: String, _ name: String, before: Bool?) {
            if let before, before { return }
            changes.append("\(kind) \(name) \(before == nil ? "added" : "updated")")
            if before == nil { counts[kind, default: (0, 0)].added += 1 } else { counts[kind, default: (0, 0)].updated += 1 }
        }
        let now = administration.clock.now
        // By id first, then by name: a tenant of the same name keeps its id (and its issuer).
        var existing: Tenant?
        if let id = tenant.id { existing = try await administration.tenants.tenant(matching: id.uuidString) }
        if existing == nil { existing = try await administration.tenants.tenant(matching: tenant.name) }
        let tenantID = existing?.id ?? tenant.id ?? UUID()
        // Every account is prepared and checked before the first write, so a refusal (another
        // data key, an id of another tenant, a taken sign-in name) leaves the store as it was.
        var accounts: [(user: UserAccount, part: UserPart, stored: UserAccount?)] = []
        for part in includeUsers ? users ?? [] : [] {
            let user = try part.account(tenantID: tenantID, dataKey: administration.dataKey, now: now)
            let stored = try await administration.users.user(id: user.id)
            if let stored, stored.tenantID != tenantID { throw DeclarationError.invalid("user \(user.id) belongs to another tenant") }
            if stored == nil,
                let holder = try await administration.users.user(
                    tenantID: tenantID, provider: user.identityProvider, signInName: user.signInName)
            {
                throw DeclarationError.invalid(
                    "user \(user.id): \(holder.objectID) already signs in as \(TextRules.printable(user.signInName))")
            }
            accounts.append((user, part, stored))
        }
        let templates = tenant.pageTemplates.map { path in
            path.hasPrefix("/") ? path : baseDirectory.appendingPathComponent(path).standardizedFileURL.path
        }
        var model = Tenant(
            id: tenantID, name: tenant.name, displayName: tenant.displayName ?? tenant.name,
            defaultPolicy: tenant.defaultPolicy ?? userFlows.first?.name ?? "B2C_1_susi", pageTemplatesPath: templates,
            isDefault: true, userAttributes: userAttributes ?? [],
            apiConnectors: try sealedConnectors(tenantID: tenantID, existing: existing, dataKey: administration.dataKey),
            identityProviders: try sealedProviders(tenantID: tenantID, existing: existing, dataKey: administration.dataKey))
        model.languages = languages ?? []
        model.localizedStrings = localizedStrings ?? [:]
        model.authenticationExtensions = authenticationExtensions ?? []
        // The custom policies that differ from the stored ones, checked whole before the first write.
        let policyFiles = try await changedPolicies(tenantID: tenantID, administration: administration, baseDirectory: baseDirectory)
        if !policyFiles.isEmpty {
            do {
                _ = try await administration.customPolicies.upload(
                    policyFiles.map { ($0, nil) }, tenant: model, dryRun: true, declaredKeySets: declaredKeySets)
            } catch let rejection as PolicyRejection {
                throw DeclarationError.invalid(rejection.description)
            }
        }
        if existing != model {
            try await administration.tenants.save(model, now: now)
            note("tenant", model.name, before: existing.map { _ in false })
        }
        for flow in userFlows {
            var lifetimes = TokenLifetimes.default
            if let given = flow.lifetimes {
                if let minutes = given.accessTokenMinutes { lifetimes.accessTokenSeconds = min(max(minutes, 5), 1440) * 60 }
                if let minutes = given.idTokenMinutes { lifetimes.idTokenSeconds = min(max(minutes, 5), 1440) * 60 }
                if let days = given.refreshTokenDays { lifetimes.refreshTokenSeconds = min(max(days, 1), 90) * 86_400 }
                if let days = given.slidingWindowDays { lifetimes.slidingWindowSeconds = min(max(days, 1), 365) * 86_400 }
                if given.unboundedSlidingWindow == true { lifetimes.slidingWindowSeconds = nil }
            }
            if let given = flow.tokenLifetimes { lifetimes = try given.lifetimes().get() }
            var declared = UserFlow(
                tenantID: model.id, name: flow.name, type: flow.type,
                identityProviders: (flow.identityProviders ?? [.local]).map { model.upstreamProvider(named: $0.rawValue)?.kind ?? $0 },
                signUpAttributes: flow.signUpAttributes ?? [.displayName],
                applicationClaims: flow.applicationClaims ?? UserFlow.defaultClaims,
                lifetimes: lifetimes, emailVerification: flow.emailVerification ?? true)
            declared.mfa = flow.mfa.flatMap { $0.isOn ? $0 : nil } ?? .off
            declared.connectors = flow.apiConnectors ?? FlowConnectors()
            declared.extensions = flow.authenticationExtensions ?? FlowExtensions()
            declared.emailSignIn = flow.emailSignIn ?? .password
            let stored = try await administration.tenants.userFlow(tenantID: model.id, name: flow.name)
            if stored != declared {
                try await administration.tenants.save(declared)
                note("user flow", flow.name, before: stored.map { _ in false })
            }
        }
        try await applyPolicyKeys(tenantID: model.id, library: administration.policyKeySets, note: note)
        if !policyFiles.isEmpty {
            do {
                for (policy, created) in try await administration.customPolicies.upload(policyFiles.map { ($0, nil) }, tenant: model) {
                    note("custom policy", policy.id, before: created ? nil : false)
                }
            } catch let rejection as PolicyRejection {
                throw DeclarationError.invalid(rejection.description)
            }
        }
        // Client ids first: permissions name their APIs by them.
        let clientIDs = (applications ?? []).map { $0.clientId ?? UUID() }
        func resource(_ api: String) -> String? {
            switch resolveAPI(api) {
            case .graph: return APIPermission.graphResource
            case .app(let index): return clientIDs[index].uuidString.lowercased()
            case nil: return nil
            }
        }
        let storedApps = try await administration.tenants.applications(tenantID: model.id)
        for (index, app) in (applications ?? []).enumerated() {
            let permissions = (app.permissions ?? []).compactMap { permission in
                resource(permission.api).map { APIPermission(resource: $0, scopes: permission.scopes ?? [], roles: permission.roles ?? []) }
            }
            var registration = AppRegistration(
                clientID: clientIDs[index], tenantID: model.id, displayName: app.name, kind: app.kind,
                redirectURIs: app.redirectUris ?? [], allowPublicClientFlows: app.allowPublicClientFlows ?? false,
                allowImplicit: app.allowImplicitFlow ?? false, allowPlainPKCE: app.allowPlainPKCE ?? false,
                requirePKCE: app.pkce?.lowercased() == "required", appIDURI: app.appIdUri,
                exposedScopes: app.scopes ?? [], apiPermissions: permissions,
                userFlow: app.userFlow.flatMap { flow in userFlows.first { $0.name.lowercased() == flow.lowercased() }?.name })
            registration.setRedirectURIs(app.redirectsByPlatform)
            registration.scopeIDs = app.scopeIds ?? [:]
            registration.requiredResourceAccess = app.requiredResourceAccess ?? []
            registration.groupMembershipClaims = app.groupMembershipClaims
            registration.nativeAuthentication = app.nativeAuthentication ?? false
            let stored = storedApps.first { $0.clientID == registration.clientID }
            let hashes = ((app.secrets ?? []).map(Secrets.sha256Hex) + (app.secretHashes ?? []).map { $0.lowercased() }).sorted()
            let storedHashes = stored == nil ? [] : try await administration.tenants.secretHashes(clientID: registration.clientID)
            guard stored != registration || storedHashes != hashes else { continue }
            // Updated in place, not removed and re-added: what hangs off the app (users' consents,
            // refresh tokens) survives a restart with the same declaration.
            try await administration.tenants.save(registration, now: now)
            if storedHashes != hashes {
                try await administration.tenants.removeSecrets(clientID: registration.clientID)
                for secret in app.secrets ?? [] {
                    try await administration.tenants.addSecret(clientID: registration.clientID, secret: secret, now: now, expiresAt: nil)
                }
                for hash in app.secretHashes ?? [] {
                    try await administration.tenants.addSecretHash(clientID: registration.clientID, hash: hash.lowercased(), now: now)
                }
            }
            note("application", "'\(app.name)'", before: stored.map { _ in false })
        }
        for (user, part, stored) in accounts {
            let name = TextRules.printable(user.email ?? user.signInName)
            if let stored {
                // Declared roles are the account's roles: given or taken as the file says.
                if let declared = part.roles, let held = try await administration.roles?.roles(of: stored.id), Set(declared) != held {
                    for role in Set(declared).subtracting(held) { try await administration.assignRole(role, to: stored) }
                    for role in held.subtracting(declared) { try await administration.removeRole(role, from: stored) }
                    note("user role", name, before: false)
                }
                guard !part.matches(stored, hash: user.passwordHash) else { continue }
                try await administration.users.replace(user)
                // A new password or a disabled account ends the ways in, as through Graph.
                if stored.passwordHash != user.passwordHash || (stored.accountEnabled && !user.accountEnabled) {
                    try await administration.users.revokeSessions(id: user.id, now: now)
                }
                note("user", name, before: false)
            } else {
                try await administration.users.create(user)
                for role in part.roles ?? [] { try await administration.assignRole(role, to: user) }
                note("user", name, before: nil)
            }
        }
        try await applyGroups(tenantID: model.id, administration: administration, now: now) { note($0, $1, before: $2) }
        _ = try await administration.keys.activeKey()
        if !counts.isEmpty {
            let changed = counts.sorted { $0.key < $1.key }.map { kind, count in
                AuditTarget.ModifiedProperty(name: kind, newValue: "\(count.added) added, \(count.updated) updated")
            }
            let target = AuditTarget(type: "Tenant", id: model.id.uuidString.lowercased(), displayName: model.name, modified: changed)
            try await administration.audited(.applyDeclaration, tenantID: model.id, target: target) {}
        }
        return (model, changes)
    }
}

extension TenantDeclaration.UserPart {
    static func sealingContext(_ id: UUID) -> String { "tenant-export:user:\(id.uuidString.lowercased())" }

    /// The account this entry declares; its password hash is opened with the data key.
    func account(tenantID: UUID, dataKey: DataKey, now: Date) throws -> UserAccount {
        var hash: String?
        if let sealedPasswordHash {
            do {
                hash = try dataKey.open(sealedPasswordHash, context: Self.sealingContext(id)).value
            } catch {
                throw TenantDeclaration.DeclarationError.invalid(
                    "user \(id): the password hash was sealed with another data key (\(error)); export it again where it is applied")
            }
        }
        var user = UserAccount(
            id: id, tenantID: tenantID, identityProvider: identityProvider, signInName: signInName, email: email,
            displayName: displayName, attributes: attributes ?? [:], passwordHash: hash, createdAt: now,
            emailVerified: emailVerified ?? false)
        user.accountEnabled = accountEnabled ?? true
        user.forcePasswordChange = forcePasswordChange ?? false
        user.passwordPolicies = passwordPolicies
        return user
    }

    func matches(_ stored: UserAccount, hash: String?) -> Bool {
        stored.identityProvider == identityProvider && stored.signInName == signInName && stored.email == email
            && stored.emailVerified == (emailVerified ?? false) && stored.displayName == displayName
            && stored.attributes == (attributes ?? [:]) && stored.accountEnabled == (accountEnabled ?? true)
            && stored.forcePasswordChange == (forcePasswordChange ?? false) && stored.passwordPolicies == passwordPolicies
            && stored.passwordHash == hash
    }
}

extension TenantDeclaration {
    /// The declared connectors with their secrets sealed for this tenant. A secret already stored
    /// keeps its sealed form (so applying the same file twice changes nothing); an exported,
    /// sealed one must open with this installation's data key.
    func sealedConnectors(tenantID: UUID, existing: Tenant?, dataKey: DataKey) throws -> [APIConnector] {
        try (apiConnectors ?? []).map { declared in
            var connector = declared
            let stored = existing?.apiConnectors.first { $0.name == declared.name }
            for (field, value, old) in [("password", declared.password, stored?.password), ("token", declared.token, stored?.token)] {
                let sealed = try Self.sealedSecret(
                    value, stored: old, context: APIConnector.sealingContext(tenantID: tenantID, name: declared.name, field: field),
                    owner: "API connector '\(declared.name)': its sealed \(field)", dataKey: dataKey)
                if field == "password" { connector.password = sealed } else { connector.token = sealed }
            }
            return connector
        }
    }

    /// The declared upstream providers with their client secrets sealed, as for connectors.
    func sealedProviders(tenantID: UUID, existing: Tenant?, dataKey: DataKey) throws -> [UpstreamProvider] {
        try (identityProviders ?? []).map { declared in
            var provider = declared
            provider.clientSecret = try Self.sealedSecret(
                declared.clientSecret, stored: existing?.identityProviders.first { $0.name == declared.name }?.clientSecret,
                context: UpstreamProvider.sealingContext(tenantID: tenantID, name: declared.name),
                owner: "identity provider '\(declared.name)': its sealed clientSecret", dataKey: dataKey)
            return provider
        }
    }

    /// A declared secret as stored: an exported (`sealed:`) one as it is, once it opens with this
    /// data key; a clear one that the store already holds keeps its sealed form (so applying a
    /// file twice changes nothing); any other sealed anew.
    static func sealedSecret(_ value: String?, stored: String?, context: String, owner: String, dataKey: DataKey) throws
        -> String?
    {
        guard let value else { return nil }
        if value.hasPrefix("sealed:") {
            guard (try? dataKey.open(value, context: context)) != nil else {
                throw DeclarationError.invalid("\(owner) does not open with this data key")
            }
            return value
        }
        if let stored, (try? dataKey.open(stored, context: context))?.value == value { return stored }
        return try dataKey.seal(value, context: context)
    }
}

extension TenantDeclaration {
    /// The `*.xml` files of the `policies` directory whose text differs from the stored policy of
    /// the same id (so applying a declaration again changes nothing).
    func changedPolicies(tenantID: UUID, administration: IdentityAdministration, baseDirectory: URL) async throws -> [Data] {
        guard let policies else { return [] }
        let directory = policies.hasPrefix("/") ? URL(fileURLWithPath: policies) : baseDirectory.appendingPathComponent(policies)
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.lowercased().hasSuffix(".xml") }.sorted()
        } catch {
            throw DeclarationError.invalid("policies: cannot read the directory \(directory.path)")
        }
        let stored = Dictionary(
            try await administration.customPolicies(tenantID: tenantID).map { ($0.id.lowercased(), $0.body) }, uniquingKeysWith: { a, _ in a })
        var changed: [Data] = []
        for name in names {
            let data = try Data(contentsOf: directory.appendingPathComponent(name))
            let id = (try? PolicyXML.parse(data))?["PolicyId"]?.lowercased()
            if let id, let body = stored[id], Data(body.utf8) == data { continue }
            changed.append(data)
        }
        return changed
    }
}
