import Foundation

/// A JSON value in a token's payload.
public enum ClaimValue: Sendable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([ClaimValue])
    case object([String: ClaimValue])
    case null

    public init(json: Any) {
        switch json {
        case let text as String: self = .string(text)
        // JSONSerialization gives booleans as NSNumber too, of type `c` (a C `BOOL`); numbers
        // from JSON text are never that narrow.
        case let number as NSNumber where String(cString: number.objCType) == "c": self = .bool(number.boolValue)
        case let number as NSNumber: self = .number(number.doubleValue)
        case let array as [Any]: self = .array(array.map(ClaimValue.init(json:)))
        case let object as [String: Any]: self = .object(object.mapValues(ClaimValue.init(json:)))
        default: self = .null
        }
    }

    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var number: Double? { if case .number(let value) = self { value } else { nil } }
    public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
}

/// A token's claims: the registered ones typed (RFC 7519 §4.1), the rest by name. What a
/// payload says, not yet whether to believe it: ``ClaimPolicy/check(_:now:)`` decides that.
public struct JWTClaims: Sendable, Equatable {
    public let values: [String: ClaimValue]

    public init(values: [String: ClaimValue]) { self.values = values }

    /// The payload of a token, or nil when it is not a JSON object.
    public init?(payload: Data) {
        guard let object = try? JSONSerialization.jsonObject(with: payload) as? [String: Any] else { return nil }
        values = object.mapValues(ClaimValue.init(json:))
    }

    public subscript(name: String) -> ClaimValue? { values[name] }

    /// A claim that is a string.
    public func string(_ name: String) -> String? { values[name]?.string }

    /// A claim that is an array of strings (others in it are left out).
    public func strings(_ name: String) -> [String]? {
        guard case .array(let items)? = values[name] else { return nil }
        return items.compactMap(\.string)
    }

    public var issuer: String? { string("iss") }
    public var subject: String? { string("sub") }
    /// `aud`: one string or an array of them (RFC 7519 §4.1.3).
    public var audience: [String] {
        switch values["aud"] {
        case .string(let one)?: [one]
        case .array(let many)?: many.compactMap(\.string)
        default: []
        }
    }
    public var expiresAt: Date? { values["exp"]?.number.map(Date.init(timeIntervalSince1970:)) }
    public var notBefore: Date? { values["nbf"]?.number.map(Date.init(timeIntervalSince1970:)) }
    public var issuedAt: Date? { values["iat"]?.number.map(Date.init(timeIntervalSince1970:)) }
}

/// Why a token's claims are not to be believed.
public enum ClaimError: Error, Equatable, Sendable {
    case untrustedIssuer
    case wrongAudience
    case expired
    case notYetValid
    case issuedInTheFuture
    /// A claim the policy requires is missing, or a registered claim has the wrong type.
    case malformed(String)
}

/// Which tokens to believe: the issuers, the audiences, the leeway for clocks, and the claims
/// that must be there. The one claim check of the system (RFC 7519 §7.2, RFC 8725 §3.8–3.9),
/// used by the Task API, federation, Graph and logout, each with its own policy value.
public struct ClaimPolicy: Sendable {
    /// Which `iss` values are trusted.
    public enum Issuers: Sendable {
        case exactly(Set<String>)
        case matching(@Sendable (String) -> Bool)

        func trusts(_ issuer: String) -> Bool {
            switch self {
            case .exactly(let set): set.contains(issuer)
            case .matching(let rule): rule(issuer)
            }
        }
    }

    public var issuers: Issuers
    /// The audiences any of which `aud` must contain; nil: not checked here.
    public var audiences: Set<String>?
    public var leeway: TimeInterval
    /// Whether `exp` must be present and in the future (an `id_token_hint` at logout may be
    /// expired: then only its issuer and signature count).
    public var checksExpiry: Bool
    /// Whether an `iat` in the future (beyond the leeway) is refused, as OIDC Core §3.1.3.7
    /// allows a client to do with an ID token.
    public var checksIssuedAt: Bool
    /// Claims that must be present, beyond the registered ones checked.
    public var required: [String]

    public init(
        issuers: Issuers, audiences: Set<String>? = nil, leeway: TimeInterval = 300, checksExpiry: Bool = true,
        checksIssuedAt: Bool = false, required: [String] = []
    ) {
        self.issuers = issuers
        self.audiences = audiences
        self.leeway = leeway
        self.checksExpiry = checksExpiry
        self.checksIssuedAt = checksIssuedAt
        self.required = required
    }

    /// Throws unless `claims` satisfy the policy at `now`.
    public func check(_ claims: JWTClaims, now: Date) throws(ClaimError) {
        guard let issuer = claims.issuer, issuers.trusts(issuer) else { throw .untrustedIssuer }
        if let audiences { guard claims.audience.contains(where: audiences.contains) else { throw .wrongAudience } }
        if checksExpiry {
            guard let exp = claims["exp"] else { throw .malformed("no exp") }
            guard let expiresAt = exp.number.map(Date.init(timeIntervalSince1970:)) else { throw .malformed("exp is not a number") }
            guard expiresAt.addingTimeInterval(leeway) > now else { throw .expired }
        }
        if let nbf = claims["nbf"] {
            guard let notBefore = nbf.number.map(Date.init(timeIntervalSince1970:)) else { throw .malformed("nbf is not a number") }
            if notBefore > now.addingTimeInterval(leeway) { throw .notYetValid }
        }
        if checksIssuedAt, let issuedAt = claims.issuedAt, issuedAt > now.addingTimeInterval(leeway) { throw .issuedInTheFuture }
        for name in required where claims[name] == nil { throw .malformed("no \(name)") }
    }
}

extension ClaimValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByFloatLiteral, ExpressibleByIntegerLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
}

extension JWTClaims: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, ClaimValue)...) {
        self.init(values: Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
