import Foundation

extension TenantDeclaration {
    /// A flow's token lifetimes as B2C's portal sets them (SPEC §2.14), in the declaration and in
    /// Graph's `b2cUserFlows`: access and ID tokens 5 to 1,440 minutes, refresh tokens 1 to 90
    /// days, and the refresh token window: `sliding(N)` (B2C's "Bounded": refreshing goes on for
    /// at most N days, 1 to 365, after the sign-in), `unbounded` (B2C's "No expiry"), or
    /// `absolute` (no sliding: the sign-in's tokens end with its first refresh token's lifetime).
    /// Values outside the ranges are refused, not clamped.
    public struct TokenLifetimesPart: Codable, Sendable, Equatable {
        public var accessTokenMinutes: Int?
        public var idTokenMinutes: Int?
        public var refreshTokenDays: Int?
        public var refreshTokenWindow: String?

        init(accessTokenMinutes: Int? = nil, idTokenMinutes: Int? = nil, refreshTokenDays: Int? = nil, refreshTokenWindow: String? = nil) {
            self.accessTokenMinutes = accessTokenMinutes
            self.idTokenMinutes = idTokenMinutes
            self.refreshTokenDays = refreshTokenDays
            self.refreshTokenWindow = refreshTokenWindow
        }

        /// The stored lifetimes' declaration.
        public init(_ lifetimes: TokenLifetimes) {
            accessTokenMinutes = lifetimes.accessTokenSeconds / 60
            idTokenMinutes = lifetimes.idTokenSeconds / 60
            refreshTokenDays = lifetimes.refreshTokenSeconds / 86_400
            refreshTokenWindow =
                switch lifetimes.slidingWindowSeconds {
                case nil: "unbounded"
                case let seconds? where seconds == lifetimes.refreshTokenSeconds: "absolute"
                case let seconds?: "sliding(\(seconds / 86_400))"
                }
        }

        /// The lifetimes, starting from `base` for what is not given; or why they are refused.
        public func lifetimes(from base: TokenLifetimes = .default) -> Result<TokenLifetimes, DeclarationError> {
            var lifetimes = base
            if let minutes = accessTokenMinutes {
                guard (5...1440).contains(minutes) else { return .failure(.invalid("accessTokenMinutes must be 5 to 1440")) }
                lifetimes.accessTokenSeconds = minutes * 60
            }
            if let minutes = idTokenMinutes {
                guard (5...1440).contains(minutes) else { return .failure(.invalid("idTokenMinutes must be 5 to 1440")) }
                lifetimes.idTokenSeconds = minutes * 60
            }
            if let days = refreshTokenDays {
                guard (1...90).contains(days) else { return .failure(.invalid("refreshTokenDays must be 1 to 90")) }
                lifetimes.refreshTokenSeconds = days * 86_400
            }
            switch refreshTokenWindow?.lowercased().replacingOccurrences(of: " ", with: "") {
            case nil: break
            case "unbounded": lifetimes.slidingWindowSeconds = nil
            case "absolute": lifetimes.slidingWindowSeconds = lifetimes.refreshTokenSeconds
            case let window? where window.hasPrefix("sliding(") && window.hasSuffix(")"):
                guard let days = Int(window.dropFirst(8).dropLast()), (1...365).contains(days) else {
                    return .failure(.invalid("refreshTokenWindow sliding(N) takes 1 to 365 days"))
                }
                lifetimes.slidingWindowSeconds = days * 86_400
            default:
                return .failure(.invalid("refreshTokenWindow is sliding(N days), unbounded or absolute"))
            }
            if let window = lifetimes.slidingWindowSeconds, window < lifetimes.refreshTokenSeconds {
                return .failure(.invalid("refreshTokenWindow must be at least refreshTokenDays long"))
            }
            return .success(lifetimes)
        }
    }
}
