import Foundation
import TodoModels

/// Where a request put the policy: B2C accepts three interchangeable URL shapes
/// (research/b2c-protocol.md §1.1) and discovery echoes the one it was fetched with.
enum PolicyPlacement: Equatable, Sendable {
    /// `/{tenant}/{policy}/…`
    case path
    /// `/{tenant}/…?p={policy}`
    case query
    /// `/tfp/{tenant}/{policy}/…`
    case tfp
    /// No policy at all: Microsoft-identity-platform style; the tenant's default flow applies.
    case none
}

/// The protocol endpoints served under a tenant.
enum EndpointKind: Equatable, Sendable {
    case discovery
    case authorize
    case token
    case logout
    case keys
    /// The hosted page `name` of an interactive transaction.
    case page(String)
    /// The upstream identity provider's return to us (`/oauth2/authresp`, no policy;
    /// research/b2c-protocol.md §1.2).
    case federationCallback
}

/// A parsed identity-service URL: tenant segment, policy and endpoint.
struct EndpointPath: Equatable, Sendable {
    var tenantSegment: String
    var policy: String?
    var placement: PolicyPlacement
    var endpoint: EndpointKind

    init(tenantSegment: String, policy: String?, placement: PolicyPlacement, endpoint: EndpointKind) {
        self.tenantSegment = tenantSegment
        self.policy = policy
        self.placement = placement
        self.endpoint = endpoint
    }

    /// Parses `path` (percent-encoded, as received) and the query's `p`.
    ///
    /// A path-form URL may also carry `p=` (passport-azure-ad always appends it;
    /// research/b2c-protocol.md §6.3): the path's policy wins.
    init?(path: String, queryPolicy: String?) {
        var segments = path.split(separator: "/", omittingEmptySubsequences: true).map {
            String($0).removingPercentEncoding ?? String($0)
        }
        guard !segments.isEmpty else { return nil }
        var placement: PolicyPlacement
        var policy: String?
        // `/te/` is the legacy "trust framework edge" prefix of the 2017 iOS quickstart.
        if ["tfp", "te"].contains(segments[0].lowercased()) {
            guard segments.count >= 3 else { return nil }
            segments.removeFirst()
            placement = .tfp
            policy = segments.remove(at: 1)
        } else if segments.count >= 2, UserFlow.isValidName(segments[1]) {
            placement = .path
            policy = segments.remove(at: 1)
        } else if let queryPolicy, !queryPolicy.isEmpty {
            placement = .query
            policy = queryPolicy
        } else {
            placement = .none
        }
        let tenant = segments.removeFirst()
        let rest = segments.map { $0.lowercased() }
        let endpoint: EndpointKind
        switch rest {
        case ["v2.0", ".well-known", "openid-configuration"], [".well-known", "openid-configuration"]:
            endpoint = .discovery
        case ["oauth2", "v2.0", "authorize"], ["oauth2", "authorize"]: endpoint = .authorize
        case ["oauth2", "v2.0", "token"], ["oauth2", "token"]: endpoint = .token
        case ["oauth2", "v2.0", "logout"], ["oauth2", "logout"]: endpoint = .logout
        case ["discovery", "v2.0", "keys"], ["discovery", "keys"]: endpoint = .keys
        case ["oauth2", "authresp"]: endpoint = .federationCallback
        default:
            if rest.count == 2, rest[0] == "pages" {
                endpoint = .page(rest[1])
            } else {
                return nil
            }
        }
        self.tenantSegment = tenant
        self.policy = policy
        self.placement = placement
        self.endpoint = endpoint
    }

    /// The URL of `endpoint` in the same shape, for discovery documents.
    func url(origin: String, for endpoint: EndpointKind) -> String {
        let tail: String
        switch endpoint {
        case .discovery: tail = "v2.0/.well-known/openid-configuration"
        case .authorize: tail = "oauth2/v2.0/authorize"
        case .token: tail = "oauth2/v2.0/token"
        case .logout: tail = "oauth2/v2.0/logout"
        case .keys: tail = "discovery/v2.0/keys"
        case .page(let name): tail = "pages/\(name)"
        case .federationCallback: return "\(origin)/\(Self.escape(tenantSegment))/oauth2/authresp"
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
}
