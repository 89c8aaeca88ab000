import Foundation
import WireCoding

/// The collection-reading claims transformations of the reference: the social family over an
/// `alternativeSecurityIdCollection` (`AddItemToAlternativeSecurityIdCollection`,
/// `GetIdentityProvidersFromAlternativeSecurityIdCollectionTransformation`,
/// `RemoveAlternativeSecurityIdByIdentityProvider`; `social-transformations.md`) and the JSON
/// array readers and XML converter (`GetClaimsFromJsonArray`, `GetClaimsFromJsonArrayV2`,
/// `XmlStringToJsonString`; `json-transformations.md`). An `alternativeSecurityIdCollection`
/// claim holds its items as the JSON texts `CreateAlternativeSecurityId` writes.
enum CollectionTransformations {
    static let methods: Set<String> = [
        "AddItemToAlternativeSecurityIdCollection", "GetIdentityProvidersFromAlternativeSecurityIdCollectionTransformation",
        "RemoveAlternativeSecurityIdByIdentityProvider", "GetClaimsFromJsonArray", "GetClaimsFromJsonArrayV2", "XmlStringToJsonString",
    ]
    /// The most characters a JSON or XML input claim these read may have.
    static let maximumDocument = 65_536

    static func evaluate(_ method: String, _ io: TransformationIO, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> [(
        String, PolicyClaimValue?
    )]? {
        switch method {
        case "AddItemToAlternativeSecurityIdCollection":
            let collection = io.collection("collection", claims)
            let item = io.text("item", claims)
            guard let added = identity(item) else {
                throw .invalidInput("AddItemToAlternativeSecurityIdCollection: the item is not an alternativeSecurityId.")
            }
            // The same identity twice is one link.
            let present = collection.contains { identity($0).map { $0 == added } ?? false }
            return [("collection", .collection(present ? collection : collection + [item]))]
        case "GetIdentityProvidersFromAlternativeSecurityIdCollectionTransformation":
            let issuers = io.collection("alternativeSecurityIdCollection", claims).compactMap { identity($0)?.issuer }
            return [("identityProvidersCollection", .collection(issuers))]
        case "RemoveAlternativeSecurityIdByIdentityProvider":
            // The first identity of that provider, as the unit test's comment says.
            var collection = io.collection("collection", claims)
            let provider = io.text("identityProvider", claims).lowercased()
            if let index = collection.firstIndex(where: { identity($0)?.issuer.lowercased() == provider }) { collection.remove(at: index) }
            return [("collection", .collection(collection))]
        case "GetClaimsFromJsonArray":
            let text = io.text("jsonSource", claims)
            guard text.count <= maximumDocument, case .array(let items)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
                throw .invalidInput("GetClaimsFromJsonArray: jsonSource is not a JSON array of at most \(maximumDocument) characters.")
            }
            return try claimsFromPairs(items, io)
        case "GetClaimsFromJsonArrayV2":
            let texts = io.collection("jsonSource", claims)
            var items: [JSONValue] = []
            for text in texts {
                guard text.count <= maximumDocument, let item = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
                    throw .invalidInput("GetClaimsFromJsonArrayV2: an item of jsonSource is not JSON of at most \(maximumDocument) characters.")
                }
                items.append(item)
            }
            return try claimsFromPairs(items, io)
        case "XmlStringToJsonString":
            let text = io.text("xml", claims)
            guard let root = try? PolicyXML.parse(Data(text.utf8), namespace: nil, limit: maximumDocument) else {
                throw .invalidInput("XmlStringToJsonString: the xml input claim is not well-formed XML within \(maximumDocument) bytes.")
            }
            return [("json", .string(JSONText.object([(root.name, json(root))]).serialized))]
        default: return nil
        }
    }

    /// An alternativeSecurityId's issuer and user id, or nil when the text is not one.
    private static func identity(_ text: String) -> (issuer: String, issuerUserId: String)? {
        guard let object = GeneralTransformations.object(text), case .string(let issuer)? = object["issuer"],
            case .string(let user)? = object["issuerUserId"]
        else { return nil }
        return (issuer, user)
    }

    /// `GetClaimsFromJsonArray`: each item an object whose `jsonSourceKeyName` member names a
    /// claim type and whose `jsonSourceValueName` member is its value, typed as the claim type
    /// is. Outputs are named by their claim types.
    private static func claimsFromPairs(_ items: [JSONValue], _ io: TransformationIO) throws(ClaimsTransformationFailure) -> [(
        String, PolicyClaimValue?
    )] {
        let keyName = io.parameter("jsonSourceKeyName") ?? "key"
        let valueName = io.parameter("jsonSourceValueName") ?? "value"
        var pairs: [String: JSONValue] = [:]
        for case .object(let members) in items {
            guard case .string(let key)? = members[keyName], pairs[key.lowercased()] == nil else { continue }
            pairs[key.lowercased()] = members[valueName] ?? .null
        }
        var outputs: [(String, PolicyClaimValue?)] = []
        for reference in io.transformation.outputClaims {
            let type = io.context.policy?.claimType(reference.claimType)?.dataType ?? .string
            guard let found = pairs[reference.claimType.lowercased()] else {
                if io.flag("errorOnMissingClaims") {
                    throw .invalidInput("GetClaimsFromJsonArray: the JSON has no item for the claim '\(reference.claimType)'.")
                }
                continue
            }
            let text: String? = if case .null = found { nil } else { GeneralTransformations.scalarText(found) }
            guard let text, !text.isEmpty else {
                if io.flag("includeEmptyClaims") { outputs.append((reference.claimType, .string(""))) }
                continue
            }
            guard let value = PolicyClaimValue.parse(text, as: type) else {
                throw .invalidInput("GetClaimsFromJsonArray: the value of '\(reference.claimType)' is not a \(type.rawValue).")
            }
            outputs.append((reference.claimType, value))
        }
        return outputs
    }

    /// An element as Json.NET's `SerializeXmlNode` writes it: text alone as a string, nothing
    /// as null; otherwise an object of `@`-prefixed attributes, children by name (an array where
    /// a name repeats) and `#text`.
    private static func json(_ element: PolicyElement) -> JSONText {
        if element.children.isEmpty, element.attributes.isEmpty { return element.text.isEmpty ? .null : .string(element.text) }
        var members: [(String, JSONText)] = element.attributes.sorted { $0.key < $1.key }.map { ("@\($0.key)", .string($0.value)) }
        var order: [String] = []
        var byName: [String: [PolicyElement]] = [:]
        for child in element.children {
            if byName[child.name] == nil { order.append(child.name) }
            byName[child.name, default: []].append(child)
        }
        for name in order {
            let children = byName[name] ?? []
            members.append((name, children.count == 1 ? json(children[0]) : .array(children.map(json))))
        }
        if !element.text.isEmpty { members.append(("#text", .string(element.text))) }
        return .object(members)
    }
}
