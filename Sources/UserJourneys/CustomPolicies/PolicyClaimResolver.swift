import Foundation
import IdentityDirectory
import TrustFramework

/// B2C's claim resolvers (`claim-resolver-overview.md`): `{Culture:…}`, `{Policy:…}`,
/// `{Context:…}`, `{Claim:…}`, `{OIDC:…}` and `{OAUTH-KV:…}` in a claim's `DefaultValue`,
/// from the sign-in under way. A resolver this service does not know is left as written.
struct PolicyClaimResolver: Sendable {
    var policyID: String
    var tenant: Tenant
    var language: String
    var correlationID: String
    var clientAddress: String
    var host: String
    var now: Date
    /// The authorization request, whose `extraParameters` `{OAUTH-KV:name}` reads.
    var authorization: AuthorizationRequest?

    /// `text` with every resolver it contains replaced.
    func resolve(_ text: String, claims: PolicyClaims) -> String {
        guard text.contains("{") else { return text }
        var result = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            result += rest[..<open]
            let key = String(rest[rest.index(after: open)..<close])
            result += value(of: key, claims: claims) ?? "{\(key)}"
            rest = rest[rest.index(after: close)...]
        }
        return result + rest
    }

    private func value(of key: String, claims: PolicyClaims) -> String? {
        let parts = key.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return nil }
        let (group, name) = (parts[0].lowercased(), parts[1])
        switch (group, name.lowercased()) {
        case ("culture", "languagename"): return String(language.prefix(2))
        case ("culture", "rfc5646"): return language
        case ("culture", "regionname"): return language.split(separator: "-").dropFirst().first.map { $0.uppercased() } ?? ""
        case ("policy", "policyid"): return policyID
        case ("policy", "relyingpartytenantid"), ("policy", "trustframeworktenantid"): return tenant.name
        case ("policy", "tenantobjectid"): return tenant.guid
        case ("context", "correlationid"): return correlationID
        case ("context", "ipaddress"): return clientAddress
        case ("context", "hostname"): return host
        case ("context", "deploymentmode"): return "Production"
        case ("context", "buildnumber"): return "1.0.0.0"
        case ("context", "datetimeinutc"): return DateAndJSONTransformations.format(now)
        case ("context", "kmsi"): return "false"
        case ("claim", _): return claims.text(name) ?? ""
        case ("oidc", "clientid"): return authorization?.clientID ?? ""
        case ("oidc", "loginhint"): return authorization?.loginHint ?? ""
        case ("oidc", "domainhint"): return authorization?.domainHint ?? ""
        case ("oidc", "nonce"): return authorization?.nonce ?? ""
        case ("oidc", "redirecturi"): return authorization?.redirectURI ?? ""
        case ("oidc", "scope"): return authorization?.scopes.joined(separator: " ") ?? ""
        case ("oidc", "prompt"): return authorization?.prompt.map { "\($0)" } ?? ""
        case ("oidc", "maxage"): return authorization?.maxAge.map(String.init) ?? ""
        case ("oauth-kv", "client_id"): return authorization?.clientID ?? ""
        case ("oauth-kv", "redirect_uri"): return authorization?.redirectURI ?? ""
        case ("oauth-kv", "scope"): return authorization?.scopes.joined(separator: " ") ?? ""
        case ("oauth-kv", "login_hint"): return authorization?.loginHint ?? ""
        case ("oauth-kv", "domain_hint"): return authorization?.domainHint ?? ""
        case ("oauth-kv", "ui_locales"): return authorization?.uiLocales ?? ""
        case ("oauth-kv", _): return authorization?.extraParameters?[name] ?? ""
        default: return nil
        }
    }

    /// A claim reference's default value, resolved (`DefaultValue="{OIDC:LoginHint}"`).
    func defaultValue(_ reference: PolicyClaimReference, claims: PolicyClaims) -> String? {
        reference.defaultValue.map { resolve($0, claims: claims) }
    }

    /// Applies a profile's input or output claim defaults: a default fills a missing claim, or
    /// replaces it with `AlwaysUseDefaultValue`.
    func applyDefaults(_ references: [PolicyClaimReference], to claims: inout PolicyClaims) {
        for reference in references {
            guard let value = defaultValue(reference, claims: claims) else { continue }
            if reference.alwaysUseDefaultValue || !claims.has(reference.claimType) {
                claims[reference.claimType] = value.isEmpty ? nil : .string(value)
            }
        }
    }
}

extension PolicyClaimResolver {
    /// The resolvers of the sign-in `run` is, on the policy `policyID`.
    init(_ run: JourneyRun, policyID: String) {
        self.init(
            policyID: policyID, tenant: run.tenant, language: run.language, correlationID: run.state.correlationID ?? "",
            clientAddress: run.clientAddress, host: run.request.head.authority ?? "", now: run.now, authorization: run.authorization)
    }
}
