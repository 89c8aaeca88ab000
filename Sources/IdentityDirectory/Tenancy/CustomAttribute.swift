import Crypto
import Foundation
import TodoModels
import WireCoding

/// A tenant's own user attribute, B2C's "custom attribute" (SPEC §2.11): declared once per
/// tenant, collected by the flows that list it, returned in tokens as `extension_{name}`, and
/// stored by Graph as a directory extension of the tenant's `b2c-extensions-app`, named
/// `extension_{extensionsAppIdWithoutDashes}_{name}`.
public struct CustomAttribute: Sendable, Codable, Equatable {
    /// The data types B2C's portal offers (String, Boolean, Int), and the two more Graph's
    /// `userFlowAttributes` create (`dateTime`, `stringCollection`; SPEC §2.14). Graph calls
    /// `int` `int64`; its directory extension stores an Int32.
    public enum DataType: String, Sendable, Codable, CaseIterable {
        case string, boolean, int, dateTime, stringCollection
    }

    /// A collection holds at most this many strings.
    static let maximumItems = 20

    /// The bare name, e.g. `loyaltyNumber`.
    public var name: String
    public var type: DataType
    /// The label the pages show; the name when absent.
    public var displayName: String?
    /// What it is for (Graph's `userFlowAttribute.description`).
    public var description: String?

    public init(name: String, type: DataType, displayName: String? = nil, description: String? = nil) {
        self.description = description
        self.name = name
        self.type = type
        self.displayName = displayName
    }

    /// Its name in user flows and tokens, and the key under which an account keeps its value.
    public var claimName: String { FlowAttribute.customPrefix + name }

    package var label: String { displayName ?? name }

    /// Its name in Graph: a directory extension property of the b2c-extensions-app, whose app id
    /// is written without dashes (Graph's directory extension naming).
    package func graphName(extensionsAppID: UUID) -> String {
        "extension_\(extensionsAppID.uuidString.lowercased().replacingOccurrences(of: "-", with: ""))_\(name)"
    }

    /// Letters and digits, starting with a letter, at most 64: a name that is also a valid
    /// JSON claim name and Graph property segment.
    static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 64 else { return false }
        let letters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        let digits = CharacterSet(charactersIn: "0123456789")
        return letters.contains(first) && name.unicodeScalars.allSatisfy { letters.contains($0) || digits.contains($0) }
    }

    /// Graph stores strings of directory extensions up to 256 characters.
    static let maximumLength = 256

    /// A page's text for this attribute as stored ("true"/"false", a decimal Int32, or checked
    /// text), nil for "no value", or the message the page shows.
    package func validate(_ raw: String) -> Result<String?, AttributeProblem> {
        let text = TextRules.trimmed(raw)
        if text.isEmpty { return .success(nil) }
        switch type {
        case .string:
            switch TextRules.name(text, maximumLength: Self.maximumLength) {
            case .success(let value): return .success(value)
            case .failure(.empty): return .success(nil)
            case .failure(.tooLong(let maximum)):
                return .failure(AttributeProblem(message: "\(label) must be at most \(maximum) characters."))
            case .failure(.forbiddenCharacter):
                return .failure(
                    AttributeProblem(message: "\(label) contains characters that cannot be used (controls or invisible characters)."))
            }
        case .boolean:
            switch text.lowercased() {
            case "true", "on", "1": return .success("true")
            case "false", "off", "0": return .success("false")
            default: return .failure(AttributeProblem(message: "\(label) must be true or false."))
            }
        case .int:
            // Graph's Integer extension type is 32-bit signed.
            guard text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-") }), let value = Int32(text) else {
                return .failure(AttributeProblem(message: "\(label) must be a whole number between -2147483648 and 2147483647."))
            }
            return .success(String(value))
        case .dateTime:
            // ISO 8601 (a date, or a date and time with its zone), stored in UTC with a Z.
            guard let date = Self.date(text) else {
                return .failure(AttributeProblem(message: "\(label) must be a date (2026-11-26) or a date and time (2026-11-26T09:30:00Z)."))
            }
            return .success(Self.utc.string(from: date))
        case .stringCollection:
            // On a page: the values separated by commas.
            return collection(text.split(separator: ",").map { TextRules.trimmed(String($0)) }.filter { !$0.isEmpty })
        }
    }

    private func collection(_ items: [String]) -> Result<String?, AttributeProblem> {
        guard items.count <= Self.maximumItems else {
            return .failure(AttributeProblem(message: "\(label) holds at most \(Self.maximumItems) values."))
        }
        var kept: [String] = []
        for item in items {
            guard case .success(let value) = TextRules.name(item, maximumLength: Self.maximumLength) else {
                return .failure(AttributeProblem(message: "\(label): each value is 1 to \(Self.maximumLength) characters without controls."))
            }
            kept.append(value)
        }
        return .success(kept.isEmpty ? nil : StoredJSON.encode(kept))
    }

    static var utc: ISO8601DateFormatter { ISO8601DateFormatter() }

    static func date(_ text: String) -> Date? {
        if let date = ISO8601DateFormatter().date(from: text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return date }
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        return text.count == 10 ? day.date(from: text) : nil
    }

    /// The stored form of a JSON value Graph was sent, nil for JSON null (remove), or a refusal
    /// when the JSON type is not the declared one.
    package func storedValue(fromJSON value: JSONValue) -> Result<String?, AttributeProblem> {
        switch (type, value) {
        case (_, .null): return .success(nil)
        case (.string, .string(let text)): return validate(text)
        case (.boolean, .bool(let flag)): return .success(flag ? "true" : "false")
        case (.int, .number(let number)):
            guard number == number.rounded(), let value = Int32(exactly: number) else {
                return .failure(AttributeProblem(message: "\(label) must be a 32-bit integer."))
            }
            return .success(String(value))
        case (.dateTime, .string(let text)): return validate(text)
        case (.stringCollection, .array(let values)):
            var items: [String] = []
            for value in values {
                guard case .string(let item) = value else { return .failure(AttributeProblem(message: "\(label) must be a list of strings.")) }
                items.append(item)
            }
            return collection(items)
        default: return .failure(AttributeProblem(message: "\(label) must be of type \(type.rawValue)."))
        }
    }

    /// The stored value as the typed JSON tokens and Graph carry; nil when it does not read as
    /// the declared type (stored under an older declaration), so it is left out rather than
    /// sent with a type the reader does not expect.
    package func json(_ stored: String) -> JSONText? {
        switch type {
        case .string: return .string(stored)
        case .boolean: return stored == "true" ? .bool(true) : stored == "false" ? .bool(false) : nil
        case .int: return Int32(stored).map { JSONText.int(Int64($0)) }
        case .dateTime: return Self.date(stored) == nil ? nil : .string(stored)
        case .stringCollection: return StoredJSON.decode([String].self, stored).map { .array($0.map(JSONText.string)) }
        }
    }

    /// The id of a tenant's b2c-extensions-app: derived from the tenant's GUID, so it is stable
    /// across restarts, exports and instances without being stored.
    static func extensionsAppID(tenantID: UUID) -> UUID {
        var bytes = Array(SHA256.hash(data: Data("b2c-extensions-app:\(tenantID.uuidString.lowercased())".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80  // RFC 9562 version 8: a name-derived, implementation-specific UUID
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // the RFC 9562 variant
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10],
                bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}

/// An attribute a flow collects or edits: a built-in one, or a tenant's own written as
/// `extension_{name}`, as B2C's user flows list them.
public enum FlowAttribute: Sendable, Hashable, Codable, CustomStringConvertible {
    case builtIn(UserAttribute)
    case custom(String)

    static let customPrefix = "extension_"
    public static let displayName = FlowAttribute.builtIn(.displayName)

    public init?(rawValue: String) {
        if let builtIn = UserAttribute(rawValue: rawValue) {
            self = .builtIn(builtIn)
        } else if rawValue.hasPrefix(Self.customPrefix), CustomAttribute.isValidName(String(rawValue.dropFirst(Self.customPrefix.count))) {
            self = .custom(String(rawValue.dropFirst(Self.customPrefix.count)))
        } else {
            return nil
        }
    }

    /// The name in a flow, and the key of the account's value.
    public var rawValue: String {
        switch self {
        case .builtIn(let attribute): attribute.rawValue
        case .custom(let name): Self.customPrefix + name
        }
    }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let attribute = FlowAttribute(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription:
                    "'\(TextRules.printable(raw))' is not a user attribute (\(UserAttribute.allCases.map(\.rawValue).joined(separator: ", ")), or extension_{name} of a declared userAttribute)"
            )
        }
        self = attribute
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension Tenant {
    /// The id of this tenant's b2c-extensions-app, which names its Graph extension properties.
    public var extensionsAppID: UUID { CustomAttribute.extensionsAppID(tenantID: id) }

    /// The declared attribute a flow's `extension_{name}` refers to.
    package func customAttribute(named name: String) -> CustomAttribute? {
        userAttributes.first { $0.name == name }
    }

    /// The declared attribute behind an account's key (`extension_{name}`).
    func customAttribute(forKey key: String) -> CustomAttribute? {
        guard case .custom(let name)? = FlowAttribute(rawValue: key) else { return nil }
        return customAttribute(named: name)
    }
}
