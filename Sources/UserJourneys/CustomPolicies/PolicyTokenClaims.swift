import Foundation
import TrustFramework
import WireCoding

/// The claims a custom policy's relying party sends the app (its technical profile's output
/// claims), by the name each has in the token: the `PartnerClaimType`, else the claim type's
/// OpenID Connect partner name, else its id (SPEC §2.12).
enum PolicyTokenClaims {
    /// Claims the protocol writes itself; a relying party's claim of the same name is not sent twice.
    /// With them, the identity platform's names for what kind of caller a token is and which app
    /// it acts for (`idtyp: app` marks an app-only token, `wids` directory roles, `appid` the
    /// app): a policy's value would make a user's token read as an app's or an administrator's to
    /// any API that trusts them. B2C writes whatever a policy outputs; this departure is named in
    /// the README. `roles` and `groups` stay the tenant's to send its own APIs, as on B2C.
    static let protocolClaims: Set<String> = [
        "iss", "sub", "aud", "exp", "nbf", "iat", "nonce", "tfp", "acr", "ver", "auth_time", "azp", "scp", "c_hash", "at_hash", "oid",
        "idtyp", "wids", "appid", "appidacr", "azpacr", "uti", "cnf",
    ]

    /// Whether the relying party may not send a claim of this name (``protocolClaims``, and
    /// Entra's `xms_` names).
    static func isProtected(_ name: String) -> Bool {
        let name = name.lowercased()
        return protocolClaims.contains(name) || name.hasPrefix("xms_")
    }

    static func name(_ reference: PolicyClaimReference, _ policy: CompiledPolicy) -> String {
        reference.partnerClaimType ?? policy.claimType(reference.claimType)?.partnerClaimTypes["OpenIdConnect"] ?? reference.claimType
    }

    /// The relying party's claim values from the bag (its defaults and resolvers applied), as
    /// text by token name: what the sign-in's code and refresh tokens carry.
    static func values(_ policy: CompiledPolicy, claims: PolicyClaims, resolver: PolicyClaimResolver) -> [String: String] {
        guard let party = policy.relyingParty else { return [:] }
        var claims = claims
        resolver.applyDefaults(party.outputClaims, to: &claims)
        var values: [String: String] = [:]
        for reference in party.outputClaims {
            let name = name(reference, policy)
            guard !isProtected(name), let value = claims[reference.claimType] else { continue }
            // A claim a page generated empty (`AllowGenerationOfClaimsWithNullValues`) is in the
            // bag but not in the token: B2C's tokens carry no empty claims.
            if case .string(let text) = value, text.isEmpty { continue }
            if case .collection(let items) = value, items.isEmpty { continue }
            switch (value, policy.claimType(reference.claimType)?.dataType) {
            case (.collection(let items), _): values[name] = JSONText.array(items.map(JSONText.string)).serialized
            // A collection claim holding one string (a default, a copy) is a one-item collection.
            case (_, .stringCollection?), (_, .alternativeSecurityIdCollection?): values[name] = JSONText.array([.string(value.text)]).serialized
            default: values[name] = value.text
            }
        }
        return values
    }

    /// The subject the relying party sends (its output claim named as `SubjectNamingInfo`
    /// says, `sub` by default), its defaults and resolvers applied; nil when it sends none.
    static func subject(_ policy: CompiledPolicy, claims: PolicyClaims, resolver: PolicyClaimResolver) -> String? {
        guard let party = policy.relyingParty else { return nil }
        var claims = claims
        resolver.applyDefaults(party.outputClaims, to: &claims)
        let wanted = party.subjectClaim.lowercased()
        let value = party.outputClaims.first { name($0, policy).lowercased() == wanted }.flatMap { claims[$0.claimType]?.text }
        return value?.isEmpty == false ? value : nil
    }

    /// Writes `values` into a token in the relying party's order, typed by each claim type.
    static func append(_ values: [String: String], _ policy: CompiledPolicy, into claims: inout JSONObjectBuilder) {
        for reference in policy.relyingParty?.outputClaims ?? [] {
            let name = name(reference, policy)
            guard !isProtected(name), let text = values[name] else { continue }
            switch policy.claimType(reference.claimType)?.dataType {
            case .boolean?: claims.set(name, json: .bool(text.lowercased() == "true"))
            case .int?, .long?: claims.set(name, json: Int64(text).map(JSONText.int) ?? .string(text))
            case .stringCollection?, .alternativeSecurityIdCollection?:
                let items = (try? JSONDecoder().decode([String].self, from: Data(text.utf8))) ?? [text]
                claims.set(name, json: .array(items.map(JSONText.string)))
            default: claims.set(name, text)
            }
        }
    }
}
