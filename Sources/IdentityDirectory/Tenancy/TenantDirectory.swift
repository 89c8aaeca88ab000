import Foundation
import SQLKit
import Storage
import WireCoding

/// Tenants, app registrations and user flows.
package protocol TenantDirectory: Sendable {
    /// This directory without any cache in front: what a read-modify-write reads, so it does
    /// not write back what another instance changed a moment ago.
    var uncached: any TenantDirectory { get }
    /// Finds a tenant by its name (case-insensitive) or its GUID, the two forms B2C URLs use.
    func tenant(matching segment: String) async throws -> Tenant?
    func defaultTenant() async throws -> Tenant?
    func tenants() async throws -> [Tenant]
    func userFlow(tenantID: UUID, name: String) async throws -> UserFlow?
    func userFlows(tenantID: UUID) async throws -> [UserFlow]
    func application(tenantID: UUID, clientID: String) async throws -> AppRegistration?
    func applications(tenantID: UUID) async throws -> [AppRegistration]
    /// Whether `secret` is a current secret of the app, compared by hash in constant time.
    func verifySecret(clientID: UUID, secret: String, now: Date) async throws -> Bool

    func save(_ tenant: Tenant, now: Date) async throws
    func save(_ flow: UserFlow) async throws
    /// Removes a user flow; false when the tenant has none of that name.
    func removeUserFlow(tenantID: UUID, name: String) async throws -> Bool
    func save(_ application: AppRegistration, now: Date) async throws
    /// Adds a secret (its hash kept) and returns what Graph shows of it.
    func addPasswordCredential(clientID: UUID, secret: String, now: Date, expiresAt: Date?, displayName: String?) async throws
        -> PasswordCredential
    /// The app's secrets as Graph's `passwordCredentials` show them (never the secret).
    func passwordCredentials(clientID: UUID) async throws -> [PasswordCredential]
    /// Withdraws one secret by its key id; false when the app has none such.
    func removePasswordCredential(clientID: UUID, keyID: UUID) async throws -> Bool
    func removeApplication(tenantID: UUID, clientID: UUID) async throws -> Bool
    /// Withdraws every secret of the app (a declaration re-applied names its secrets anew).
    func removeSecrets(clientID: UUID) async throws
    /// The SHA-256 hashes of the app's secrets (all the store keeps), for an export.
    func secretHashes(clientID: UUID) async throws -> [String]
    /// Adds a secret by its SHA-256 hash (an exported tenant re-applied).
    func addSecretHash(clientID: UUID, hash: String, now: Date) async throws
}

/// What a tenant declares beyond its names (the `settings` column, JSON): the user-flow
/// engine's tenant-wide parts (SPEC §2.11). Every member is optional so rows written before a
/// member existed still decode.
struct TenantSettings: Codable, Equatable {
    var userAttributes: [CustomAttribute]?
    var apiConnectors: [APIConnector]?
    var identityProviders: [UpstreamProvider]?
    var languages: [String]?
    var localizedStrings: [String: [String: String]]?
    var authenticationExtensions: [AuthenticationExtension]?
}

/// A change the tenant directory refuses.
package enum TenantDirectoryError: Error, CustomStringConvertible, Equatable {
    /// The client id is another tenant's app.
    case clientIDTaken(String)

    package var description: String {
        switch self {
        case .clientIDTaken(let id): "the client id \(id) is another tenant's app"
        }
    }
}

/// The SQL implementation of ``TenantDirectory``.
package struct SQLTenantDirectory: TenantDirectory {
    let database: any Database

    package init(database: any Database) { self.database = database }

    package var uncached: any TenantDirectory { self }

    struct TenantRow: Codable {
        var id: String
        var name: String
        var nameLower: String
        var displayName: String
        var defaultPolicy: String
        var pageTemplatesPath: String?
        var isDefault: Bool
        var createdAt: Int64
        /// ``TenantSettings`` as JSON.
        var settings: String

        var tenant: Tenant? {
            guard let id = UUID(uuidString: id) else { return nil }
            let settings = StoredJSON.decode(TenantSettings.self, settings) ?? TenantSettings()
            var tenant = Tenant(
                id: id, name: name, displayName: displayName, defaultPolicy: defaultPolicy,
                pageTemplatesPath: pageTemplatesPath, isDefault: isDefault, userAttributes: settings.userAttributes ?? [],
                apiConnectors: settings.apiConnectors ?? [], identityProviders: settings.identityProviders ?? [])
            tenant.languages = settings.languages ?? []
            tenant.localizedStrings = settings.localizedStrings ?? [:]
            tenant.authenticationExtensions = settings.authenticationExtensions ?? []
            return tenant
        }
    }

    struct ApplicationRow: Codable {
        var clientId: String
        var tenantId: String
        var displayName: String
        var kind: String
        var redirectUris: String
        var allowPublicClientFlows: Bool
        var allowImplicit: Bool
        var allowPlainPkce: Bool
        var requirePkce: Bool
        var appIdUri: String?
        var exposedScopes: String
        var createdAt: Int64
        var apiPermissions: String
        var userFlow: String?
        var redirectPlatforms: String
        var scopeIds: String
        var requiredResourceAccess: String
        var groupMembershipClaims: String?
        var nativeAuth: Bool

        var application: AppRegistration? {
            guard let clientID = UUID(uuidString: clientId), let tenantID = UUID(uuidString: tenantId),
                let kind = ClientKind(rawValue: kind)
            else { return nil }
            var app = AppRegistration(
                clientID: clientID, tenantID: tenantID, displayName: displayName, kind: kind,
                redirectURIs: StoredJSON.decode([String].self, redirectUris) ?? [],
                allowPublicClientFlows: allowPublicClientFlows, allowImplicit: allowImplicit,
                allowPlainPKCE: allowPlainPkce, requirePKCE: requirePkce, appIDURI: appIdUri,
                exposedScopes: StoredJSON.decode([String].self, exposedScopes) ?? [],
                apiPermissions: StoredJSON.decode([APIPermission].self, apiPermissions) ?? [], userFlow: userFlow)
            app.redirectPlatforms = StoredJSON.decode([String: RedirectPlatform].self, redirectPlatforms) ?? [:]
            app.scopeIDs = StoredJSON.decode([String: UUID].self, scopeIds) ?? [:]
            app.requiredResourceAccess = StoredJSON.decode([RequiredResourceAccess].self, requiredResourceAccess) ?? []
            app.groupMembershipClaims = groupMembershipClaims
            app.nativeAuthentication = nativeAuth
            return app
        }
    }

    struct UserFlowRow: Codable {
        var tenantId: String
        var nameLower: String
        var name: String
        var type: String
        var definition: String

        var flow: UserFlow? {
            guard let tenantID = UUID(uuidString: tenantId),
                let definition = StoredJSON.decode(UserFlowDefinition.self, definition)
            else { return nil }
            var flow = UserFlow(
                tenantID: tenantID, name: name, type: definition.type, identityProviders: definition.identityProviders,
                signUpAttributes: definition.signUpAttributes, applicationClaims: definition.applicationClaims,
                lifetimes: definition.lifetimes, emailVerification: definition.emailVerification ?? true)
            flow.mfa = definition.mfa ?? .off
            flow.connectors = definition.apiConnectors ?? FlowConnectors()
            flow.extensions = definition.authenticationExtensions ?? FlowExtensions()
            flow.emailSignIn = definition.emailSignIn ?? .password
            return flow
        }
    }

    package func tenant(matching segment: String) async throws -> Tenant? {
        let lowered = segment.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("tenants")
                .where("name_lower", .equal, lowered).orWhere("id", .equal, lowered)
                .first(decoding: TenantRow.self, with: .snakeCase)
        }?.tenant
    }

    package func defaultTenant() async throws -> Tenant? {
        try await database.read { sql in
            try await sql.select().columns("*").from("tenants").where("is_default", .equal, true)
                .first(decoding: TenantRow.self, with: .snakeCase)
        }?.tenant
    }

    package func tenants() async throws -> [Tenant] {
        try await database.read { sql in
            try await sql.select().columns("*").from("tenants").orderBy("name_lower").all(decoding: TenantRow.self, with: .snakeCase)
        }.compactMap(\.tenant)
    }

    package func userFlow(tenantID: UUID, name: String) async throws -> UserFlow? {
        let tenant = tenantID.uuidString.lowercased()
        let lowered = name.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("user_flows")
                .where("tenant_id", .equal, tenant).where("name_lower", .equal, lowered)
                .first(decoding: UserFlowRow.self, with: .snakeCase)
        }?.flow
    }

    package func userFlows(tenantID: UUID) async throws -> [UserFlow] {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("user_flows").where("tenant_id", .equal, tenant)
                .orderBy("name_lower").all(decoding: UserFlowRow.self, with: .snakeCase)
        }.compactMap(\.flow)
    }

    package func application(tenantID: UUID, clientID: String) async throws -> AppRegistration? {
        guard let id = UUID(uuidString: clientID) else { return nil }
        let tenant = tenantID.uuidString.lowercased()
        let client = id.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("applications")
                .where("client_id", .equal, client).where("tenant_id", .equal, tenant)
                .first(decoding: ApplicationRow.self, with: .snakeCase)
        }?.application
    }

    package func applications(tenantID: UUID) async throws -> [AppRegistration] {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("applications").where("tenant_id", .equal, tenant)
                .orderBy("display_name").all(decoding: ApplicationRow.self, with: .snakeCase)
        }.compactMap(\.application)
    }

    struct SecretRow: Codable {
        var secretHash: String
        var expiresAt: Int64?
    }

    package func verifySecret(clientID: UUID, secret: String, now: Date) async throws -> Bool {
        let client = clientID.uuidString.lowercased()
        let rows = try await database.read { sql in
            try await sql.select().columns("secret_hash", "expires_at").from("application_secrets")
                .where("client_id", .equal, client).all(decoding: SecretRow.self, with: .snakeCase)
        }
        let presented = Secrets.sha256Hex(secret)
        var matched = false
        // Check every row so the time taken does not reveal which one matched.
        for row in rows {
            let live = row.expiresAt.map { $0 > now.epochSeconds } ?? true
            if Secrets.constantTimeEquals(row.secretHash, presented) && live { matched = true }
        }
        return matched
    }

    package func save(_ tenant: Tenant, now: Date) async throws {
        let row = TenantRow(
            id: tenant.guid, name: tenant.name, nameLower: tenant.name.lowercased(), displayName: tenant.displayName,
            defaultPolicy: tenant.defaultPolicy, pageTemplatesPath: tenant.pageTemplatesPath,
            isDefault: tenant.isDefault, createdAt: now.epochSeconds,
            settings: StoredJSON.encode(
                TenantSettings(
                    userAttributes: tenant.userAttributes, apiConnectors: tenant.apiConnectors,
                    identityProviders: tenant.identityProviders, languages: tenant.languages,
                    localizedStrings: tenant.localizedStrings,
                    authenticationExtensions: tenant.authenticationExtensions.isEmpty ? nil : tenant.authenticationExtensions)))
        try await database.transaction { sql in
            if row.isDefault {
                try await sql.update("tenants").set("is_default", to: false).run()
            }
            // Update in place: deleting the row would cascade to every user, app and grant of the tenant.
            let exists = try await sql.select().column("id").from("tenants").where("id", .equal, row.id).first()
            if exists == nil {
                try await sql.insert(into: "tenants").model(row, with: .snakeCase).run()
            } else {
                try await sql.update("tenants").set("name", to: row.name).set("name_lower", to: row.nameLower)
                    .set("display_name", to: row.displayName).set("default_policy", to: row.defaultPolicy)
                    .set("page_templates_path", to: row.pageTemplatesPath).set("is_default", to: row.isDefault)
                    .set("settings", to: row.settings).where("id", .equal, row.id).run()
            }
        }
    }

    package func save(_ flow: UserFlow) async throws {
        let definition = UserFlowDefinition(
            type: flow.type, identityProviders: flow.identityProviders, signUpAttributes: flow.signUpAttributes,
            applicationClaims: flow.applicationClaims, lifetimes: flow.lifetimes, emailVerification: flow.emailVerification,
            mfa: flow.mfa.isOn ? flow.mfa : nil, apiConnectors: flow.connectors.isEmpty ? nil : flow.connectors,
            authenticationExtensions: flow.extensions.isEmpty ? nil : flow.extensions,
            emailSignIn: flow.emailSignIn == .password ? nil : flow.emailSignIn)
        let row = UserFlowRow(
            tenantId: flow.tenantID.uuidString.lowercased(), nameLower: flow.name.lowercased(), name: flow.name,
            type: flow.type.rawValue, definition: StoredJSON.encode(definition))
        try await database.transaction { sql in
            try await sql.delete(from: "user_flows").where("tenant_id", .equal, row.tenantId)
                .where("name_lower", .equal, row.nameLower).run()
            try await sql.insert(into: "user_flows").model(row, with: .snakeCase).run()
        }
    }

    package func removeUserFlow(tenantID: UUID, name: String) async throws -> Bool {
        let (tenant, key) = (tenantID.uuidString.lowercased(), name.lowercased())
        return try await database.transaction { sql in
            guard try await sql.select().column("name").from("user_flows").where("tenant_id", .equal, tenant)
                .where("name_lower", .equal, key).first() != nil
            else { return false }
            try await sql.delete(from: "user_flows").where("tenant_id", .equal, tenant).where("name_lower", .equal, key).run()
            return true
        }
    }

    package func save(_ application: AppRegistration, now: Date) async throws {
        let row = ApplicationRow(
            clientId: application.clientIDString, tenantId: application.tenantID.uuidString.lowercased(),
            displayName: application.displayName, kind: application.kind.rawValue,
            redirectUris: StoredJSON.encode(application.redirectURIs),
            allowPublicClientFlows: application.allowPublicClientFlows, allowImplicit: application.allowImplicit,
            allowPlainPkce: application.allowPlainPKCE, requirePkce: application.requirePKCE, appIdUri: application.appIDURI,
            exposedScopes: StoredJSON.encode(application.exposedScopes), createdAt: now.epochSeconds,
            apiPermissions: StoredJSON.encode(application.apiPermissions), userFlow: application.userFlow,
            redirectPlatforms: StoredJSON.encode(application.redirectPlatforms), scopeIds: StoredJSON.encode(application.scopeIDs),
            requiredResourceAccess: StoredJSON.encode(application.requiredResourceAccess),
            groupMembershipClaims: application.groupMembershipClaims, nativeAuth: application.nativeAuthentication)
        try await database.transaction { sql in
            let exists = try await sql.select().column("tenant_id").from("applications")
                .where("client_id", .equal, row.clientId).first(decodingColumn: "tenant_id", as: String.self)
            // A client id is one tenant's: another tenant's declaration or registration naming
            // it changes nothing of it.
            if let owner = exists, owner != row.tenantId { throw TenantDirectoryError.clientIDTaken(row.clientId) }
            if exists == nil {
                try await sql.insert(into: "applications").model(row, with: .snakeCase).run()
            } else {
                try await sql.update("applications")
                    .set("display_name", to: row.displayName).set("kind", to: row.kind)
                    .set("redirect_uris", to: row.redirectUris)
                    .set("allow_public_client_flows", to: row.allowPublicClientFlows)
                    .set("allow_implicit", to: row.allowImplicit).set("allow_plain_pkce", to: row.allowPlainPkce)
                    .set("require_pkce", to: row.requirePkce)
                    .set("app_id_uri", to: row.appIdUri).set("exposed_scopes", to: row.exposedScopes)
                    .set("api_permissions", to: row.apiPermissions).set("user_flow", to: row.userFlow)
                    .set("redirect_platforms", to: row.redirectPlatforms).set("scope_ids", to: row.scopeIds)
                    .set("required_resource_access", to: row.requiredResourceAccess)
                    .set("group_membership_claims", to: row.groupMembershipClaims).set("native_auth", to: row.nativeAuth)
                    .where("client_id", .equal, row.clientId).where("tenant_id", .equal, row.tenantId).run()
            }
        }
    }

    package func secretHashes(clientID: UUID) async throws -> [String] {
        let client = clientID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("secret_hash", "expires_at").from("application_secrets")
                .where("client_id", .equal, client).all(decoding: SecretRow.self, with: .snakeCase)
        }.map(\.secretHash).sorted()
    }

    package func addSecretHash(clientID: UUID, hash: String, now: Date) async throws {
        let client = clientID.uuidString.lowercased()
        let id = UUID().uuidString.lowercased()
        try await database.transaction { sql in
            try await sql.insert(into: "application_secrets")
                .columns("id", "client_id", "secret_hash", "hint", "created_at", "expires_at")
                .values(SQLBind(id), SQLBind(client), SQLBind(hash), SQLBind("***"), SQLBind(now.epochSeconds), SQLLiteral.null).run()
        }
    }

    package func removeSecrets(clientID: UUID) async throws {
        let client = clientID.uuidString.lowercased()
        try await database.transaction { sql in try await sql.delete(from: "application_secrets").where("client_id", .equal, client).run() }
    }

    package func removeApplication(tenantID: UUID, clientID: UUID) async throws -> Bool {
        let client = clientID.uuidString.lowercased()
        let tenant = tenantID.uuidString.lowercased()
        return try await database.transaction { sql in
            let exists = try await sql.select().column("client_id").from("applications")
                .where("client_id", .equal, client).where("tenant_id", .equal, tenant).first()
            guard exists != nil else { return false }
            try await sql.delete(from: "application_secrets").where("client_id", .equal, client).run()
            try await sql.delete(from: "applications").where("client_id", .equal, client).run()
            return true
        }
    }
}

/// JSON text columns (lists and settings), encoded with sorted keys so equal values store equal text.
package enum StoredJSON {
    package static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "null"
    }

    package static func decode<T: Decodable>(_ type: T.Type, _ text: String) -> T? {
        try? JSONDecoder().decode(type, from: Data(text.utf8))
    }
}
