import Foundation

/// A JSON value with object keys kept in insertion order, so tokens and responses come out with
/// B2C's field order (humans compare them side by side with real captures).
public indirect enum JSONText: Sendable, Equatable {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null
    case array([JSONText])
    case object([(String, JSONText)])

    public static func == (lhs: JSONText, rhs: JSONText) -> Bool { lhs.serialized == rhs.serialized }

    public var serialized: String {
        var out = ""
        write(into: &out)
        return out
    }

    private func write(into out: inout String) {
        switch self {
        case .string(let value): Self.writeString(value, into: &out)
        case .int(let value): out += String(value)
        case .bool(let value): out += value ? "true" : "false"
        case .null: out += "null"
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                Self.writeString(key, into: &out)
                out += ":"
                value.write(into: &out)
            }
            out += "}"
        }
    }

    /// RFC 8259 §7 string escaping.
    private static func writeString(_ value: String, into out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Builds an ordered JSON object, skipping absent values.
struct JSONObjectBuilder {
    private(set) var members: [(String, JSONText)] = []

    mutating func set(_ key: String, _ value: String?) { if let value { members.append((key, .string(value))) } }
    mutating func set(_ key: String, _ value: Int64?) { if let value { members.append((key, .int(value))) } }
    mutating func set(_ key: String, _ value: Int?) { if let value { members.append((key, .int(Int64(value)))) } }
    mutating func set(_ key: String, _ value: Bool?) { if let value { members.append((key, .bool(value))) } }
    mutating func set(_ key: String, _ value: [String]?) {
        if let value { members.append((key, .array(value.map(JSONText.string)))) }
    }
    mutating func set(_ key: String, json value: JSONText?) { if let value { members.append((key, value)) } }

    var object: JSONText { .object(members) }
}
