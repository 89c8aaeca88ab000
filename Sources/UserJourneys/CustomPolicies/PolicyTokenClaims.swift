import Foundation
import TrustFramework
import WireCoding

/// The claims a custom policy's relying party sends the app (its technical profile's output
/// claims), by the name each has in the token: the `PartnerClaimType`, else the claim type's
/// OpenID Connect partner name, else its id (SPEC §2.12).
enum PolicyTokenClaims {
    /// Claims the protocol writes itself; a relying party's claim of the same name is not sent twice.
    static let protocolClaims: Set<String> = [
        "iss", "sub", "aud", "exp", "nbf", "iat", "nonce", "tfp", "acr", "ver", "auth_time", "azp", "scp", "c_hash", "at_hash", "oid",
    ]

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
            guard !protocolClaims.contains(name.lowercased()), let value = claims[reference.claimType] else { continue }
            switch (value, policy.claimType(reference.claimType)?.dataType) {
            case (.collection(let items), _): values[name] = JSONText.array(items.map(JSONText.string)).serialized
            // A collection claim holding one string (a default, a copy) is a one-item collection.
            case (_, .stringCollection?): values[name] = JSONText.array([.string(value.text)]).serialized
            default: values[name] = value.text
            }
        }
        return values
    }

    /// Writes `values` into a token in the relying party's order, typed by each claim type.
    static func append(_ values: [String: String], _ policy: CompiledPolicy, into claims: inout JSONObjectBuilder) {
        for reference in policy.relyingParty?.outputClaims ?? [] {
            let name = name(reference, policy)
            guard !protocolClaims.contains(name.lowercased()), let text = values[name] else { continue }
            switch policy.claimType(reference.claimType)?.dataType {
            case .boolean?: claims.set(name, json: .bool(text.lowercased() == "true"))
            case .int?, .long?: claims.set(name, json: Int64(text).map(JSONText.int) ?? .string(text))
            case .stringCollection?:
                let items = (try? JSONDecoder().decode([String].self, from: Data(text.utf8))) ?? [text]
                claims.set(name, json: .array(items.map(JSONText.string)))
            default: claims.set(name, text)
            }
        }
    }
}
