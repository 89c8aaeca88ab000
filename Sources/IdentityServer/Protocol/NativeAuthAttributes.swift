import Foundation
import IdentityDirectory
import WireCoding

/// The attributes a native sign-up collects (Microsoft's reference: `attributes`, a JSON object
/// in a form field): the flow's sign-up attributes only (others are ignored, as the reference
/// says), each checked by the rule the sign-up page applies; a multi-valued one is a
/// comma-separated string. Custom attributes are named as Graph names them,
/// `extension_{appIdWithoutDashes}_{name}`, or as the flows do, `extension_{name}`.
enum NativeAuthAttributes {
    /// The largest `attributes` value read: a sign-up's handful of attributes is far smaller.
    static let maximumBytes = 16 * 1024

    /// Reads `text` into `data`, or refuses it whole (`attribute_validation_failed` naming each
    /// attribute refused, with `token` when the flow goes on).
    static func collect(_ text: String, into data: inout NativeAuthFlowData, flow: UserFlow, tenant: Tenant, token: String?) throws {
        guard text.utf8.count <= maximumBytes, let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8)) else {
            throw NativeAuthError(error: "invalid_request", code: 90_100, message: "The attributes parameter is not a JSON object.")
        }
        try collect(object, into: &data, flow: flow, tenant: tenant, token: token)
    }

    /// ``collect(_:into:flow:tenant:token:)`` for values already read (an extension's answer).
    static func collect(_ object: [String: JSONValue], into data: inout NativeAuthFlowData, flow: UserFlow, tenant: Tenant, token: String?) throws {
        func refused(_ names: [String]) -> NativeAuthError {
            let error = NativeAuthError.attributeValidationFailed.with(
                "invalid_attributes", .array(names.map { .object([("name", .string($0))]) }))
            return token.map(error.continuing) ?? error
        }
        var invalid: [String] = []
        var values: [(FlowAttribute, String)] = []
        for (key, raw) in object.sorted(by: { $0.key < $1.key }) {
            guard let attribute = flowAttribute(named: key), flow.signUpAttributes.contains(attribute) else { continue }
            let text: String
            switch raw {
            case .string(let string): text = string
            case .bool(let flag): text = flag ? "true" : "false"
            case .number(let number) where number == number.rounded() && abs(number) < 1e15: text = String(Int64(number))
            default:
                invalid.append(key)
                continue
            }
            values.append((attribute, text))
        }
        var collected: [(FlowAttribute, String?)] = []
        for (attribute, text) in values {
            switch attribute {
            case .builtIn(let builtIn):
                switch builtIn.validate(text) {
                case .success(let value) where builtIn == .displayName && value.isEmpty: invalid.append(attribute.rawValue)
                case .success(let value): collected.append((attribute, value.isEmpty ? nil : value))
                case .failure: invalid.append(attribute.rawValue)
                }
            case .custom(let name):
                guard let declared = tenant.customAttribute(named: name) else { continue }
                switch declared.validate(text) {
                case .success(let value): collected.append((attribute, value))
                case .failure: invalid.append(attribute.rawValue)
                }
            }
        }
        guard invalid.isEmpty else { throw refused(invalid) }
        for (attribute, value) in collected {
            if attribute == .displayName { data.displayName = value } else { data.attributes[attribute.rawValue] = value }
        }
    }

    /// The attribute `name` stands for: a built-in one, `extension_{name}`, or Graph's
    /// `extension_{32 hex digits}_{name}`.
    static func flowAttribute(named name: String) -> FlowAttribute? {
        let parts = name.split(separator: "_", maxSplits: 2, omittingEmptySubsequences: false)
        if parts.count == 3, parts[0] == "extension", parts[1].count == 32, parts[1].allSatisfy(\.isHexDigit) {
            return FlowAttribute(rawValue: "extension_" + parts[2])
        }
        return FlowAttribute(rawValue: name)
    }

    /// The attributes still to collect, as the reference's `required_attributes` lists them;
    /// empty when every required one (the display name, as on the sign-up page) is there.
    static func missing(_ data: NativeAuthFlowData, flow: UserFlow, tenant: Tenant) -> [JSONText] {
        let needsName = flow.signUpAttributes.contains(.displayName) && data.displayName == nil
        guard needsName else { return [] }
        return flow.signUpAttributes.compactMap { attribute -> JSONText? in
            if attribute == .displayName {
                return data.displayName == nil ? entry(attribute.rawValue, type: "string", required: true) : nil
            }
            guard data.attributes[attribute.rawValue] == nil else { return nil }
            switch attribute {
            case .builtIn: return entry(attribute.rawValue, type: "string", required: false)
            case .custom(let name):
                guard let declared = tenant.customAttribute(named: name) else { return nil }
                let type =
                    switch declared.type {
                    case .boolean: "boolean"
                    case .int: "int"
                    case .string, .dateTime, .stringCollection: "string"
                    }
                return entry(attribute.rawValue, type: type, required: false)
            }
        }
    }

    private static func entry(_ name: String, type: String, required: Bool) -> JSONText {
        .object([("name", .string(name)), ("type", .string(type)), ("required", .bool(required))])
    }
}
