import Foundation
import Storage
import TodoModels
import WireCoding
import Yams

/// A tenant declared in YAML (`todo-server serve --tenant-config PATH`, SPEC §2.1):
///
/// ```yaml
/// tenant: { name: contoso.onmicrosoft.com, id: 5a2c…, displayName: Contoso, defaultPolicy: B2C_1_susi, pageTemplates: ./pages }
/// userFlows:
///   - { name: B2C_1_susi, type: signUpOrSignIn, identityProviders: [local, facebook.com],
///       signUpAttributes: [displayName, city], applicationClaims: [name, oid, emails],
///       lifetimes: { accessTokenMinutes: 60, refreshTokenDays: 14, slidingWindowDays: 90 },
///       emailVerification: true }
/// applications:
///   - { name: Contoso app, clientId: 1b2c…, kind: public, redirectUris: [http://localhost],
///       allowPublicClientFlows: true, appIdUri: https://contoso.onmicrosoft.com/api, scopes: [tasks.read],
///       secrets: [],
///       permissions: [{ api: https://contoso.onmicrosoft.com/api, scopes: [tasks.read] },
///                     { api: https://graph.microsoft.com, scopes: [User.Read] }] }
/// ```
///
/// `permissions` are the app's API permissions with admin consent granted: without them an app
/// gets no API's scopes but its own client id's (AADB2C90205).
public struct TenantDeclaration: Codable, Sendable {
    public struct TenantPart: Codable, Sendable {
        var name: String
        var id: UUID?
        var displayName: String?
        var defaultPolicy: String?
        var pageTemplates: String?
    }

    public struct Lifetimes: Codable, Sendable {
        var accessTokenMinutes: Int?
        var idTokenMinutes: Int?
        var refreshTokenDays: Int?
        var slidingWindowDays: Int?
        var unboundedSlidingWindow: Bool?
    }

    public struct FlowPart: Codable, Sendable {
        var name: String
        var type: UserFlowType
        var identityProviders: [IdentityProviderKind]?
        var signUpAttributes: [UserAttribute]?
        var applicationClaims: [String]?
        var lifetimes: Lifetimes?
        /// Sign-up verifies the email with a code (default true, as in B2C).
        var emailVerification: Bool?
    }

    public struct ApplicationPart: Codable, Sendable {
        var name: String
        var clientId: UUID?
        var kind: ClientKind
        var redirectUris: [String]?
        var allowPublicClientFlows: Bool?
        var allowImplicitFlow: Bool?
        var allowPlainPKCE: Bool?
        /// `required` or `optional` (the default, as B2C has it for native and web apps).
        var pkce: String?
        var appIdUri: String?
        var scopes: [String]?
        var secrets: [String]?
        /// Secrets by their SHA-256 hash (hex), as an export writes them: never in clear.
        var secretHashes: [String]?
        var permissions: [PermissionPart]?
        /// External ID's app-bound user flow: a policy-less (Entra) authorization runs it.
        var userFlow: String?
    }

    /// One API permission: the API by Application ID URI, client id, or
    /// `https://graph.microsoft.com`; delegated `scopes` and application `roles`.
    public struct PermissionPart: Codable, Sendable {
        var api: String
        var scopes: [String]?
        var roles: [String]?
    }

    /// An account, as `tenant export --with-users` writes it. The password hash is sealed with
    /// the data key (`sealed:…`), so the file carries no hash in clear and re-applies only where
    /// that key is.
    public struct UserPart: Codable, Sendable {
        var id: UUID
        var identityProvider: IdentityProviderKind
        var signInName: String
        var email: String?
        var emailVerified: Bool?
        var displayName: String
        var attributes: [String: String]?
        var accountEnabled: Bool?
        var forcePasswordChange: Bool?
        var passwordPolicies: String?
        var sealedPasswordHash: String?
    }

    var tenant: TenantPart
    var userFlows: [FlowPart]
    var applications: [ApplicationPart]?
    var users: [UserPart]?

    public enum DeclarationError: Error, CustomStringConvertible {
        case invalid(String)
        public var description: String {
            switch self {
            case .invalid(let reason): "invalid tenant declaration: \(reason)"
            }
        }
    }

    public static func load(path: String) throws -> TenantDeclaration {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw DeclarationError.invalid("cannot read \(path) as UTF-8 text")
        }
        let declaration: TenantDeclaration
        do {
            declaration = try YAMLDecoder().decode(TenantDeclaration.self, from: text)
        } catch {
            throw DeclarationError.invalid("\(path): \(Self.explain(error))")
        }
        try declaration.validate(relativeTo: URL(fileURLWithPath: path).deletingLastPathComponent())
        return declaration
    }

    /// One line naming where the file is wrong and how: the YAML position for a syntax error,
    /// the key path for a missing or mistyped value.
    static func explain(_ error: any Error) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case YamlError.scanner(_, let problem, let mark, _), YamlError.parser(_, let problem, let mark, _):
            return "line \(mark.line), column \(mark.column): \(problem)"
        case DecodingError.dataCorrupted(let context):
            if let underlying = context.underlyingError { return explain(underlying) }
            return "\(path(context.codingPath)): \(context.debugDescription)"
        case DecodingError.keyNotFound(let key, let context):
            return "'\(path(context.codingPath + [key]))' is missing"
        case DecodingError.typeMismatch(let type, let context), DecodingError.valueNotFound(let type, let context):
            return "'\(path(context.codingPath))' should be \(type == String.self ? "text" : "a \(type)")"
        default:
            return String(describing: error).split(separator: "\n").first.map(String.init) ?? "not a tenant declaration"
        }
    }

    /// Checks everything and names every problem at once (configuration fails fast, STYLE.md).
    func validate(relativeTo directory: URL) throws {
        var problems: [String] = []
        if !tenant.name.contains(".") { problems.append("tenant.name '\(tenant.name)' should look like 'contoso.onmicrosoft.com'") }
        for flow in userFlows where !UserFlow.isValidName(flow.name) {
            problems.append("user flow name '\(flow.name)' must match b2c_1_… or b2c_1a_…")
        }
        let names = userFlows.map { $0.name.lowercased() }
        if Set(names).count != names.count { problems.append("user flow names must be unique (case-insensitive)") }
        if let policy = tenant.defaultPolicy, !names.contains(policy.lowercased()) {
            problems.append("tenant.defaultPolicy '\(policy)' is not one of the user flows")
        }
        // Names are shown on pages, in tokens and in the admin CLI: the same rules as a user's name.
        for (label, value) in [("tenant.name", tenant.name), ("tenant.displayName", tenant.displayName ?? tenant.name)]
            + (applications ?? []).map({ ("application name", $0.name) })
        where (try? TextRules.name(value, maximumLength: 256).get()) != value {
            problems.append(
                "\(label) '\(TextRules.printable(value))' must be 1 to 256 characters without controls, invisible characters or extra spaces"
            )
        }
        for app in applications ?? [] {
            if let flow = app.userFlow, !names.contains(flow.lowercased()) {
                problems.append("application '\(app.name)': userFlow '\(TextRules.printable(flow))' is not one of the user flows")
            }
            if let pkce = app.pkce, !["required", "optional"].contains(pkce.lowercased()) {
                problems.append("application '\(app.name)': pkce must be required or optional, not '\(TextRules.printable(pkce))'")
            }
            for permission in app.permissions ?? [] {
                switch resolveAPI(permission.api) {
                case .graph:
                    let served = Set(APIPermission.graphScopes.map { $0.lowercased() })
                    for scope in permission.scopes ?? [] where !served.contains(scope.lowercased()) {
                        problems.append("application '\(app.name)': Graph scope '\(scope)' is not served (User.Read is)")
                    }
                case .app(let index):
                    let api = (applications ?? [])[index]
                    let exposed = Set((api.scopes ?? []).map { $0.lowercased() })
                    for scope in permission.scopes ?? [] where !exposed.contains(scope.lowercased()) {
                        problems.append("application '\(app.name)': '\(api.name)' exposes no scope '\(scope)'")
                    }
                case nil:
                    problems.append(
                        "application '\(app.name)': permission for unknown API '\(permission.api)' (an appIdUri, clientId or https://graph.microsoft.com)"
                    )
                }
            }
            if app.kind == .confidential, (app.secrets ?? []).isEmpty, (app.secretHashes ?? []).isEmpty {
                problems.append("confidential application '\(app.name)' needs at least one secret")
            }
            if app.kind == .public, !(app.secrets ?? []).isEmpty || !(app.secretHashes ?? []).isEmpty {
                problems.append("public application '\(app.name)' must not have secrets")
            }
            for hash in app.secretHashes ?? [] where hash.count != 64 || !hash.allSatisfy(\.isHexDigit) {
                problems.append("a secretHashes entry of '\(app.name)' is not a SHA-256 hex digest")
            }
            for secret in app.secrets ?? [] where secret.count < 16 {
                problems.append("a secret of '\(app.name)' is shorter than 16 characters")
            }
        }
        for user in users ?? [] {
            if (try? TextRules.name(user.displayName, maximumLength: 256).get()) != user.displayName {
                problems.append("user \(user.id): displayName must be 1 to 256 characters without controls")
            }
            switch user.identityProvider {
            case .local:
                if EmailAddress.canonical(user.signInName) != user.signInName {
                    problems.append("user \(user.id): signInName of a local account must be its canonical email address")
                }
                // The address shown and mailed is the sign-in name's spelling, nothing else.
                if let email = user.email, EmailAddress.canonical(email) != user.signInName {
                    problems.append("user \(user.id): email must be the spelling of its signInName")
                }
            case .facebook:
                if (try? TextRules.name(user.signInName, maximumLength: 256).get()) != user.signInName {
                    problems.append("user \(user.id): signInName must be 1 to 256 characters without controls")
                }
                if let email = user.email, EmailAddress(email) == nil {
                    problems.append("user \(user.id): email is not a valid address")
                }
            }
            for (key, value) in user.attributes ?? [:] {
                guard let attribute = UserAttribute(rawValue: key), attribute != .displayName else {
                    problems.append("user \(user.id): '\(TextRules.printable(key))' is not a user attribute")
                    continue
                }
                if case .failure = attribute.validate(value) { problems.append("user \(user.id): attribute \(key) is not valid") }
            }
            if let policies = user.passwordPolicies, PasswordPolicies.normalized(policies) == nil {
                problems.append("user \(user.id): passwordPolicies must name DisablePasswordExpiration and/or DisableStrongPassword")
            }
        }
        if Set((users ?? []).map(\.id)).count != (users ?? []).count { problems.append("user ids must be unique") }
        if !problems.isEmpty { throw DeclarationError.invalid(problems.joined(separator: "; ")) }
    }

    enum DeclaredAPI {
        case graph
        /// The index of the declared application.
        case app(Int)
    }

    /// The API a permission names, among Microsoft Graph and the declared apps.
    func resolveAPI(_ api: String) -> DeclaredAPI? {
        let name = APIPermission.APIName(api)
        if name == .graph { return .graph }
        return (applications ?? []).firstIndex { name.names(appIDURI: $0.appIdUri, clientID: $0.clientId?.uuidString) }.map(DeclaredAPI.app)
    }

    /// The tenant, made the default, with its flows and apps. Existing apps with the same client
    /// id are updated; their secrets are replaced by the declared ones.
    public func apply(to server: IdentityServer, baseDirectory: URL) async throws -> Tenant {
        try await applyReporting(to: server, baseDirectory: baseDirectory, includeUsers: false).tenant
    }

    /// ``apply(to:baseDirectory:)``, saying what changed: one line per tenant, flow, app and user
    /// that was added or updated. Applying the same file twice changes nothing the second time.
    /// - Parameter includeUsers: whether the declaration's `users` are applied. `serve
    ///   --tenant-config` leaves them out: applied at every start, they would undo what Graph
    ///   changed since (a disabled account, a new password, a deleted user).
    public func applyReporting(to server: IdentityServer, baseDirectory: URL, includeUsers: Bool = true) async throws -> (
        tenant: Tenant, changes: [String]
    ) {
        var changes: [String] = []
        func note(_ kind: String, _ name: String, before: Bool?) {
            if let before { if !before { changes.append("\(kind) \(name) updated") } } else { changes.append("\(kind) \(name) added") }
        }
        let now = server.clock.now
        // By id first, then by name: a tenant of the same name keeps its id (and its issuer).
        var existing: Tenant?
        if let id = tenant.id { existing = try await server.tenants.tenant(matching: id.uuidString) }
        if existing == nil { existing = try await server.tenants.tenant(matching: tenant.name) }
        let tenantID = existing?.id ?? tenant.id ?? UUID()
        // Every account is prepared and checked before the first write, so a refusal (another
        // data key, an id of another tenant, a taken sign-in name) leaves the store as it was.
        var accounts: [(user: UserAccount, part: UserPart, stored: UserAccount?)] = []
        for part in includeUsers ? users ?? [] : [] {
            let user = try part.account(tenantID: tenantID, dataKey: server.service.dataKey, now: now)
            let stored = try await server.users.user(id: user.id)
            if let stored, stored.tenantID != tenantID { throw DeclarationError.invalid("user \(user.id) belongs to another tenant") }
            if stored == nil,
                let holder = try await server.users.user(tenantID: tenantID, provider: user.identityProvider, signInName: user.signInName)
            {
                throw DeclarationError.invalid(
                    "user \(user.id): \(holder.objectID) already signs in as \(TextRules.printable(user.signInName))")
            }
            accounts.append((user, part, stored))
        }
        let templates = tenant.pageTemplates.map { path in
            path.hasPrefix("/") ? path : baseDirectory.appendingPathComponent(path).standardizedFileURL.path
        }
        let model = Tenant(
            id: tenantID, name: tenant.name, displayName: tenant.displayName ?? tenant.name,
            defaultPolicy: tenant.defaultPolicy ?? userFlows.first?.name ?? "B2C_1_susi", pageTemplatesPath: templates,
            isDefault: true)
        if existing != model {
            try await server.tenants.save(model, now: now)
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
            let declared = UserFlow(
                tenantID: model.id, name: flow.name, type: flow.type, identityProviders: flow.identityProviders ?? [.local],
                signUpAttributes: flow.signUpAttributes ?? [.displayName],
                applicationClaims: flow.applicationClaims ?? UserFlow.defaultClaims,
                lifetimes: lifetimes, emailVerification: flow.emailVerification ?? true)
            let stored = try await server.tenants.userFlow(tenantID: model.id, name: flow.name)
            if stored != declared {
                try await server.tenants.save(declared)
                note("user flow", flow.name, before: stored.map { _ in false })
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
        let storedApps = try await server.tenants.applications(tenantID: model.id)
        for (index, app) in (applications ?? []).enumerated() {
            let permissions = (app.permissions ?? []).compactMap { permission in
                resource(permission.api).map { APIPermission(resource: $0, scopes: permission.scopes ?? [], roles: permission.roles ?? []) }
            }
            let registration = AppRegistration(
                clientID: clientIDs[index], tenantID: model.id, displayName: app.name, kind: app.kind,
                redirectURIs: app.redirectUris ?? [], allowPublicClientFlows: app.allowPublicClientFlows ?? false,
                allowImplicit: app.allowImplicitFlow ?? false, allowPlainPKCE: app.allowPlainPKCE ?? false,
                requirePKCE: app.pkce?.lowercased() == "required", appIDURI: app.appIdUri,
                exposedScopes: app.scopes ?? [], apiPermissions: permissions,
                userFlow: app.userFlow.flatMap { flow in userFlows.first { $0.name.lowercased() == flow.lowercased() }?.name })
            let stored = storedApps.first { $0.clientID == registration.clientID }
            let hashes = ((app.secrets ?? []).map(Secrets.sha256Hex) + (app.secretHashes ?? []).map { $0.lowercased() }).sorted()
            let storedHashes = stored == nil ? [] : try await server.tenants.secretHashes(clientID: registration.clientID)
            guard stored != registration || storedHashes != hashes else { continue }
            // Updated in place, not removed and re-added: what hangs off the app (users' consents,
            // refresh tokens) survives a restart with the same declaration.
            try await server.tenants.save(registration, now: now)
            if storedHashes != hashes {
                try await server.tenants.removeSecrets(clientID: registration.clientID)
                for secret in app.secrets ?? [] {
                    try await server.tenants.addSecret(clientID: registration.clientID, secret: secret, now: now, expiresAt: nil)
                }
                for hash in app.secretHashes ?? [] {
                    try await server.tenants.addSecretHash(clientID: registration.clientID, hash: hash.lowercased(), now: now)
                }
            }
            note("application", "'\(app.name)'", before: stored.map { _ in false })
        }
        for (user, part, stored) in accounts {
            let name = TextRules.printable(user.email ?? user.signInName)
            if let stored {
                guard !part.matches(stored, hash: user.passwordHash) else { continue }
                try await server.users.replace(user)
                // A new password or a disabled account ends the ways in, as through Graph.
                if stored.passwordHash != user.passwordHash || (stored.accountEnabled && !user.accountEnabled) {
                    try await server.users.revokeSessions(id: user.id, now: now)
                }
                note("user", name, before: false)
            } else {
                try await server.users.create(user)
                note("user", name, before: nil)
            }
        }
        _ = try await server.keys.activeKey()
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
