import Foundation
import IdentityDirectory
import Logging
import TodoModels
import TrustFramework

/// Why a technical profile stopped: a message for the page it was validating (B2C shows it on
/// the form), or a failure for the app.
enum PolicyProfileFailure: Error, Equatable {
    case userMessage(String)
    case protocolFailure(ProtocolFailure)
}

/// B2C's `AzureActiveDirectoryProvider` on this service's directory (SPEC §2.12): `Read` and
/// `Write` of a local account found by `objectId` or `signInNames.emailAddress`, with
/// `RaiseErrorIfClaimsPrincipalDoesNotExist` / `AlreadyExists` and their `UserMessageIf…`
/// texts; and the `login-NonInteractive` password check B2C makes against
/// login.microsoftonline.com, answered in-process by the same password rules (lockout included).
struct PolicyDirectoryProvider: Sendable {
    let users: any UserDirectory
    let hasher: PasswordHasher
    let passwords: PasswordAuthenticator

    /// The directory property a claim reference names (its partner claim type, else its claim type).
    static func property(_ reference: PolicyClaimReference) -> String { reference.partnerClaimType ?? reference.claimType }

    /// What a directory profile did, and whether it proves who the person is: an account it
    /// created (sign-up) or one found by the email address this journey proved with a code does;
    /// one found by anything else a person typed (a name, an id) only reads it.
    struct Outcome {
        var account: UserAccount
        var proves: Bool
        var created = false
    }

    /// Runs a directory profile on `claims`. A `Write` changes only the journey's own account
    /// (`journeyUser`), the one whose address the journey proved (`provenEmail`) or the one of
    /// the provider identity it verified (`provenAlternativeSecurityIds`), never another found
    /// by what a person typed.
    func run(
        _ profile: PolicyTechnicalProfile, claims: inout PolicyClaims, tenant: Tenant, now: Date, journeyUser: UUID?, provenEmail: String?,
        provenAlternativeSecurityIds: [String] = []
    ) async throws -> Outcome? {
        let operation = profile.metadata["Operation"] ?? "Read"
        guard let key = profile.inputClaims.first else { return nil }
        let keyValue = claims.text(key.claimType) ?? key.defaultValue ?? ""
        let byAlternativeSecurityId = Self.property(key).lowercased() == "alternativesecurityid"
        let found = try await account(property: Self.property(key), value: keyValue, tenant: tenant)
        // An identity the provider step verified proves its account; the same text from anywhere
        // else (a page, a default) only reads it.
        let byProvenIdentity = byAlternativeSecurityId && provenAlternativeSecurityIds.contains(keyValue)
        let byProvenEmail =
            byProvenIdentity
            || found.map { user in provenEmail != nil && user.signInName == provenEmail && user.identityProvider == .local } ?? false
        let missing = {
            PolicyProfileFailure.userMessage(
                profile.metadata["UserMessageIfClaimsPrincipalDoesNotExist"] ?? "An account could not be found for the provided user ID.")
        }
        switch operation {
        case "Read":
            guard let user = found else {
                if profile.flag("RaiseErrorIfClaimsPrincipalDoesNotExist", default: false) { throw missing() }
                return nil
            }
            write(user, into: &claims, profile.outputClaims, tenant: tenant, created: false)
            return Outcome(account: user, proves: byProvenEmail)
        case "Write":
            if let user = found {
                if profile.flag("RaiseErrorIfClaimsPrincipalAlreadyExists", default: false) {
                    throw PolicyProfileFailure.userMessage(
                        profile.metadata["UserMessageIfClaimsPrincipalAlreadyExists"] ?? "A user with the specified ID already exists. Please choose a different one.")
                }
                guard user.id == journeyUser || byProvenEmail else {
                    throw PolicyProfileFailure.protocolFailure(
                        .policyNotRunnable("'\(profile.id)' would change an account this sign-in has not proven."))
                }
                let updated = try await update(user, from: claims, profile.persistedClaims, now: now, provenEmail: provenEmail)
                write(updated, into: &claims, profile.outputClaims, tenant: tenant, created: false)
                return Outcome(account: updated, proves: byProvenEmail)
            }
            if profile.flag("RaiseErrorIfClaimsPrincipalDoesNotExist", default: false) { throw missing() }
            if byAlternativeSecurityId {
                guard byProvenIdentity, let identity = PolicyFederation.decodeAlternativeSecurityId(keyValue) else {
                    throw PolicyProfileFailure.protocolFailure(
                        .policyNotRunnable("'\(profile.id)' would create an account for a provider identity this sign-in has not verified."))
                }
                let user = try await createFederated(identity, from: claims, profile.persistedClaims, tenant: tenant, now: now)
                write(user, into: &claims, profile.outputClaims, tenant: tenant, created: true)
                return Outcome(account: user, proves: true, created: true)
            }
            guard !keyValue.isEmpty else { throw PolicyProfileFailure.userMessage("Please enter a valid email address.") }
            let user = try await create(from: claims, profile.persistedClaims, tenant: tenant, now: now, provenEmail: provenEmail)
            write(user, into: &claims, profile.outputClaims, tenant: tenant, created: true)
            return Outcome(account: user, proves: true, created: true)
        default:
            throw PolicyProfileFailure.protocolFailure(.policyNotRunnable("The directory operation '\(operation)' of '\(profile.id)' is not supported by this service."))
        }
    }

    /// `login-NonInteractive`: the `username` and `password` input claims checked as a sign-in.
    func checkPassword(_ profile: PolicyTechnicalProfile, claims: inout PolicyClaims, tenant: Tenant, source: String, now: Date, logger: Logger)
        async throws -> UserAccount
    {
        // Where two input claims send the same parameter, the including profile's (the later one)
        // wins when it has a value: the password-change scenario's `oldPassword` over the base's
        // `password`, which a person typed on another page, if at all.
        let bag = claims
        func parameter(_ name: String) -> String {
            profile.inputClaims.filter { Self.property($0) == name }.reversed().compactMap { bag.text($0.claimType) }
                .first { !$0.isEmpty } ?? ""
        }
        let username = parameter("username")
        let password = parameter("password")
        switch try await passwords.authenticate(tenantID: tenant.id, email: username, password: password, source: source, now: now, logger: logger) {
        case .invalid:
            // B2C's texts for the sign-in page (UserMessageIfInvalidPassword and friends).
            throw PolicyProfileFailure.userMessage("Your password is incorrect.")
        case .locked: throw PolicyProfileFailure.userMessage(ProtocolFailure.accountLocked.message)
        case .disabled: throw PolicyProfileFailure.userMessage(ProtocolFailure.accountDisabled.message)
        case .success(let user):
            // The id token B2C gets back, by its claim names.
            let values: [String: String] = [
                "oid": user.objectID, "sub": user.objectID, "tid": tenant.guid, "name": user.displayName,
                "given_name": user.attributes[UserAttribute.givenName.rawValue] ?? "",
                "family_name": user.attributes[UserAttribute.surname.rawValue] ?? "", "upn": "\(user.objectID)@\(tenant.name)",
                "email": user.email ?? "",
            ]
            for reference in profile.outputClaims {
                if let value = values[Self.property(reference)], !value.isEmpty {
                    claims[reference.claimType] = .string(value)
                } else if let value = reference.defaultValue {
                    claims[reference.claimType] = .string(value)
                }
            }
            return user
        }
    }

    private func account(property: String, value: String, tenant: Tenant) async throws -> UserAccount? {
        guard !value.isEmpty else { return nil }
        switch property {
        case "objectId":
            guard let id = UUID(uuidString: value), let user = try await users.user(id: id), user.tenantID == tenant.id else { return nil }
            return user
        case "signInNames.emailAddress", "email", "signInNames.userName":
            guard let email = EmailAddress(value) else { return nil }
            return try await users.user(tenantID: tenant.id, provider: .local, signInName: email.canonical)
        case let name where name.lowercased() == "alternativesecurityid":
            guard let identity = PolicyFederation.decodeAlternativeSecurityId(value) else { return nil }
            return try await users.user(tenantID: tenant.id, provider: identity.provider, signInName: identity.subject)
        default: return nil
        }
    }

    private func create(from claims: PolicyClaims, _ persisted: [PolicyClaimReference], tenant: Tenant, now: Date, provenEmail: String?)
        async throws -> UserAccount
    {
        var values: [String: String] = [:]
        for reference in persisted {
            if let value = claims.text(reference.claimType) ?? reference.defaultValue { values[Self.property(reference)] = value }
        }
        guard let email = EmailAddress(values["signInNames.emailAddress"] ?? values["email"] ?? "") else {
            throw PolicyProfileFailure.userMessage("Please enter a valid email address.")
        }
        guard let password = values["password"], !password.isEmpty else {
            throw PolicyProfileFailure.userMessage("Please enter a password.")
        }
        // The service's password rules hold wherever a policy writes a password.
        if let problem = PasswordPolicy.problem(with: password) { throw PolicyProfileFailure.userMessage(problem) }
        let hash = try await hasher.hash(password)
        let user = UserAccount(
            tenantID: tenant.id, identityProvider: .local, signInName: email.canonical, email: email.display,
            displayName: values["displayName"] ?? String(email.display.split(separator: "@").first ?? ""),
            attributes: Self.attributes(values), passwordHash: hash, createdAt: now, emailVerified: email.canonical == provenEmail)
        do {
            try await users.create(user)
        } catch UserDirectoryError.duplicate {
            throw PolicyProfileFailure.userMessage("A user with the specified ID already exists. Please choose a different one.")
        }
        return user
    }

    /// An account of a provider identity (B2C's `AAD-UserWriteUsingAlternativeSecurityId`): no
    /// password; its address, when the policy persists one, is not proven by this service.
    private func createFederated(
        _ identity: (provider: IdentityProviderKind, subject: String), from claims: PolicyClaims, _ persisted: [PolicyClaimReference],
        tenant: Tenant, now: Date
    ) async throws -> UserAccount {
        var values: [String: String] = [:]
        for reference in persisted {
            // A collection (`otherMails`) persists its first value as the account's address.
            let value: String? =
                if case .collection(let items)? = claims[reference.claimType] { items.first } else { claims.text(reference.claimType) }
            if let value = value ?? reference.defaultValue { values[Self.property(reference)] = value }
        }
        let email = EmailAddress(values["otherMails"] ?? values["email"] ?? values["mail"] ?? "")
        let user = UserAccount(
            tenantID: tenant.id, identityProvider: identity.provider, signInName: identity.subject, email: email?.display,
            // The name rules of every account, as the built-in flows apply them to a provider's names.
            displayName: values["displayName"].flatMap { try? TextRules.name($0, maximumLength: 256).get() }.flatMap { $0.isEmpty ? nil : $0 }
                ?? email.map { String($0.display.split(separator: "@").first ?? "") } ?? "unknown",
            attributes: Self.attributes(values).compactMapValues { try? TextRules.name($0, maximumLength: 256).get() }, createdAt: now,
            emailVerified: false)
        do {
            try await users.create(user)
        } catch UserDirectoryError.duplicate {
            // The same person finished another sign-in first: that account.
            guard let existing = try await users.user(tenantID: tenant.id, provider: identity.provider, signInName: identity.subject) else {
                throw PolicyProfileFailure.userMessage("The account could not be created.")
            }
            return existing
        }
        return user
    }

    private func update(_ user: UserAccount, from claims: PolicyClaims, _ persisted: [PolicyClaimReference], now: Date, provenEmail: String?)
        async throws -> UserAccount
    {
        var values: [String: String] = [:]
        for reference in persisted { if let value = claims.text(reference.claimType) { values[Self.property(reference)] = value } }
        var updated = user
        if let name = values["displayName"] { updated.displayName = name }
        updated.attributes.merge(Self.attributes(values)) { _, new in new }
        try await users.updateProfile(id: user.id, displayName: updated.displayName, attributes: updated.attributes, now: now)
        if let password = values["password"], !password.isEmpty {
            if let problem = PasswordPolicy.problem(with: password) { throw PolicyProfileFailure.userMessage(problem) }
            try await users.setPassword(
                id: user.id, hash: try await hasher.hash(password), emailProven: provenEmail == user.signInName, forceChange: false, now: now)
        }
        return updated
    }

    /// The directory's optional properties as this service's account attributes.
    private static func attributes(_ values: [String: String]) -> [String: String] {
        var attributes: [String: String] = [:]
        for attribute in UserAttribute.allCases where attribute != .displayName {
            if let value = values[attribute.rawValue], !value.isEmpty { attributes[attribute.rawValue] = value }
        }
        for (key, value) in values where key.hasPrefix("extension_") { attributes[key] = value }
        return attributes
    }

    /// The account's properties into the profile's output claims.
    private func write(_ user: UserAccount, into claims: inout PolicyClaims, _ outputs: [PolicyClaimReference], tenant: Tenant, created: Bool) {
        for reference in outputs {
            let property = Self.property(reference)
            let value: PolicyClaimValue? =
                switch property {
                case "objectId": .string(user.objectID)
                case "newClaimsPrincipalCreated": .boolean(created)
                case "signInNames.emailAddress", "email", "mail": user.email.map(PolicyClaimValue.string)
                case "otherMails": .collection(user.email.map { [$0] } ?? [])
                case "displayName": .string(user.displayName)
                case "userPrincipalName": .string("\(user.objectID)@\(tenant.name)")
                case "accountEnabled": .boolean(user.accountEnabled)
                default: user.attributes[property].map(PolicyClaimValue.string)
                }
            if let value { claims[reference.claimType] = value } else if let fallback = reference.defaultValue { claims[reference.claimType] = .string(fallback) }
        }
    }
}
