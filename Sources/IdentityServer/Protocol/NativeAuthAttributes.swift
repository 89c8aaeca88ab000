import Foundation
import IdentityDirectory
import UserJourneys
import WireCoding

/// The attributes a native sign-up collects (Microsoft's reference: `attributes`, a JSON object
/// in a form field), read by ``SignUpAttributeValues``.
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

    /// ``collect(_:into:flow:tenant:token:)`` for values already read.
    static func collect(_ object: [String: JSONValue], into data: inout NativeAuthFlowData, flow: UserFlow, tenant: Tenant, token: String?) throws {
        switch SignUpAttributeValues.read(object, flow: flow, tenant: tenant) {
        case .success(let read):
            if let name = read.displayName { data.displayName = name }
            data.attributes = read.applied(to: data.attributes)
        case .failure(let refused):
            let error = NativeAuthError.attributeValidationFailed.with(
                "invalid_attributes", .array(refused.names.map { .object([("name", .string($0))]) }))
            throw token.map(error.continuing) ?? error
        }
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
