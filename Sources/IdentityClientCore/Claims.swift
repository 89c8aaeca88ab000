import Crypto
import Foundation
import WireCoding

/// A JSON value: the type of ID-token claims (``WireCoding/JSONValue``, shared with the
/// server, which reads request bodies with it).
public typealias JSONValue = WireCoding.JSONValue

/// A decoded (not signature-checked) ID token. The SDK checks the claims that bind it to the
/// request (issuer, audience, lifetime, nonce) the way AppAuth and MSAL do; its signature was
/// checked by TLS to the token endpoint it came from (OpenID Connect Core §3.1.3.7, item 6).
public struct IDToken: Sendable, Hashable {
    /// The compact JWT as received.
    public let raw: String
    public let claims: [String: JSONValue]

    /// - Throws: ``IdentityError/invalidIDToken(_:)`` when it is not a JWT with a JSON payload.
    public init(_ raw: String) throws {
        let parts = raw.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])),
            let object = try? JSONSerialization.jsonObject(with: payload), case .object(let claims) = JSONValue(any: object)
        else { throw IdentityError.invalidIDToken("not a JWT") }
        self.raw = raw
        self.claims = claims
    }

    /// A token whose claims were parsed before (cached with the account).
    init(raw: String, claims: [String: JSONValue]) {
        self.raw = raw
        self.claims = claims
    }

    public subscript(claim: String) -> JSONValue? { claims[claim] }

    public var issuer: String? { claims["iss"]?.stringValue }
    public var subject: String? { claims["sub"]?.stringValue }
    public var objectID: String? { claims["oid"]?.stringValue }
    public var name: String? { claims["name"]?.stringValue }
    public var nonce: String? { claims["nonce"]?.stringValue }
    public var expiresOn: Date? { claims["exp"]?.numberValue.map { Date(timeIntervalSince1970: $0) } }

    /// `aud` is a string or an array of strings (RFC 7519 §4.1.3).
    public var audiences: [String] {
        switch claims["aud"] {
        case .string(let value): [value]
        case .array(let values): values.compactMap(\.stringValue)
        default: []
        }
    }

    /// B2C sends no `preferred_username` for local accounts; MSAL.js falls back to `emails[0]`
    /// (https://github.com/AzureAD/microsoft-authentication-library-for-js/issues/2000 item 6), then `name`.
    public var username: String? {
        if let value = claims["preferred_username"]?.stringValue, !value.isEmpty { return value }
        if case .array(let emails) = claims["emails"], let first = emails.first?.stringValue { return first }
        if let value = claims["email"]?.stringValue { return value }
        return name
    }

    /// The checks of OpenID Connect Core §3.1.3.7: `iss` is the discovered issuer (never the
    /// policy URL: B2C's issuer is `{host}/{tenant id}/v2.0/`), `aud` contains the client id,
    /// not expired, not issued in the future, and `nonce` is the one sent (when one was).
    func validate(issuer: String, clientID: String, nonce: String?, now: Date, skew: TimeInterval = 300) throws {
        guard self.issuer == issuer else { throw IdentityError.invalidIDToken("issuer \(self.issuer ?? "none") is not \(issuer)") }
        guard audiences.contains(clientID) else { throw IdentityError.invalidIDToken("audience is not this client") }
        guard let expiresOn, expiresOn.addingTimeInterval(skew) > now else { throw IdentityError.invalidIDToken("expired") }
        if let iat = claims["iat"]?.numberValue, Date(timeIntervalSince1970: iat) > now.addingTimeInterval(skew) {
            throw IdentityError.invalidIDToken("issued in the future")
        }
        if let nonce, !Secrets.constantTimeEquals(self.nonce ?? "", nonce) { throw IdentityError.nonceMismatch }
    }
}

/// B2C's `client_info`: base64url JSON `{"uid": "<oid>-<policy>", "utid": "<tenant id>"}`,
/// sent when the request has `client_info=1` (https://github.com/AzureAD/microsoft-authentication-library-for-android/issues/718).
struct ClientInfo: Decodable {
    var uid: String
    var utid: String

    init?(encoded: String?) {
        guard let encoded, let data = Base64URL.decode(encoded), let info = try? JSONDecoder().decode(ClientInfo.self, from: data) else {
            return nil
        }
        self = info
    }
}

/// Proof Key for Code Exchange with S256 (RFC 7636): a 43-character verifier from 32 random
/// bytes, and its SHA-256 as the challenge.
public struct PKCE: Sendable, Hashable {
    public let verifier: String
    public let challenge: String
    public var method: String { "S256" }

    public init() { self.init(verifier: Secrets.randomToken(byteCount: 32)) }

    /// For tests and for resuming a stored flow.
    public init(verifier: String) {
        self.verifier = verifier
        challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
    }
}
