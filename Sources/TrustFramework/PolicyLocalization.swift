import Foundation

/// A policy's `Localization` (B2C's localization.md): its languages and `LocalizedResources`,
/// which content definitions name per language with `LocalizedResourcesReferences`. Read by the
/// localized-string claims transformations (`GetLocalizedStringsTransformation`,
/// `FormatLocalizedString`, `GetMappedValueFromLocalizedCollection`) in the language the app
/// asked for with `ui_locales`.
struct PolicyLocalization: Sendable {
    /// One `LocalizedResources` element: its strings by element type, element id and string id,
    /// and its collections by claim type (`ElementType="ClaimType"`, `TargetCollection="Restriction"`).
    struct Resources: Sendable {
        var strings: [String: String] = [:]
        var collections: [String: [(text: String, value: String)]] = [:]
        /// The items each collection marks `SelectByDefault="true"`, by claim type.
        var selectedByDefault: [String: [String]] = [:]

        static func key(_ elementType: String, _ elementID: String?, _ stringID: String) -> String {
            "\(elementType.lowercased())|\((elementID ?? "").lowercased())|\(stringID.lowercased())"
        }
    }

    let defaultLanguage: String?
    let supportedLanguages: [String]
    let resources: [String: Resources]

    init(_ element: PolicyElement?) {
        let languages = element?.child("SupportedLanguages")
        defaultLanguage = languages?["DefaultLanguage"]
        supportedLanguages = (languages?.children("SupportedLanguage") ?? []).map(\.text).filter { !$0.isEmpty }
        var resources: [String: Resources] = [:]
        // `Enabled="false"` turns localization off: nothing is read from the resources.
        if element?["Enabled"]?.lowercased() != "false" {
            for resource in element?.children("LocalizedResources") ?? [] {
                guard let id = resource["Id"] else { continue }
                var read = Resources()
                for string in resource.items("LocalizedStrings", "LocalizedString") {
                    guard let type = string["ElementType"], let stringID = string["StringId"] else { continue }
                    read.strings[Resources.key(type, string["ElementId"], stringID)] = string.text
                }
                for collection in resource.items("LocalizedCollections", "LocalizedCollection") {
                    guard collection["ElementType"] == "ClaimType", let claim = collection["ElementId"],
                        (collection["TargetCollection"] ?? "Restriction") == "Restriction"
                    else { continue }
                    read.collections[claim.lowercased()] = collection.children("Item").map { ($0["Text"] ?? "", $0["Value"] ?? "") }
                    read.selectedByDefault[claim.lowercased()] = PolicyClaimType.selectedByDefault(collection.children("Item"))
                }
                resources[id.lowercased()] = read
            }
        }
        self.resources = resources
    }

    /// The language of `uiLocales` (the app's `ui_locales`, space-separated tags in order of
    /// preference) that the policy localizes, else its `DefaultLanguage`, else English. A tag
    /// matches a language exactly or by its primary subtag (`es-MX` reads `es`).
    func language(uiLocales: String?, offered: [String]) -> String {
        let known = supportedLanguages.isEmpty ? offered : supportedLanguages
        for tag in (uiLocales ?? "").split(separator: " ").map({ String($0).lowercased() }) {
            if let exact = known.first(where: { $0.lowercased() == tag }) { return exact }
            let primary = tag.split(separator: "-").first.map(String.init) ?? tag
            if let near = known.first(where: { $0.lowercased() == primary }) { return near }
        }
        return defaultLanguage ?? "en"
    }
}

extension CompiledPolicy {
    /// The resources a page of `contentDefinition` reads in the language `uiLocales` picks: those
    /// its references name for that language, in order, else those of the default language.
    func localizedResources(contentDefinition: String?, uiLocales: String?) -> [PolicyLocalization.Resources] {
        guard let definition = contentDefinition.flatMap(self.contentDefinition), !definition.localizedResources.isEmpty else { return [] }
        let language = localization.language(uiLocales: uiLocales, offered: definition.localizedResources.map(\.language))
        func named(_ language: String) -> [PolicyLocalization.Resources] {
            definition.localizedResources.filter { $0.language.lowercased() == language.lowercased() }
                .compactMap { localization.resources[$0.id.lowercased()] }
        }
        let chosen = named(language)
        return chosen.isEmpty ? named(localization.defaultLanguage ?? "en") : chosen
    }
}

/// What a page reads of a policy's `Localization` in the language `ui_locales` picked
/// (localization.md, localization-string-ids.md): claim types' `DisplayName`, `UserHelpText`
/// and `PatternHelpText`, their `Restriction` collections, and the page's own `UxElement`
/// strings. Plain text: the page escapes it like any other.
package struct PolicyPageStrings: Sendable {
    let resources: [PolicyLocalization.Resources]
    /// The language the resources are in, nil when the page has none.
    package let language: String?

    private func string(_ elementType: String, _ elementID: String?, _ stringID: String) -> String? {
        let key = PolicyLocalization.Resources.key(elementType, elementID, stringID)
        return resources.lazy.compactMap { $0.strings[key] }.first
    }

    /// A claim type's localized `DisplayName`, `UserHelpText` or `PatternHelpText`.
    package func claim(_ claimType: String, _ stringID: String) -> String? { string("ClaimType", claimType, stringID) }

    /// A localized `ErrorMessage` by its string id (an assertion's `UserMessageIf…` key).
    package func error(_ stringID: String) -> String? { string("ErrorMessage", nil, stringID) }

    /// A claim type's localized `Restriction` items (text and value), nil when not localized.
    package func options(_ claimType: String) -> [(text: String, value: String)]? {
        resources.lazy.compactMap { $0.collections[claimType.lowercased()] }.first
    }

    /// The values a localized collection selects by default, nil when the claim type's items are
    /// not localized (its `Restriction`'s own then apply).
    package func selectedByDefault(_ claimType: String) -> [String]? {
        guard let index = resources.firstIndex(where: { $0.collections[claimType.lowercased()] != nil }) else { return nil }
        return resources[index].selectedByDefault[claimType.lowercased()] ?? []
    }

    /// The page's `UxElement` strings mapped onto the hosted pages' own keys (`button_continue`
    /// is the pages' `continue`): what the policy says overrides the built-in text.
    package var pageOverrides: [String: String] {
        var overrides: [String: String] = [:]
        for (b2c, own) in Self.uxElements {
            if let text = string("UxElement", nil, b2c) { overrides[own] = text }
        }
        return overrides
    }

    /// B2C's `UxElement` string ids (localization-string-ids.md: the sign-in and sign-up page
    /// and the self-asserted page) and the hosted pages' keys they set.
    static let uxElements: [(String, String)] = [
        ("button_continue", "continue"), ("button_cancel", "cancel"), ("ver_but_send", "sendCode"), ("ver_but_verify", "verifyCode"),
        ("ver_but_resend", "sendNewCode"), ("ver_but_edit", "changeEmail"), ("ver_success_msg", "signup_verified"),
        ("ver_intro_msg", "signup_codeSent"), ("ver_fail_code", "error_codeMismatch"), ("heading", "signin_title"),
        ("button_signin", "signin_submit"), ("createaccount_intro", "signin_noAccount"), ("createaccount_link", "signin_signUpNow"),
        ("forgotpassword_link", "signin_forgot"), ("social_intro", "signin_orWith"), ("password", "password"),
        ("logonIdentifier_email", "email"),
    ]
}

extension CompiledPolicy {
    /// The localized strings of a page of `contentDefinition` in the language `uiLocales` picks.
    package func pageStrings(contentDefinition: String?, uiLocales: String?) -> PolicyPageStrings {
        let resources = localizedResources(contentDefinition: contentDefinition, uiLocales: uiLocales)
        guard !resources.isEmpty, let definition = contentDefinition.flatMap(self.contentDefinition) else {
            return PolicyPageStrings(resources: [], language: nil)
        }
        let language = localization.language(uiLocales: uiLocales, offered: definition.localizedResources.map(\.language))
        let offered = definition.localizedResources.contains { $0.language.lowercased() == language.lowercased() }
        return PolicyPageStrings(resources: resources, language: offered ? language : localization.defaultLanguage ?? "en")
    }
}
