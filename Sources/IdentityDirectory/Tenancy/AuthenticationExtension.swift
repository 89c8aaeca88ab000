import Foundation
import TodoModels
import WireCoding

/// A custom authentication extension (SPEC §2.15; External ID's counterpart of B2C's API
/// connectors): a REST endpoint the service calls at one event of a sign-up or sign-in, with
/// Microsoft's request envelope (`type`, `source`, `data` with its `@odata.type` and the
/// `authenticationContext`), authenticated by a bearer token the service issues for the
/// extension's `resourceId` as Entra's authentication events app; the answer's `actions` say what
/// to do. Declared by the tenant, bound to events by each user flow (``FlowExtensions``).
public struct AuthenticationExtension: Sendable, Codable, Equatable {
    /// The events, as External ID names them.
    public enum Event: String, Sendable, Codable, CaseIterable {
        /// Before the tokens are issued: `provideClaimsForToken`.
        case onTokenIssuanceStart = "OnTokenIssuanceStart"
        /// Before a sign-up collects attributes: `continueWithDefaultBehavior`, `setPrefillValues`,
        /// `showBlockPage`.
        case onAttributeCollectionStart = "OnAttributeCollectionStart"
        /// Once they are collected, before the account is made: `continueWithDefaultBehavior`,
        /// `modifyAttributeValues`, `showBlockPage`, `showValidationError`.
        case onAttributeCollectionSubmit = "OnAttributeCollectionSubmit"
        /// Instead of the service's own mail, the one-time code goes to the extension.
        case onOtpSend = "OnOtpSend"
    }

    /// Entra's authentication events service principal: the `azp`/`appid` of the tokens that
    /// call extensions (Microsoft's "protect your REST API" guidance checks it).
    public static let callerAppID = "99045fe1-7639-4a75-9d4a-577b6ca3810f"

    public var name: String
    public var event: Event
    public var url: String
    /// The app the bearer token is for (Graph's `authenticationConfiguration.resourceId`): an
    /// Application ID URI or an app id; the token's `aud`.
    public var resourceId: String
    /// For ``Event/onTokenIssuanceStart``: the claims it may add (External ID maps a claims
    /// provider's claims into tokens by name; others it answers are dropped).
    public var claims: [String]?
    public var timeoutSeconds: Int?
    /// What it is for, as Graph's `description` (at most 1,024 characters).
    public var description: String?

    public init(
        name: String, event: Event, url: String, resourceId: String, claims: [String]? = nil, timeoutSeconds: Int? = nil, description: String? = nil
    ) {
        self.name = name
        self.event = event
        self.url = url
        self.resourceId = resourceId
        self.claims = claims
        self.timeoutSeconds = timeoutSeconds
        self.description = description
    }

    /// External ID waits 1 second by default and allows at most 2 (its
    /// `clientConfiguration.timeoutInMilliseconds`); the service waits 2 by default and allows 1
    /// to 10 whole seconds, so a slow test machine is no failure and no unauthenticated request
    /// holds a sign-in for long.
    public static let defaultTimeoutSeconds = 2

    /// Graph's limit of custom authentication extensions in a tenant.
    public static let maximumPerTenant = 100

    /// Claims an extension never sets: who issued the token, for whom, when, whose it is and
    /// what it grants. External ID lets a claims provider's claims be mapped only beside them.
    public static let protectedClaims: Set<String> = [
        "iss", "aud", "exp", "nbf", "iat", "ver", "tid", "tfp", "acr", "idtyp", "azp", "appid", "sub", "oid", "scp", "roles", "groups",
        "nonce", "auth_time", "preferred_username", "email", "emails", "name", "uti", "sid", "at_hash", "c_hash", "amr", "wids", "rh",
        "hasgroups", "_claim_names", "_claim_sources", "login_hint", "upn", "unique_name", "idp", "cnf", "verified_primary_email",
        "verified_secondary_email", "acct", "ipaddr", "role", "onprem_sid", "puid", "signin_state", "tenant_region_scope", "ctry", "family_name",
        "given_name", "newuser", "client_info", "altsecid", "deviceid", "home_oid",
        // RFC 9068 §2.2's JWT access-token names, and the rest of Entra's restricted claim set
        // (claims-mapping policies cannot set them either).
        "scope", "client_id", "jti", "resource", "appidacr", "azpacr", "acrs", "email_verified", "aio", "app_chain",
        "app_displayname", "appctx", "appctxsender", "auth_data", "ca_enf", "cc", "controls", "e_exp", "enfpolids", "expires_on",
        "grant_type", "group_sids", "identityprovider", "in_corp", "nameid", "onprem_sam_account_name", "platf", "polids",
        "primary_sid", "pwd_exp", "pwd_url", "refresh_token", "request_nonce", "tbid", "tenant_display_name",
        "trustedfordelegation", "username", "win_ver",
    ]

    /// Whether `claim` may never come from an extension: a protected name in any case, or one of
    /// Microsoft's own `xms_` claims.
    public static func isProtected(_ claim: String) -> Bool {
        let lower = claim.lowercased()
        // A URI-named claim (`http://schemas.microsoft.com/ws/2008/06/identity/claims/role`) is
        // what libraries map the short ones to: none comes from an extension.
        return protectedClaims.contains(lower) || lower.hasPrefix("xms_") || lower.contains("/") || lower.contains(":")
    }

    func problems() -> [String] {
        var problems: [String] = []
        if (try? TextRules.name(name, maximumLength: 128).get()) != name {
            problems.append("authentication extension name '\(TextRules.printable(name))' is not valid")
        }
        if !OutboundURL.isAllowed(url) {
            problems.append("authentication extension '\(name)': url must be https (or http on loopback) without credentials")
        }
        if resourceId.isEmpty || resourceId.count > 256 || TextRules.printable(resourceId) != resourceId || resourceId.contains(" ") {
            problems.append("authentication extension '\(name)': resourceId is required, printable and without spaces")
        }
        // The token the extension is called with is for its own API, never Microsoft Graph's.
        let resource = resourceId.lowercased()
        if resource == APIPermission.graphResource || resource.hasPrefix("https://graph.microsoft.com") || resource == AuthenticationExtension.callerAppID {
            problems.append("authentication extension '\(name)': resourceId must be the extension's own API")
        }
        if let description, description.count > 1024 || TextRules.printable(description) != description {
            problems.append("authentication extension '\(name)': description must be printable text of at most 1024 characters")
        }
        if let seconds = timeoutSeconds, !(1...10).contains(seconds) {
            problems.append("authentication extension '\(name)': timeoutSeconds must be 1 to 10")
        }
        if let claims {
            if event != .onTokenIssuanceStart { problems.append("authentication extension '\(name)': only OnTokenIssuanceStart provides claims") }
            // As many as a token takes beside its own (``ExtraClaims/maximumCount``).
            if claims.count > 50 { problems.append("authentication extension '\(name)': at most 50 claims") }
            for claim in claims where Self.isProtected(claim) || (try? TextRules.name(claim, maximumLength: 64).get()) != claim {
                problems.append("authentication extension '\(name)': the claim '\(TextRules.printable(claim))' cannot be provided")
            }
        }
        return problems
    }
}

/// Which extension a flow calls at each event (by name).
public struct FlowExtensions: Sendable, Codable, Equatable {
    public var onTokenIssuanceStart: String?
    public var onAttributeCollectionStart: String?
    public var onAttributeCollectionSubmit: String?
    public var onOtpSend: String?

    public init(
        onTokenIssuanceStart: String? = nil, onAttributeCollectionStart: String? = nil, onAttributeCollectionSubmit: String? = nil,
        onOtpSend: String? = nil
    ) {
        self.onTokenIssuanceStart = onTokenIssuanceStart
        self.onAttributeCollectionStart = onAttributeCollectionStart
        self.onAttributeCollectionSubmit = onAttributeCollectionSubmit
        self.onOtpSend = onOtpSend
    }

    /// The name bound to `event`.
    public subscript(event: AuthenticationExtension.Event) -> String? {
        switch event {
        case .onTokenIssuanceStart: onTokenIssuanceStart
        case .onAttributeCollectionStart: onAttributeCollectionStart
        case .onAttributeCollectionSubmit: onAttributeCollectionSubmit
        case .onOtpSend: onOtpSend
        }
    }

    var bindings: [(AuthenticationExtension.Event, String)] { AuthenticationExtension.Event.allCases.compactMap { event in self[event].map { (event, $0) } } }
    var isEmpty: Bool { bindings.isEmpty }
}

extension Tenant {
    /// The extension `flow` binds to `event`, if it names one the tenant declares.
    package func authenticationExtension(_ event: AuthenticationExtension.Event, of flow: UserFlow) -> AuthenticationExtension? {
        guard let name = flow.extensions[event] else { return nil }
        return authenticationExtensions.first { $0.name == name && $0.event == event }
    }
}
