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

    public var serialized: String { String(decoding: utf8, as: UTF8.self) }

    /// The UTF-8 bytes; every token and token response is written this way, so it works on bytes.
    public var utf8: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(512)
        write(into: &out)
        return out
    }

    private func write(into out: inout [UInt8]) {
        switch self {
        case .string(let value): Self.writeString(value, into: &out)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func writeString(_ value: String, into out: inout [UInt8]) { JSONEscaping.appendQuoted(value, to: &out) }
}

/// Builds an ordered JSON object, skipping absent values.
package struct JSONObjectBuilder {
    package private(set) var members: [(String, JSONText)] = []

    package init() {}

    package mutating func set(_ key: String, _ value: String?) { if let value { members.append((key, .string(value))) } }
    package mutating func set(_ key: String, _ value: Int64?) { if let value { members.append((key, .int(value))) } }
    package mutating func set(_ key: String, _ value: Int?) { if let value { members.append((key, .int(Int64(value)))) } }
    package mutating func set(_ key: String, _ value: Bool?) { if let value { members.append((key, .bool(value))) } }
    package mutating func set(_ key: String, _ value: [String]?) {
        if let value { members.append((key, .array(value.map(JSONText.string)))) }
    }
    package mutating func set(_ key: String, json value: JSONText?) { if let value { members.append((key, value)) } }

    package var object: JSONText { .object(members) }
}
