import Foundation
import Yams

extension IdentityAdministration {
    /// The tenant as the YAML declaration `serve --tenant-config` and `tenant apply` read
    /// (issue 11): its flows, apps (secrets as SHA-256 hashes only, the store never had them in
    /// clear) and, with `withUsers`, its accounts with their password hashes sealed by the data
    /// key. Applying the result to the same installation changes nothing.
    public func exportTenant(tenantID: UUID, withUsers: Bool) async throws -> String {
        guard let tenant = try await tenants.tenant(matching: tenantID.uuidString) else {
            throw AdministrationError.refused("no tenant \(tenantID.uuidString.lowercased())")
        }
        let flows = try await tenants.userFlows(tenantID: tenantID)
        let apps = try await tenants.applications(tenantID: tenantID)
        var declaration = TenantDeclaration(
            tenant: .init(
                name: tenant.name, id: tenant.id, displayName: tenant.displayName, defaultPolicy: tenant.defaultPolicy,
                pageTemplates: tenant.pageTemplatesPath),
            userAttributes: tenant.userAttributes.isEmpty ? nil : tenant.userAttributes,
            apiConnectors: tenant.apiConnectors.isEmpty ? nil : tenant.apiConnectors,
            identityProviders: tenant.identityProviders.isEmpty ? nil : tenant.identityProviders,
            authenticationExtensions: tenant.authenticationExtensions.isEmpty ? nil : tenant.authenticationExtensions,
            languages: tenant.languages.isEmpty ? nil : tenant.languages,
            localizedStrings: tenant.localizedStrings.isEmpty ? nil : tenant.localizedStrings,
            userFlows: flows.map { Self.declared($0, tenant: tenant) }, applications: [], users: nil)
        for app in apps {
            // An API is named as a permission names it: Graph by its URL, an app by its App ID URI.
            let permissions = app.apiPermissions.map { permission in
                let api =
                    permission.resource == APIPermission.graphResource
                    ? "https://graph.microsoft.com"
                    : apps.first { $0.clientIDString == permission.resource }?.appIDURI ?? permission.resource
                return TenantDeclaration.PermissionPart(
                    api: api, scopes: permission.scopes.isEmpty ? nil : permission.scopes,
                    roles: permission.roles.isEmpty ? nil : permission.roles)
            }
            let hashes = try await tenants.secretHashes(clientID: app.clientID)
            func others(_ platform: RedirectPlatform) -> [String]? {
                platform == app.defaultPlatform || app.redirectURIs(on: platform).isEmpty ? nil : app.redirectURIs(on: platform)
            }
            var part = TenantDeclaration.ApplicationPart(
                    name: app.displayName, clientId: app.clientID, kind: app.kind, redirectUris: app.redirectURIs(on: app.defaultPlatform),
                    allowPublicClientFlows: app.allowPublicClientFlows, allowImplicitFlow: app.allowImplicit,
                    allowPlainPKCE: app.allowPlainPKCE, pkce: app.requirePKCE ? "required" : "optional", appIdUri: app.appIDURI,
                    scopes: app.exposedScopes.isEmpty ? nil : app.exposedScopes, secrets: nil, secretHashes: hashes.isEmpty ? nil : hashes,
                    permissions: permissions.isEmpty ? nil : permissions, userFlow: app.userFlow)
            part.spaRedirectUris = others(.spa)
            part.webRedirectUris = others(.web)
            part.publicClientRedirectUris = others(.publicClient)
            part.scopeIds = app.scopeIDs.isEmpty ? nil : app.scopeIDs
            part.requiredResourceAccess = app.requiredResourceAccess.isEmpty ? nil : app.requiredResourceAccess
            part.groupMembershipClaims = app.groupMembershipClaims
            part.nativeAuthentication = app.nativeAuthentication ? true : nil
            declaration.applications?.append(part)
        }
        if withUsers {
            var parts: [TenantDeclaration.UserPart] = []
            for user in try await users.users(tenantID: tenantID) {
                let held = try await roles?.roles(of: user.id).sorted { $0.rawValue < $1.rawValue } ?? []
                parts.append(TenantDeclaration.UserPart(
                    id: user.id, identityProvider: user.identityProvider, signInName: user.signInName, email: user.email,
                    emailVerified: user.emailVerified, displayName: user.displayName,
                    attributes: Self.declaredAttributes(user.attributes, tenant: tenant),
                    accountEnabled: user.accountEnabled, forcePasswordChange: user.forcePasswordChange,
                    passwordPolicies: user.passwordPolicies,
                    sealedPasswordHash: try user.passwordHash.map {
                        try dataKey.seal($0, context: TenantDeclaration.UserPart.sealingContext(user.id))
                    }, roles: held.isEmpty ? nil : held))
            }
            declaration.users = parts
        }
        declaration.groups = try await declaredGroups(tenantID: tenantID)
        let encoder = YAMLEncoder()
        encoder.options.sortKeys = false
        return "# TodoB2C tenant declaration, exported \(ISO8601DateFormatter().string(from: clock.now)).\n"
            + "# Apply with `todo-server tenant apply FILE`; `serve --tenant-config FILE` applies all but the users.\n"
            + (try encoder.encode(declaration))
    }

    private static func declared(_ flow: UserFlow, tenant: Tenant) -> TenantDeclaration.FlowPart {
        let lifetimes = flow.lifetimes
        // Upstream providers by the name the declaration gives them.
        let providers = flow.identityProviders.compactMap { kind in
            tenant.upstreamProvider(of: kind).map { IdentityProviderKind(rawValue: $0.name) } ?? kind
        }
        return TenantDeclaration.FlowPart(
            name: flow.name, type: flow.type, identityProviders: providers, signUpAttributes: flow.signUpAttributes,
            applicationClaims: flow.applicationClaims,
            tokenLifetimes: TenantDeclaration.TokenLifetimesPart(lifetimes), lifetimes: nil,
            emailVerification: flow.emailVerification, mfa: flow.mfa.isOn ? flow.mfa : nil,
            apiConnectors: flow.connectors.isEmpty ? nil : flow.connectors,
            authenticationExtensions: flow.extensions.isEmpty ? nil : flow.extensions,
            emailSignIn: flow.emailSignIn == .password ? nil : flow.emailSignIn)
    }

    /// An account's attributes as a declaration may carry them: built-in ones, and the tenant's
    /// own only while declared and of their declared type (a value kept from an older
    /// declaration would make the file refuse to apply).
    private static func declaredAttributes(_ attributes: [String: String], tenant: Tenant) -> [String: String]? {
        let kept = attributes.filter { key, value in
            guard case .custom? = FlowAttribute(rawValue: key) else { return true }
            return tenant.customAttribute(forKey: key).map { (try? $0.validate(value).get()) == value } ?? false
        }
        return kept.isEmpty ? nil : kept
    }
}
