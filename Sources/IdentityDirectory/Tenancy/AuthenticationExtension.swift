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

    public init(name: String, event: Event, url: String, resourceId: String, claims: [String]? = nil, timeoutSeconds: Int? = nil) {
        self.name = name
        self.event = event
        self.url = url
        self.resourceId = resourceId
        self.claims = claims
        self.timeoutSeconds = timeoutSeconds
    }

    /// External ID waits up to 2 seconds by default (its `clientConfiguration.timeoutInMilliseconds`
    /// allows up to 10); the service allows 1 to 60 so a slow test machine is no failure.
    public static let defaultTimeoutSeconds = 10

    /// Claims an extension never sets: who issued the token, for whom, when, whose it is and
    /// what it grants. External ID lets a claims provider's claims be mapped only beside them.
    public static let protectedClaims: Set<String> = [
        "iss", "aud", "exp", "nbf", "iat", "ver", "tid", "tfp", "acr", "idtyp", "azp", "appid", "sub", "oid", "scp", "roles", "groups",
        "nonce", "auth_time", "preferred_username", "email", "emails", "name", "uti", "sid", "at_hash", "c_hash", "amr", "wids", "rh",
        "hasgroups", "_claim_names", "_claim_sources", "login_hint", "upn", "unique_name",
    ]

    func problems() -> [String] {
        var problems: [String] = []
        if (try? TextRules.name(name, maximumLength: 128).get()) != name {
            problems.append("authentication extension name '\(TextRules.printable(name))' is not valid")
        }
        if !OutboundURL.isAllowed(url) {
            problems.append("authentication extension '\(name)': url must be https (or http on loopback) without credentials")
        }
        if resourceId.isEmpty || resourceId.count > 256 { problems.append("authentication extension '\(name)': resourceId is required") }
        if let seconds = timeoutSeconds, !(1...60).contains(seconds) {
            problems.append("authentication extension '\(name)': timeoutSeconds must be 1 to 60")
        }
        if let claims {
            if event != .onTokenIssuanceStart { problems.append("authentication extension '\(name)': only OnTokenIssuanceStart provides claims") }
            for claim in claims where Self.protectedClaims.contains(claim) || (try? TextRules.name(claim, maximumLength: 64).get()) != claim {
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
