import Foundation
import IdentityDirectory
import WireCoding

/// Where a request put the policy: B2C accepts three interchangeable URL shapes
/// (https://learn.microsoft.com/azure/active-directory-b2c/b2clogin) and discovery echoes the one it was fetched with.
package enum PolicyPlacement: Equatable, Sendable {
    /// `/{tenant}/{policy}/…`
    case path
    /// `/{tenant}/…?p={policy}`
    case query
    /// `/tfp/{tenant}/{policy}/…` (and the 2017 iOS quickstart's `/te/…`)
    case tfp
    /// No policy at all: Microsoft-identity-platform style; the tenant's default flow applies.
    case none
}

extension ProtocolFace {
    /// The face of a request to a shape-`placement` route: policy-less means Entra.
    package init(placement: PolicyPlacement) { self = placement == .none ? .entra : .b2c }
}

/// The protocol endpoints served under a tenant, for writing their URLs.
package enum EndpointKind: Equatable, Sendable {
    case discovery
    case authorize
    case token
    case logout
    case keys
    /// A hosted page of an interactive transaction.
    case page(HostedPage)
    /// An identity provider's return to us (`/oauth2/authresp`, no policy;
    /// https://learn.microsoft.com/azure/active-directory-b2c/b2clogin#change-identity-provider-redirect-urls): B2C's one callback for the simulated Facebook, and
    /// `/oauth2/authresp/{provider}` for each upstream OpenID Connect provider, so an answer
    /// says which provider sent it (RFC 9700 §4.4.2, the mix-up defence by distinct redirect URIs).
    case federationCallback(provider: String?)
}

/// The tenant segment and policy a protocol URL named, and the shape it named them in: what the
/// router's captures and ``PolicyResolver`` found, kept so URLs written back (discovery, pages)
/// take the same shape.
package struct PolicyRoute: Equatable, Sendable {
    package var tenantSegment: String
    var policy: String?
    var placement: PolicyPlacement

    package var face: ProtocolFace { ProtocolFace(placement: placement) }

    /// `common`, `organizations` and `consumers`: Entra's multi-tenant authorities, which name no
    /// tenant (their discovery's issuer is a template).
    var isMultiTenantAlias: Bool { ["common", "organizations", "consumers"].contains(tenantSegment.lowercased()) }

    /// The URL of `endpoint` in this route's shape.
    package func url(origin: String, for endpoint: EndpointKind) -> String {
        let tail: String
        switch endpoint {
        case .discovery: tail = "v2.0/.well-known/openid-configuration"
        case .authorize: tail = "oauth2/v2.0/authorize"
        case .token: tail = "oauth2/v2.0/token"
        case .logout: tail = "oauth2/v2.0/logout"
        case .keys: tail = "discovery/v2.0/keys"
        case .page(let page): tail = "pages/\(page.rawValue)"
        case .federationCallback(let provider):
            return "\(origin)/\(Self.escape(tenantSegment))/oauth2/authresp" + (provider.map { "/\(Self.escape($0.lowercased()))" } ?? "")
        }
        let tenant = Self.escape(tenantSegment)
        switch (placement, policy) {
        case (.path, let policy?): return "\(origin)/\(tenant)/\(Self.escape(policy))/\(tail)"
        case (.tfp, let policy?): return "\(origin)/tfp/\(tenant)/\(Self.escape(policy))/\(tail)"
        case (.query, let policy?): return "\(origin)/\(tenant)/\(tail)?p=\(FormEncoding.escape(policy))"
        default: return "\(origin)/\(tenant)/\(tail)"
        }
    }

    private static func escape(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/")))
            ?? segment
    }

    package init(tenantSegment: String, policy: String? = nil, placement: PolicyPlacement) {
        self.tenantSegment = tenantSegment
        self.policy = policy
        self.placement = placement
    }
}
