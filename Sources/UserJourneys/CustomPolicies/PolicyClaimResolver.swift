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
        case ("culture", "lcid"): return Self.lcid(language).map(String.init) ?? ""
        case ("culture", "regionname"): return language.split(separator: "-").dropFirst().first.map { $0.uppercased() } ?? ""
        case ("policy", "policyid"): return policyID
        case ("policy", "relyingpartytenantid"), ("policy", "trustframeworktenantid"): return tenant.name
        case ("policy", "tenantobjectid"): return tenant.guid
        case ("context", "correlationid"): return correlationID
        case ("context", "ipaddress"): return clientAddress
        case ("context", "hostname"): return host
        case ("context", "deploymentmode"): return "Production"
        case ("context", "buildnumber"): return "1.0.0.0"
        case ("context", "datetimeinutc"): return Self.resolverDate(now)
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
        // Kept with the request's other parameters (`ExtraParameters`): `acr_values`, `resource`.
        case ("oidc", "authenticationcontextreferences"): return authorization?.extraParameters?["acr_values"] ?? ""
        case ("oidc", "resource"): return authorization?.extraParameters?["resource"] ?? ""
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

    /// `{Context:DateTimeInUtc}` as B2C writes it: .NET's `DateTime.ToString()` in en-US
    /// (claim-resolver-overview.md's example is `10/10/2021 12:00:00 PM`), not ISO 8601.
    static func resolverDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "M/d/yyyy h:mm:ss a"
        return formatter.string(from: date)
    }

    /// `{Culture:LCID}`: Windows' locale identifier of the page's language (claim-resolver-overview.md:
    /// `1033` for `en-US`), for the languages B2C localizes (localization-string-ids.md); a neutral
    /// tag is its neutral LCID as .NET's `CultureInfo` gives it (`en` is 9). Nil for others.
    static func lcid(_ language: String) -> Int? {
        let tag = language.lowercased()
        if let specific = specificLCIDs[tag] { return specific }
        return neutralLCIDs[String(tag.split(separator: "-").first ?? "")].flatMap { tag.contains("-") ? nil : $0 }
    }

    private static let neutralLCIDs: [String: Int] = [
        "ar": 1, "bg": 2, "ca": 3, "zh": 4, "cs": 5, "da": 6, "de": 7, "el": 8, "en": 9, "es": 10, "fi": 11, "fr": 12, "he": 13,
        "hu": 14, "it": 16, "ja": 17, "ko": 18, "nl": 19, "nb": 20, "pl": 21, "pt": 22, "ro": 24, "ru": 25, "hr": 26, "sk": 27,
        "sv": 29, "th": 30, "tr": 31, "id": 33, "uk": 34, "sl": 36, "et": 37, "lv": 38, "lt": 39, "vi": 42, "eu": 45, "hi": 57,
        "ms": 62, "kk": 63, "gl": 86, "ta": 73, "te": 74, "mr": 78, "kn": 75, "ml": 76, "gu": 71, "bn": 69, "sr": 31770,
    ]

    private static let specificLCIDs: [String: Int] = [
        "en-us": 1033, "en-gb": 2057, "en-au": 3081, "en-ca": 4105, "en-in": 16393, "fr-fr": 1036, "fr-ca": 3084, "de-de": 1031,
        "es-es": 3082, "es-mx": 2058, "it-it": 1040, "ja-jp": 1041, "ko-kr": 1042, "nl-nl": 1043, "pt-br": 1046, "pt-pt": 2070,
        "ru-ru": 1049, "zh-cn": 2052, "zh-hans": 4, "zh-tw": 1028, "zh-hant": 31748, "sv-se": 1053, "da-dk": 1030, "fi-fi": 1035,
        "nb-no": 1044, "pl-pl": 1045, "tr-tr": 1055, "cs-cz": 1029, "hu-hu": 1038, "el-gr": 1032, "ar-sa": 1025, "he-il": 1037,
        "hi-in": 1081, "th-th": 1054, "ro-ro": 1048, "sk-sk": 1051, "hr-hr": 1050, "uk-ua": 1058, "bg-bg": 1026, "id-id": 1057,
        "ms-my": 1086, "vi-vn": 1066, "lt-lt": 1063, "lv-lv": 1062, "et-ee": 1061, "sl-si": 1060, "ca-es": 1027, "eu-es": 1069,
        "gl-es": 1110, "kk-kz": 1087, "sr-latn-rs": 9242, "sr-cyrl-rs": 10266,
    ]

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
