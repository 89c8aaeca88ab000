import Foundation
import Storage
import TodoModels
import WireCoding
import Yams

/// A tenant declared in YAML (`todo-server serve --tenant-config PATH`, SPEC §2.1):
///
/// ```yaml
/// tenant: { name: contoso.onmicrosoft.com, id: 5a2c…, displayName: Contoso, defaultPolicy: B2C_1_susi, pageTemplates: ./pages }
/// userAttributes:
///   - { name: loyaltyNumber, type: string, displayName: Loyalty number }   # string | boolean | int
/// apiConnectors:
///   - { name: checkLoyalty, url: http://127.0.0.1:7071/api/check, auth: basic, username: b2c, password: …, timeoutSeconds: 20 }
/// userFlows:
///   - { name: B2C_1_susi, type: signUpOrSignIn, identityProviders: [local, facebook.com],
///       signUpAttributes: [displayName, city, extension_loyaltyNumber],
///       applicationClaims: [name, oid, emails, extension_loyaltyNumber],
///       lifetimes: { accessTokenMinutes: 60, refreshTokenDays: 14, slidingWindowDays: 90 },
///       emailVerification: true, mfa: { methods: [totp, email], enforcement: conditional },
///       apiConnectors: { beforeCreatingUser: checkLoyalty } }
/// policyKeys:                # key sets the custom policies name (StorageReferenceId)
///   - { id: TokenSigningKeyContainer, generate: sig }
/// policies: ./policies      # custom policies (B2C_1A_…), every *.xml of the directory
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
        /// Redirect URIs on a platform other than the kind's own (`redirectUris`: web for a
        /// confidential app, public client for a public one), as Graph registers them.
        var spaRedirectUris: [String]?
        var webRedirectUris: [String]?
        var publicClientRedirectUris: [String]?
        /// Exposed scopes' own ids, where Graph was given one (the rest are derived).
        var scopeIds: [String: UUID]?
        /// The permissions the app asks for (Graph `requiredResourceAccess`), by Graph's ids.
        var requiredResourceAccess: [RequiredResourceAccess]?
        /// `SecurityGroup` or `All`: a `groups` claim in its Entra-face tokens.
        var groupMembershipClaims: String?
        /// External ID's native authentication API answers it (SPEC §2.15).
        var nativeAuthentication: Bool?
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
        /// Directory roles (`[admin]`: the admin console); absent leaves the stored ones as they are.
        var roles: [DirectoryRole]?
    }

    var tenant: TenantPart
    /// The tenant's own user attributes (B2C's custom attributes).
    var userAttributes: [CustomAttribute]?
    /// REST endpoints flows call (B2C's API connectors); `password`/`token` in clear here, or
    /// sealed (`sealed:v1:…`) as an export writes them.
    var apiConnectors: [APIConnector]?
    /// Upstream OpenID Connect providers flows may list by name; `clientSecret` in clear or
    /// sealed, as for connectors.
    var identityProviders: [UpstreamProvider]?
    /// External ID's custom authentication extensions flows bind to events:
    /// `[{name, event: OnTokenIssuanceStart | OnAttributeCollectionStart |
    /// OnAttributeCollectionSubmit | OnOtpSend, url, resourceId, claims, timeoutSeconds}]`.
    var authenticationExtensions: [AuthenticationExtension]?
    /// The pages' languages (`[en, es]`), the first the default.
    var languages: [String]?
    /// Per-language overrides of the pages' strings: `{es: {signin_submit: Entrar}}`.
    var localizedStrings: [String: [String: String]]?
    var userFlows: [FlowPart]
    /// A directory of custom policies (`*.xml`, SPEC §2.12), relative to the file: uploaded
    /// together, checked whole before anything of the declaration is written.
    var policies: String?
    /// The policy key sets the policies name, made before the policies upload.
    var policyKeys: [PolicyKeyPart]?
    var applications: [ApplicationPart]?
    var users: [UserPart]?
    /// Security groups and their members (SPEC §2.14), applied after the users.
    var groups: [GroupPart]?

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
        let attributeNames = (userAttributes ?? []).map(\.name)
        for attribute in userAttributes ?? [] {
            if !CustomAttribute.isValidName(attribute.name) {
                problems.append(
                    "user attribute name '\(TextRules.printable(attribute.name))' must be 1 to 64 letters and digits, starting with a letter"
                )
            }
            if let label = attribute.displayName, (try? TextRules.name(label, maximumLength: 256).get()) != label {
                problems.append("user attribute '\(attribute.name)': displayName must be 1 to 256 characters without controls")
            }
        }
        if Set(attributeNames.map { $0.lowercased() }).count != attributeNames.count {
            problems.append("user attribute names must be unique (case-insensitive)")
        }
        for flow in userFlows {
            for case .custom(let name) in flow.signUpAttributes ?? [] where !attributeNames.contains(name) {
                problems.append("user flow \(flow.name): extension_\(name) is not one of the declared userAttributes")
            }
            for claim in flow.applicationClaims ?? [] where claim.hasPrefix(FlowAttribute.customPrefix) {
                if !attributeNames.contains(String(claim.dropFirst(FlowAttribute.customPrefix.count))) {
                    problems.append(
                        "user flow \(flow.name): claim '\(TextRules.printable(claim))' is not one of the declared userAttributes")
                }
            }
        }
        for flow in userFlows {
            if flow.tokenLifetimes != nil, flow.lifetimes != nil {
                problems.append("user flow \(flow.name): give tokenLifetimes or lifetimes, not both")
            }
            if case .failure(.invalid(let reason))? = flow.tokenLifetimes?.lifetimes() { problems.append("user flow \(flow.name): \(reason)") }
            if let mfa = flow.mfa, mfa.enforcement != .off, mfa.methods.isEmpty {
                problems.append("user flow \(flow.name): mfa needs at least one method (totp, email)")
            }
            if let mfa = flow.mfa, mfa.enforcement != .off, flow.type == .ropc {
                problems.append("user flow \(flow.name): a ROPC flow cannot ask for a second factor")
            }
        }
        for language in languages ?? [] where !(2...3).contains(language.count) || !language.allSatisfy({ $0.isASCII && $0.isLowercase }) {
            problems.append("language '\(TextRules.printable(language))' must be a 2- or 3-letter lowercase code (en, es, ko)")
        }
        for (language, strings) in localizedStrings ?? [:] {
            if !(languages ?? ["en"]).contains(language) {
                problems.append("localizedStrings: '\(TextRules.printable(language))' is not one of the languages")
            }
            for (key, text) in strings {
                if PageLanguage.english[key] == nil {
                    problems.append("localizedStrings.\(language): no page string '\(TextRules.printable(key))'")
                }
                if (try? TextRules.freeText(text, maximumLength: 1000).get()) != text {
                    problems.append("localizedStrings.\(language).\(key) must be 1 to 1000 characters without controls")
                }
            }
        }
        let providerNames = (identityProviders ?? []).map { $0.name.lowercased() }
        for provider in identityProviders ?? [] { problems += provider.problems() }
        if Set(providerNames).count != providerNames.count { problems.append("identity provider names must be unique") }
        // A provider's accounts are kept under its issuer: two providers with one issuer would share them.
        let issuers = (identityProviders ?? []).map(\.issuer)
        if Set(issuers).count != issuers.count { problems.append("identity providers must have different issuers (metadataUrl)") }
        for flow in userFlows {
            for kind in flow.identityProviders ?? [] where kind != .local && kind != .facebook {
                if !providerNames.contains(kind.rawValue.lowercased()) {
                    problems.append(
                        "user flow \(flow.name): identity provider '\(TextRules.printable(kind.rawValue))' is not local, facebook.com or one of the identityProviders"
                    )
                }
            }
        }
        let connectorNames = (apiConnectors ?? []).map(\.name)
        for connector in apiConnectors ?? [] { problems += connector.problems() }
        if Set(connectorNames).count != connectorNames.count { problems.append("API connector names must be unique") }
        for flow in userFlows {
            for name in flow.apiConnectors?.names ?? [] where !connectorNames.contains(name) {
                problems.append("user flow \(flow.name): API connector '\(TextRules.printable(name))' is not one of the apiConnectors")
            }
            // As in B2C: the sign-up steps exist in sign-up flows only; no step in a ROPC flow.
            let signsUp = flow.type == .signUp || flow.type == .signUpOrSignIn
            if !signsUp, flow.apiConnectors?.afterFederatingIdentityProvider != nil || flow.apiConnectors?.beforeCreatingUser != nil {
                problems.append("user flow \(flow.name): afterFederatingIdentityProvider and beforeCreatingUser are sign-up steps")
            }
            if flow.type == .ropc, flow.apiConnectors?.beforeSendingToken != nil {
                problems.append("user flow \(flow.name): a ROPC flow calls no API connector")
            }
        }
        problems += extensionProblems()
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
            problems += app.platformProblems()
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
            if user.identityProvider == .local {
                if EmailAddress.canonical(user.signInName) != user.signInName {
                    problems.append("user \(user.id): signInName of a local account must be its canonical email address")
                }
                // The address shown and mailed is the sign-in name's spelling, nothing else.
                if let email = user.email, EmailAddress.canonical(email) != user.signInName {
                    problems.append("user \(user.id): email must be the spelling of its signInName")
                }
            } else {
                if (try? TextRules.name(user.signInName, maximumLength: 256).get()) != user.signInName {
                    problems.append("user \(user.id): signInName must be 1 to 256 characters without controls")
                }
                if let email = user.email, EmailAddress(email) == nil {
                    problems.append("user \(user.id): email is not a valid address")
                }
            }
            for (key, value) in user.attributes ?? [:] {
                if case .custom(let name)? = FlowAttribute(rawValue: key) {
                    guard let declared = (userAttributes ?? []).first(where: { $0.name == name }) else {
                        problems.append("user \(user.id): '\(key)' is not one of the declared userAttributes")
                        continue
                    }
                    if (try? declared.validate(value).get()) != value { problems.append("user \(user.id): attribute \(key) is not valid") }
                    continue
                }
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
        problems += policyKeyProblems()
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
}
