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
