import Foundation

/// B2C's inheritance model for custom policies: a policy names a base (`BasePolicy`), and the
/// effective policy is the base chain merged from the root down. An element of the child that
/// names the same thing as one of the base (same `Id`, same metadata `Key`, same
/// `ClaimTypeReferenceId`, same orchestration-step `Order`, …) changes that element: its
/// attributes and text win, its children merge the same way; anything new is added
/// ("Custom policy overview: inheritance model"). Technical profiles are one set across all
/// claims providers, so an extension can change a base profile from any `ClaimsProvider`.
package enum PolicyMerge {
    /// The effective policy of `chain`, root first (the base of everything) and the relying party last.
    package static func effective(_ chain: [PolicyElement]) -> PolicyElement {
        guard var merged = chain.first else { return PolicyElement(name: "TrustFrameworkPolicy") }
        for child in chain.dropFirst() { merged = merge(merged, child, at: []) }
        return merged
    }

    /// What an element stands for among its siblings: two with the same identity are the same element.
    /// Case-insensitive, as B2C resolves references (see ``PolicyCheck``).
    static func identity(of element: PolicyElement, under parent: String) -> String {
        identityText(of: element, under: parent).lowercased()
    }

    private static func identityText(of element: PolicyElement, under parent: String) -> String {
        func keyed(_ attribute: String) -> String { "\(element.name)#\(element[attribute] ?? "")" }
        switch element.name {
        case "Item": return keyed("Key")
        case "InputClaim", "OutputClaim", "PersistedClaim", "DisplayClaim": return keyed("ClaimTypeReferenceId")
        case "ValidationTechnicalProfile", "InputClaimsTransformation", "OutputClaimsTransformation", "IncludeTechnicalProfile",
            "UseTechnicalProfileForSessionManagement", "PredicateReference", "PredicateValidationReference":
            return keyed(element["ReferenceId"] != nil ? "ReferenceId" : "Id")
        case "OrchestrationStep": return keyed("Order")
        case "LocalizedString":
            return "\(element.name)#\(element["ElementType"] ?? "")/\(element["ElementId"] ?? "")/\(element["StringId"] ?? "")"
        case "LocalizedResourcesReference": return keyed("Language")
        case "Enumeration": return keyed("Value")
        case "SupportedLanguage": return "\(element.name)#\(element.text)"
        case "Endpoint", "Key", "InputParameter", "Parameter": return keyed("Id")
        case "Protocol" where parent == "DefaultPartnerClaimTypes":
            // A partner claim type's protocol (`DefaultPartnerClaimTypes/Protocol Name=…`); a
            // technical profile has one protocol.
            return keyed("Name")
        case "Precondition", "Value", "ClaimsProvider":
            // Repeated without a name: each one is its own (claims providers are merged by their
            // technical profiles instead, below).
            return "\(element.name)#\(UUID().uuidString)"
        default:
            return element["Id"].map { "\(element.name)#\($0)" } ?? element.name
        }
    }

    /// Elements a child restates whole rather than changes piece by piece.
    private static let replacedWhole: Set<String> = ["OrchestrationStep", "Precondition", "Restriction"]

    static func merge(_ base: PolicyElement, _ child: PolicyElement, at path: [String]) -> PolicyElement {
        var merged = base
        for (name, value) in child.attributes { merged.attributes[name] = value }
        if !child.text.isEmpty { merged.text = child.text }
        if base.name == "ClaimsProviders" { return mergeClaimsProviders(base, child) }
        switch child["MergeBehavior"] {
        case "ReplaceAll"?:
            merged.children = child.children
            return merged
        case "Prepend"?:
            var added: [PolicyElement] = []
            merged.children = mergeChildren(base.children, child.children, path: path + [base.name], added: &added)
            merged.children.insert(contentsOf: added, at: 0)
            return merged
        default:
            var added: [PolicyElement] = []
            merged.children = mergeChildren(base.children, child.children, path: path + [base.name], added: &added)
            merged.children.append(contentsOf: added)
            return merged
        }
    }

    /// The base's children with the child's merged in; the child's new ones in `added`.
    private static func mergeChildren(
        _ base: [PolicyElement], _ child: [PolicyElement], path: [String], added: inout [PolicyElement]
    ) -> [PolicyElement] {
        var result = base
        var index: [String: Int] = [:]
        let parent = path.last ?? ""
        for (position, element) in base.enumerated() {
            let key = identity(of: element, under: parent)
            index[key] = index[key] ?? position
        }
        for element in child {
            let key = identity(of: element, under: parent)
            if let position = index[key] {
                result[position] = replacedWhole.contains(element.name) ? element : merge(result[position], element, at: path)
            } else {
                added.append(element)
            }
        }
        return result
    }

    /// Technical profiles by `Id` across every claims provider: a child's profile changes the
    /// base's wherever it is; a new one joins the provider of the same display name, or a new one.
    private static func mergeClaimsProviders(_ base: PolicyElement, _ child: PolicyElement) -> PolicyElement {
        var merged = base
        var location: [String: (provider: Int, profile: Int)] = [:]
        func reindex() {
            location = [:]
            for (p, provider) in merged.children.enumerated() {
                for (t, profile) in (provider.child("TechnicalProfiles")?.children ?? []).enumerated() {
                    if let id = profile["Id"]?.lowercased() { location[id] = (p, t) }
                }
            }
        }
        reindex()
        for provider in child.children {
            var newcomers: [PolicyElement] = []
            for profile in provider.child("TechnicalProfiles")?.children ?? [] {
                if let id = profile["Id"]?.lowercased(), let (p, t) = location[id] {
                    let profiles = merged.children[p].children.firstIndex { $0.name == "TechnicalProfiles" }!
                    let existing = merged.children[p].children[profiles].children[t]
                    merged.children[p].children[profiles].children[t] = merge(existing, profile, at: ["TechnicalProfiles"])
                } else {
                    newcomers.append(profile)
                }
            }
            guard !newcomers.isEmpty else { continue }
            let name = provider.child("DisplayName")?.text
            if let p = merged.children.firstIndex(where: { $0.child("DisplayName")?.text == name && name != nil }),
                let profiles = merged.children[p].children.firstIndex(where: { $0.name == "TechnicalProfiles" })
            {
                merged.children[p].children[profiles].children.append(contentsOf: newcomers)
            } else {
                var fresh = provider
                if let profiles = fresh.children.firstIndex(where: { $0.name == "TechnicalProfiles" }) {
                    fresh.children[profiles].children = newcomers
                }
                merged.children.append(fresh)
            }
            reindex()
        }
        return merged
    }
}
