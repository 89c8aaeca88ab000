import Foundation
import IdentityDirectory
import TodoModels
import WireCoding

/// The OData options of Graph's directory collections other than users (applications,
/// service principals, groups, identity resources; SPEC §2.14): `$top` and `$skiptoken`
/// paging, `$select` of top-level properties, `$count`, and a `$filter` of clauses joined by
/// `and`: `{property} eq '…'` (or `true`/`false`/a number), `startswith({property},'…')`, and
/// `{collection}/any(x:x eq '…')` over a list of strings. Strings compare case-insensitively,
/// as Graph's directory does. Anything else is refused rather than ignored.
struct GraphListQuery: Sendable {
    enum Clause: Sendable, Equatable {
        case equals(String, String)
        case startsWith(String, String)
        case anyEquals(String, String)
    }

    var top = 100
    var skip = 0
    var select: [String]?
    var clauses: [Clause] = []
    var count = false
    private var passThrough: [(String, String)] = []

    /// - Parameters:
    ///   - properties: the resource's top-level properties (`$select`).
    ///   - filterable: those a `$filter` may name.
    init(_ query: String?, type: String, properties: [String], filterable: [String]) throws {
        for (name, value) in FormEncoding.decode(query ?? "") {
            switch name.lowercased() {
            case "$top":
                top = try Self.pageSize(value)
                passThrough.append(("$top", value))
            case "$skiptoken":
                skip = try Self.offset(skipToken: value)
            case "$select":
                select = try value.split(separator: ",").map { raw in
                    let name = raw.trimmingCharacters(in: .whitespaces)
                    guard let known = properties.first(where: { $0.lowercased() == name.lowercased() }) else {
                        throw GraphError.badRequest(
                            "Could not find a property named '\(TextRules.printable(name))' on type 'microsoft.graph.\(type)'.")
                    }
                    return known
                }
                passThrough.append(("$select", value))
            case "$filter":
                guard value.count <= 1024 else { throw GraphError.badRequest("The $filter is longer than 1,024 characters.") }
                clauses = try Self.clauses(value, filterable: filterable)
                passThrough.append(("$filter", value))
            case "$count":
                guard ["true", "false"].contains(value.lowercased()) else { throw GraphError.badRequest("$count must be true or false.") }
                count = value.lowercased() == "true"
                passThrough.append(("$count", value))
            case let option where option.hasPrefix("$"):
                throw GraphError(
                    status: .badRequest, code: "Request_UnsupportedQuery",
                    message: "The query option '\(TextRules.printable(name))' is not supported by this service.")
            default:
                continue
            }
        }
    }

    /// `$top`: 1 to 999, as Graph's directory takes it.
    static func pageSize(_ value: String) throws -> Int {
        guard let number = Int(value), (1...999).contains(number) else {
            throw GraphError.badRequest("Invalid page size specified: '\(TextRules.printable(value))'. Must be between 1 and 999 inclusive.")
        }
        return number
    }

    /// The offset a `$skiptoken` of this service's next links carries.
    static func offset(skipToken value: String) throws -> Int {
        guard let data = Base64URL.decode(value), let text = String(data: data, encoding: .utf8), text.hasPrefix("skip:"),
            let offset = Int(text.dropFirst(5)), offset >= 0
        else { throw GraphError.badRequest("The $skiptoken is not one this service issued.") }
        return offset
    }

    private static func clauses(_ text: String, filterable: [String]) throws -> [Clause] {
        var tokens = try GraphFilterTokens(text)
        var clauses: [Clause] = []
        func property(_ name: String) throws -> String {
            guard let known = filterable.first(where: { $0.lowercased() == name.lowercased() }) else { throw tokens.unsupported }
            return known
        }
        repeat {
            guard clauses.count < 8 else { throw tokens.unsupported }
            let head = try tokens.word()
            if head.lowercased() == "startswith" {
                try tokens.expect("(")
                let name = try property(try tokens.word())
                try tokens.expect(",")
                let prefix = try tokens.string()
                try tokens.expect(")")
                clauses.append(.startsWith(name, prefix))
            } else if head.lowercased().hasSuffix("/any") {
                let name = try property(String(head.dropLast(4)))
                try tokens.expect("(")
                let variable = try tokens.word()
                try tokens.expect(":")
                guard try tokens.word() == variable else { throw tokens.unsupported }
                try tokens.keyword("eq")
                let value = try tokens.string()
                try tokens.expect(")")
                clauses.append(.anyEquals(name, value))
            } else {
                let name = try property(head)
                try tokens.keyword("eq")
                clauses.append(.equals(name, try tokens.literal()))
            }
        } while try tokens.optionalKeyword("and")
        guard tokens.isAtEnd else { throw GraphFilterTokens.invalid(text) }
        return clauses
    }

    /// Whether the rendered item (its top-level members) passes every clause.
    func matches(_ members: [(String, JSONText)]) -> Bool {
        func value(_ name: String) -> JSONText? { members.first { $0.0 == name }?.1 }
        func text(_ json: JSONText?) -> String? {
            switch json {
            case .string(let value)?: value.lowercased()
            case .bool(let value)?: String(value)
            case .int(let value)?: String(value)
            default: nil
            }
        }
        return clauses.allSatisfy { clause in
            switch clause {
            case .equals(let name, let expected): return text(value(name)) == expected.lowercased()
            case .startsWith(let name, let prefix): return text(value(name))?.hasPrefix(prefix.lowercased()) == true
            case .anyEquals(let name, let expected):
                guard case .array(let values)? = value(name) else { return false }
                return values.contains { text($0) == expected.lowercased() }
            }
        }
    }

    /// The item with only the selected members (and `id`, which Graph always returns).
    func selected(_ members: [(String, JSONText)]) -> JSONText {
        guard let select else { return .object(members) }
        return .object(members.filter { $0.0 == "id" || $0.0.hasPrefix("@odata") || select.contains($0.0) })
    }

    /// The collection's answer: filtered, paged, selected, with `@odata.nextLink` when more follow.
    func page(_ items: [[(String, JSONText)]], context: String, origin: String, path: String) -> JSONText {
        let matching = items.filter(matches)
        let page = matching.dropFirst(skip).prefix(top)
        var body: [(String, JSONText)] = [("@odata.context", .string(context))]
        if count { body.append(("@odata.count", .int(Int64(matching.count)))) }
        body.append(("value", .array(page.map(selected))))
        if skip + page.count < matching.count {
            var pairs = passThrough
            pairs.append(("$skiptoken", Base64URL.encode(Data("skip:\(skip + page.count)".utf8))))
            body.append(
                ("@odata.nextLink", .string("\(origin)\(path)?" + pairs.map { "\($0.0)=\(GraphQuery.escape($0.1))" }.joined(separator: "&"))))
        }
        return .object(body)
    }
}
