import Foundation
import SQLKit
import Storage
import WireCoding

/// Tenants, app registrations and user flows.
public protocol TenantDirectory: Sendable {
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
    func save(_ application: AppRegistration, now: Date) async throws
    func addSecret(clientID: UUID, secret: String, now: Date, expiresAt: Date?) async throws
    func removeApplication(tenantID: UUID, clientID: UUID) async throws -> Bool
}

/// The SQL implementation of ``TenantDirectory``.
struct SQLTenantDirectory: TenantDirectory {
    let database: any Database

    public init(database: any Database) { self.database = database }

    struct TenantRow: Codable {
        var id: String
        var name: String
        var name_lower: String
        var display_name: String
        var default_policy: String
        var page_templates_path: String?
        var is_default: Bool
        var created_at: Int64

        var tenant: Tenant? {
            guard let id = UUID(uuidString: id) else { return nil }
            return Tenant(
                id: id, name: name, displayName: display_name, defaultPolicy: default_policy,
                pageTemplatesPath: page_templates_path, isDefault: is_default)
        }
    }

    struct ApplicationRow: Codable {
        var client_id: String
        var tenant_id: String
        var display_name: String
        var kind: String
        var redirect_uris: String
        var allow_public_client_flows: Bool
        var allow_implicit: Bool
        var allow_plain_pkce: Bool
        var app_id_uri: String?
        var exposed_scopes: String
        var created_at: Int64
        var api_permissions: String

        var application: AppRegistration? {
            guard let clientID = UUID(uuidString: client_id), let tenantID = UUID(uuidString: tenant_id),
                let kind = ClientKind(rawValue: kind)
            else { return nil }
            return AppRegistration(
                clientID: clientID, tenantID: tenantID, displayName: display_name, kind: kind,
                redirectURIs: StoredJSON.decode([String].self, redirect_uris) ?? [],
                allowPublicClientFlows: allow_public_client_flows, allowImplicit: allow_implicit,
                allowPlainPKCE: allow_plain_pkce, appIDURI: app_id_uri,
                exposedScopes: StoredJSON.decode([String].self, exposed_scopes) ?? [],
                apiPermissions: StoredJSON.decode([APIPermission].self, api_permissions) ?? [])
        }
    }

    struct UserFlowRow: Codable {
        var tenant_id: String
        var name_lower: String
        var name: String
        var type: String
        var definition: String

        var flow: UserFlow? {
            guard let tenantID = UUID(uuidString: tenant_id),
                let definition = StoredJSON.decode(UserFlowDefinition.self, definition)
            else { return nil }
            return UserFlow(
                tenantID: tenantID, name: name, type: definition.type, identityProviders: definition.identityProviders,
                signUpAttributes: definition.signUpAttributes, applicationClaims: definition.applicationClaims,
                lifetimes: definition.lifetimes, emailVerification: definition.emailVerification ?? true)
        }
    }

    public func tenant(matching segment: String) async throws -> Tenant? {
        let lowered = segment.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("tenants")
                .where("name_lower", .equal, lowered).orWhere("id", .equal, lowered)
                .first(decoding: TenantRow.self)
        }?.tenant
    }

    public func defaultTenant() async throws -> Tenant? {
        try await database.read { sql in
            try await sql.select().columns("*").from("tenants").where("is_default", .equal, true)
                .first(decoding: TenantRow.self)
        }?.tenant
    }

    public func tenants() async throws -> [Tenant] {
        try await database.read { sql in
            try await sql.select().columns("*").from("tenants").orderBy("name_lower").all(decoding: TenantRow.self)
        }.compactMap(\.tenant)
    }

    public func userFlow(tenantID: UUID, name: String) async throws -> UserFlow? {
        let tenant = tenantID.uuidString.lowercased()
        let lowered = name.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("user_flows")
                .where("tenant_id", .equal, tenant).where("name_lower", .equal, lowered)
                .first(decoding: UserFlowRow.self)
        }?.flow
    }

    public func userFlows(tenantID: UUID) async throws -> [UserFlow] {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("user_flows").where("tenant_id", .equal, tenant)
                .orderBy("name_lower").all(decoding: UserFlowRow.self)
        }.compactMap(\.flow)
    }

    public func application(tenantID: UUID, clientID: String) async throws -> AppRegistration? {
        guard let id = UUID(uuidString: clientID) else { return nil }
        let tenant = tenantID.uuidString.lowercased()
        let client = id.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("applications")
                .where("client_id", .equal, client).where("tenant_id", .equal, tenant)
                .first(decoding: ApplicationRow.self)
        }?.application
    }

    public func applications(tenantID: UUID) async throws -> [AppRegistration] {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("applications").where("tenant_id", .equal, tenant)
                .orderBy("display_name").all(decoding: ApplicationRow.self)
        }.compactMap(\.application)
    }

    struct SecretRow: Codable {
        var secret_hash: String
        var expires_at: Int64?
    }

    public func verifySecret(clientID: UUID, secret: String, now: Date) async throws -> Bool {
        let client = clientID.uuidString.lowercased()
        let rows = try await database.read { sql in
            try await sql.select().columns("secret_hash", "expires_at").from("application_secrets")
                .where("client_id", .equal, client).all(decoding: SecretRow.self)
        }
        let presented = Secrets.sha256Hex(secret)
        var matched = false
        // Check every row so the time taken does not reveal which one matched.
        for row in rows {
            let live = row.expires_at.map { $0 > now.epochSeconds } ?? true
            if Secrets.constantTimeEquals(row.secret_hash, presented) && live { matched = true }
        }
        return matched
    }

    public func save(_ tenant: Tenant, now: Date) async throws {
        let row = TenantRow(
            id: tenant.guid, name: tenant.name, name_lower: tenant.name.lowercased(), display_name: tenant.displayName,
            default_policy: tenant.defaultPolicy, page_templates_path: tenant.pageTemplatesPath,
            is_default: tenant.isDefault, created_at: now.epochSeconds)
        try await database.transaction { sql in
            if row.is_default {
                try await sql.update("tenants").set("is_default", to: false).run()
            }
            // Update in place: deleting the row would cascade to every user, app and grant of the tenant.
            let exists = try await sql.select().column("id").from("tenants").where("id", .equal, row.id).first()
            if exists == nil {
                try await sql.insert(into: "tenants").model(row).run()
            } else {
                try await sql.update("tenants").set("name", to: row.name).set("name_lower", to: row.name_lower)
                    .set("display_name", to: row.display_name).set("default_policy", to: row.default_policy)
                    .set("page_templates_path", to: row.page_templates_path).set("is_default", to: row.is_default)
                    .where("id", .equal, row.id).run()
            }
        }
    }

    public func save(_ flow: UserFlow) async throws {
        let definition = UserFlowDefinition(
            type: flow.type, identityProviders: flow.identityProviders, signUpAttributes: flow.signUpAttributes,
            applicationClaims: flow.applicationClaims, lifetimes: flow.lifetimes, emailVerification: flow.emailVerification)
        let row = UserFlowRow(
            tenant_id: flow.tenantID.uuidString.lowercased(), name_lower: flow.name.lowercased(), name: flow.name,
            type: flow.type.rawValue, definition: StoredJSON.encode(definition))
        try await database.transaction { sql in
            try await sql.delete(from: "user_flows").where("tenant_id", .equal, row.tenant_id)
                .where("name_lower", .equal, row.name_lower).run()
            try await sql.insert(into: "user_flows").model(row).run()
        }
    }

    public func save(_ application: AppRegistration, now: Date) async throws {
        let row = ApplicationRow(
            client_id: application.clientIDString, tenant_id: application.tenantID.uuidString.lowercased(),
            display_name: application.displayName, kind: application.kind.rawValue,
            redirect_uris: StoredJSON.encode(application.redirectURIs),
            allow_public_client_flows: application.allowPublicClientFlows, allow_implicit: application.allowImplicit,
            allow_plain_pkce: application.allowPlainPKCE, app_id_uri: application.appIDURI,
            exposed_scopes: StoredJSON.encode(application.exposedScopes), created_at: now.epochSeconds,
            api_permissions: StoredJSON.encode(application.apiPermissions))
        try await database.transaction { sql in
            let exists = try await sql.select().column("client_id").from("applications")
                .where("client_id", .equal, row.client_id).first()
            if exists == nil {
                try await sql.insert(into: "applications").model(row).run()
            } else {
                try await sql.update("applications")
                    .set("display_name", to: row.display_name).set("kind", to: row.kind)
                    .set("redirect_uris", to: row.redirect_uris)
                    .set("allow_public_client_flows", to: row.allow_public_client_flows)
                    .set("allow_implicit", to: row.allow_implicit).set("allow_plain_pkce", to: row.allow_plain_pkce)
                    .set("app_id_uri", to: row.app_id_uri).set("exposed_scopes", to: row.exposed_scopes)
                    .set("api_permissions", to: row.api_permissions)
                    .where("client_id", .equal, row.client_id).run()
            }
        }
    }

    public func addSecret(clientID: UUID, secret: String, now: Date, expiresAt: Date?) async throws {
        let client = clientID.uuidString.lowercased()
        let hash = Secrets.sha256Hex(secret)
        let hint = String(secret.prefix(3))
        let id = UUID().uuidString.lowercased()
        try await database.transaction { sql in
            try await sql.insert(into: "application_secrets")
                .columns("id", "client_id", "secret_hash", "hint", "created_at", "expires_at")
                .values(
                    SQLBind(id), SQLBind(client), SQLBind(hash), SQLBind(hint), SQLBind(now.epochSeconds),
                    SQLBind(expiresAt?.epochSeconds)
                ).run()
        }
    }

    public func removeApplication(tenantID: UUID, clientID: UUID) async throws -> Bool {
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
enum StoredJSON {
    static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "null"
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) -> T? {
        try? JSONDecoder().decode(type, from: Data(text.utf8))
    }
}
