import Foundation
import TodoModels

/// A tenant's user-flow resources through the administration door (SPEC §2.14): its custom
/// attributes, API connectors, identity providers and user flows, as Graph changes them. They
/// live where the YAML puts them (the tenant's settings, the flows), so `tenant export` shows a
/// Graph change and applying that export changes nothing. Each change is checked whole against
/// the tenant before it is written; something a flow still uses is not removed.
extension IdentityAdministration {
    /// The tenant as stored now (not a cached copy: it is changed and written back).
    private func tenant(_ tenantID: UUID) async throws -> Tenant {
        guard let tenant = try await tenants.uncached.tenant(matching: tenantID.uuidString) else {
            throw AdministrationError.refused("no tenant \(tenantID.uuidString.lowercased())")
        }
        return tenant
    }

    /// Applies `change` to the tenant's settings and saves them, audited as `activity` on `target`.
    private func changeTenant(
        _ tenantID: UUID, _ activity: AuditActivity, target: AuditTarget, _ change: (inout Tenant) throws -> Void
    ) async throws -> Tenant {
        try await audited(activity, tenantID: tenantID, target: target) {
            var tenant = try await tenant(tenantID)
            try change(&tenant)
            try await tenants.save(tenant, now: clock.now)
            return tenant
        }
    }

    // MARK: Custom attributes

    public func addUserAttribute(_ attribute: CustomAttribute, tenantID: UUID) async throws {
        _ = try await changeTenant(tenantID, .saveUserAttribute, target: AuditTarget(type: "UserAttribute", id: attribute.name)) { tenant in
            guard CustomAttribute.isValidName(attribute.name) else {
                throw AdministrationError.refused("A custom attribute's name is letters and digits, starting with a letter, at most 64.")
            }
            guard !tenant.userAttributes.contains(where: { $0.name.lowercased() == attribute.name.lowercased() }),
                UserAttribute.allCases.allSatisfy({ $0.rawValue.lowercased() != attribute.name.lowercased() })
            else { throw AdministrationError.refused("An attribute named '\(attribute.name)' already exists.") }
            if let text = attribute.description, text.count > 1024 || TextRules.printable(text) != text {
                throw AdministrationError.refused("A description is at most 1,024 printable characters.")
            }
            guard tenant.userAttributes.count < 100 else { throw AdministrationError.refused("A tenant holds at most 100 custom attributes.") }
            tenant.userAttributes.append(attribute)
        }
    }

    public func describeUserAttribute(named name: String, description: String?, tenantID: UUID) async throws {
        _ = try await changeTenant(tenantID, .saveUserAttribute, target: AuditTarget(type: "UserAttribute", id: name)) { tenant in
            guard let index = tenant.userAttributes.firstIndex(where: { $0.name == name }) else {
                throw AdministrationError.refused("No custom attribute '\(TextRules.printable(name))'.")
            }
            if let text = description, text.count > 1024 || TextRules.printable(text) != text {
                throw AdministrationError.refused("A description is at most 1,024 printable characters.")
            }
            tenant.userAttributes[index].description = description
        }
    }

    /// Removes a custom attribute no flow collects or returns; accounts keep their values (as
    /// B2C keeps the extension property's data) but nothing shows them.
    public func removeUserAttribute(named name: String, tenantID: UUID) async throws {
        let flows = try await tenants.uncached.userFlows(tenantID: tenantID)
        _ = try await changeTenant(tenantID, .deleteUserAttribute, target: AuditTarget(type: "UserAttribute", id: name)) { tenant in
            guard tenant.userAttributes.contains(where: { $0.name == name }) else {
                throw AdministrationError.refused("No custom attribute '\(TextRules.printable(name))'.")
            }
            let key = FlowAttribute.custom(name)
            if let flow = flows.first(where: { $0.signUpAttributes.contains(key) || $0.applicationClaims.contains(key.rawValue) }) {
                throw AdministrationError.refused("The attribute is used by user flow \(flow.name): remove it there first.")
            }
            tenant.userAttributes.removeAll { $0.name == name }
        }
    }

    // MARK: API connectors

    /// Adds or replaces (by name) a connector; its password or token given in clear is sealed,
    /// one not given keeps the stored one.
    public func saveAPIConnector(_ connector: APIConnector, tenantID: UUID, creating: Bool) async throws {
        _ = try await changeTenant(tenantID, .saveAPIConnector, target: AuditTarget(type: "ApiConnector", id: connector.name)) { tenant in
            let index = tenant.apiConnectors.firstIndex { $0.name == connector.name }
            if creating, index != nil { throw AdministrationError.refused("An API connector named '\(connector.name)' already exists.") }
            if !creating, index == nil { throw AdministrationError.refused("No API connector '\(TextRules.printable(connector.name))'.") }
            let stored = index.map { tenant.apiConnectors[$0] }
            // A stored secret goes only where it was given for: a new target or user name needs it again.
            if let stored, stored.url != connector.url || stored.username != connector.username || stored.auth != connector.auth,
                connector.auth != .none, connector.password == nil, connector.token == nil
            {
                throw AdministrationError.refused("Give the connector's password (or token) again when its targetUrl, username or authentication changes.")
            }
            var sealed = connector
            for field in ["password", "token"] {
                let value = field == "password" ? connector.password : connector.token
                let old = field == "password" ? stored?.password : stored?.token
                let context = APIConnector.sealingContext(tenantID: tenantID, name: connector.name, field: field)
                // Not given: the stored one stays.
                let kept =
                    try value.flatMap {
                        try TenantDeclaration.sealedSecret($0, stored: old, context: context, owner: connector.name, dataKey: dataKey)
                    } ?? old
                if field == "password" { sealed.password = kept } else { sealed.token = kept }
            }
            if let problem = sealed.problems().first { throw AdministrationError.refused(problem) }
            if let index { tenant.apiConnectors[index] = sealed } else { tenant.apiConnectors.append(sealed) }
        }
    }

    public func removeAPIConnector(named name: String, tenantID: UUID) async throws {
        let flows = try await tenants.uncached.userFlows(tenantID: tenantID)
        _ = try await changeTenant(tenantID, .deleteAPIConnector, target: AuditTarget(type: "ApiConnector", id: name)) { tenant in
            guard tenant.apiConnectors.contains(where: { $0.name == name }) else {
                throw AdministrationError.refused("No API connector '\(TextRules.printable(name))'.")
            }
            if let flow = flows.first(where: {
                [$0.connectors.afterFederatingIdentityProvider, $0.connectors.beforeCreatingUser, $0.connectors.beforeSendingToken].contains(name)
            }) {
                throw AdministrationError.refused("The API connector is used by user flow \(flow.name): remove it there first.")
            }
            tenant.apiConnectors.removeAll { $0.name == name }
        }
    }

    // MARK: Custom authentication extensions

    /// Adds (`creating`) or replaces, by name, a custom authentication extension (SPEC §2.15). Its
    /// event never changes: flows bind it by event.
    public func saveAuthenticationExtension(_ ext: AuthenticationExtension, tenantID: UUID, creating: Bool) async throws {
        let target = AuditTarget(type: "CustomAuthenticationExtension", id: ext.name)
        _ = try await changeTenant(tenantID, .saveAuthenticationExtension, target: target) { tenant in
            let index = tenant.authenticationExtensions.firstIndex { $0.name == ext.name }
            if creating, index != nil { throw AdministrationError.refused("A custom authentication extension named '\(ext.name)' already exists.") }
            if !creating, index == nil { throw AdministrationError.refused("No custom authentication extension '\(TextRules.printable(ext.name))'.") }
            if let index, tenant.authenticationExtensions[index].event != ext.event {
                throw AdministrationError.refused("A custom authentication extension keeps its event: make a new one for another.")
            }
            if let problem = ext.problems().first { throw AdministrationError.refused(problem) }
            if index == nil, tenant.authenticationExtensions.count >= AuthenticationExtension.maximumPerTenant {
                throw AdministrationError.refused("A tenant has at most \(AuthenticationExtension.maximumPerTenant) custom authentication extensions.")
            }
            if let index { tenant.authenticationExtensions[index] = ext } else { tenant.authenticationExtensions.append(ext) }
        }
    }

    /// Removes a custom authentication extension no user flow binds (a bound one would fail closed).
    public func removeAuthenticationExtension(named name: String, tenantID: UUID) async throws {
        let flows = try await tenants.uncached.userFlows(tenantID: tenantID)
        let target = AuditTarget(type: "CustomAuthenticationExtension", id: name)
        _ = try await changeTenant(tenantID, .deleteAuthenticationExtension, target: target) { tenant in
            guard tenant.authenticationExtensions.contains(where: { $0.name == name }) else {
                throw AdministrationError.refused("No custom authentication extension '\(TextRules.printable(name))'.")
            }
            if let flow = flows.first(where: { $0.extensions.bindings.contains { $0.1 == name } }) {
                throw AdministrationError.refused("The custom authentication extension is used by user flow \(flow.name): remove it there first.")
            }
            tenant.authenticationExtensions.removeAll { $0.name == name }
        }
    }

    // MARK: Identity providers

    /// Adds or replaces (by name) an upstream OpenID Connect provider; its client secret given in
    /// clear is sealed, one not given keeps the stored one.
    public func saveIdentityProvider(_ provider: UpstreamProvider, tenantID: UUID, creating: Bool) async throws {
        _ = try await changeTenant(tenantID, .saveIdentityProvider, target: AuditTarget(type: "IdentityProvider", id: provider.name)) { tenant in
            let index = tenant.identityProviders.firstIndex { $0.name.lowercased() == provider.name.lowercased() }
            if creating, index != nil { throw AdministrationError.refused("An identity provider named '\(provider.name)' already exists.") }
            if !creating, index == nil { throw AdministrationError.refused("No identity provider '\(TextRules.printable(provider.name))'.") }
            if let problem = provider.problems().first { throw AdministrationError.refused(problem) }
            if let other = tenant.identityProviders.first(where: { $0.name.lowercased() != provider.name.lowercased() && $0.issuer == provider.issuer }) {
                throw AdministrationError.refused("Identity provider '\(other.name)' has the same metadata URL.")
            }
            let stored = index.map { tenant.identityProviders[$0] }
            var sealed = provider
            sealed.clientSecret = try provider.clientSecret.flatMap {
                try TenantDeclaration.sealedSecret(
                    $0, stored: stored?.clientSecret, context: UpstreamProvider.sealingContext(tenantID: tenantID, name: provider.name),
                    owner: provider.name, dataKey: dataKey)
            } ?? stored?.clientSecret
            if let stored, stored.issuer != provider.issuer {
                throw AdministrationError.refused("An identity provider's metadataUrl names its users' issuer: make a new provider instead.")
            }
            if let index { tenant.identityProviders[index] = sealed } else { tenant.identityProviders.append(sealed) }
        }
    }

    public func removeIdentityProvider(named name: String, tenantID: UUID) async throws {
        let flows = try await tenants.uncached.userFlows(tenantID: tenantID)
        _ = try await changeTenant(tenantID, .deleteIdentityProvider, target: AuditTarget(type: "IdentityProvider", id: name)) { tenant in
            guard let provider = tenant.upstreamProvider(named: name) else {
                throw AdministrationError.refused("No identity provider '\(TextRules.printable(name))'.")
            }
            if let flow = flows.first(where: { $0.identityProviders.contains(provider.kind) }) {
                throw AdministrationError.refused("The identity provider is used by user flow \(flow.name): remove it there first.")
            }
            tenant.identityProviders.removeAll { $0.name == provider.name }
        }
    }

    // MARK: User flows

    /// Why `flow` cannot be saved in `tenant`: a name B2C takes, and every attribute, provider
    /// and connector it names the tenant's.
    static func problem(with flow: UserFlow, in tenant: Tenant) -> String? {
        guard UserFlow.isValidName(flow.name), !flow.name.lowercased().hasPrefix("b2c_1a_") else {
            return "A user flow's name is B2C_1_ followed by letters, digits, '_' or '-'."
        }
        for attribute in flow.signUpAttributes {
            if case .custom(let name) = attribute, tenant.customAttribute(named: name) == nil {
                return "The attribute \(attribute.rawValue) is not one of the tenant's custom attributes."
            }
        }
        for provider in flow.identityProviders where provider != .local && provider != .facebook {
            if tenant.upstreamProvider(of: provider) == nil { return "The identity provider \(provider.rawValue) is not the tenant's." }
        }
        for name in [flow.connectors.afterFederatingIdentityProvider, flow.connectors.beforeCreatingUser, flow.connectors.beforeSendingToken] {
            if let name, !tenant.apiConnectors.contains(where: { $0.name == name }) {
                return "The API connector '\(TextRules.printable(name))' is not the tenant's."
            }
        }
        if flow.identityProviders.isEmpty { return "A user flow offers at least one identity provider." }
        return nil
    }

    /// Creates or replaces a user flow (Graph `b2cUserFlows`), checked against its tenant.
    public func saveUserFlow(_ flow: UserFlow, creating: Bool) async throws {
        try await audited(.saveUserFlow, tenantID: flow.tenantID, target: .policy(flow.name)) {
            let tenant = try await tenant(flow.tenantID)
            let stored = try await tenants.uncached.userFlow(tenantID: flow.tenantID, name: flow.name)
            if creating, stored != nil { throw AdministrationError.refused("A user flow named \(flow.name) already exists.") }
            if !creating, stored == nil { throw AdministrationError.refused("No user flow \(flow.name).") }
            if creating, try await customPolicies.policies(tenantID: flow.tenantID).contains(where: { $0.id.lowercased() == flow.name.lowercased() }) {
                throw AdministrationError.refused("A policy named \(flow.name) already exists.")
            }
            if let problem = Self.problem(with: flow, in: tenant) { throw AdministrationError.refused(problem) }
            try await tenants.save(flow)
        }
    }

    /// Removes a user flow no app is bound to and that is not the tenant's default.
    public func removeUserFlow(named name: String, tenantID: UUID) async throws -> Bool {
        try await audited(.deleteUserFlow, tenantID: tenantID, target: .policy(name), result: { $0 ? .policy(name) : nil }) {
            let tenant = try await tenant(tenantID)
            guard tenant.defaultPolicy.lowercased() != name.lowercased() else {
                throw AdministrationError.refused("\(name) is the tenant's default user flow.")
            }
            if let app = try await tenants.applications(tenantID: tenantID).first(where: { $0.userFlow?.lowercased() == name.lowercased() }) {
                throw AdministrationError.refused("The app '\(app.displayName)' is bound to \(name).")
            }
            return try await tenants.removeUserFlow(tenantID: tenantID, name: name)
        }
    }
}
