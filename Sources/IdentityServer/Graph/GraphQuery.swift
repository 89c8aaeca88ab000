import Foundation
import IdentityDirectory
import TodoModels
import WireCoding

/// The OData query options of `GET /v1.0/users` that B2C's samples and Graph SDKs send
/// (SPEC §2.10): `$top`, `$skiptoken` (from `@odata.nextLink`), `$select`, `$filter`, `$count`,
/// and `$orderby` on `displayName` or `userPrincipalName` (what Graph sorts users by without
/// advanced queries).
/// Anything else starting with `$` is refused rather than ignored, so a script never mistakes
/// an unfiltered answer for a filtered one.
struct GraphQuery: Sendable {
    var top = 100
    var skip = 0
    var select: [String]?
    var filter: GraphFilter?
    var count = false
    /// The property to sort by and whether descending; nil keeps the directory's order.
    var orderBy: (property: String, descending: Bool)?
    private var orderText: String?
    private var selectText: String?
    private var filterText: String?

    /// - Parameter tenant: whose extension properties (`extension_{appId}_{name}`) may be
    ///   selected and filtered on.
    init(_ query: String?, tenant: Tenant) throws {
        let extensions = GraphUserJSON.extensionProperties(of: tenant).map(\.graphName)
        for (name, value) in FormEncoding.decode(query ?? "") {
            switch name.lowercased() {
            case "$top":
                top = try GraphListQuery.pageSize(value)
            case "$skiptoken":
                skip = try GraphListQuery.offset(skipToken: value)
            case "$select":
                selectText = value
                select = try value.split(separator: ",").map { raw in
                    let name = raw.trimmingCharacters(in: .whitespaces)
                    guard let known = (GraphUserJSON.selectable.union(extensions)).first(where: { $0.lowercased() == name.lowercased() })
                    else {
                        throw GraphError.badRequest(
                            "Could not find a property named '\(TextRules.printable(name))' on type 'microsoft.graph.user'.")
                    }
                    return known
                }
            case "$filter":
                filterText = value
                filter = try GraphFilter(value, extensionProperties: extensions)
            case "$orderby":
                let parts = value.split(separator: " ").map { $0.lowercased() }
                guard (1...2).contains(parts.count),
                    let property = ["displayName", "userPrincipalName"].first(where: { $0.lowercased() == parts[0] }),
                    parts.count == 1 || ["asc", "desc"].contains(parts[1])
                else {
                    throw GraphError(
                        status: .badRequest, code: "Request_UnsupportedQuery",
                        message: "$orderby supports displayName and userPrincipalName, asc or desc.")
                }
                orderText = value
                orderBy = (property, parts.count == 2 && parts[1] == "desc")
            case "$count":
                guard ["true", "false"].contains(value.lowercased()) else { throw GraphError.badRequest("$count must be true or false.") }
                count = value.lowercased() == "true"
            case let option where option.hasPrefix("$"):
                throw GraphError(
                    status: .badRequest, code: "Request_UnsupportedQuery",
                    message: "The query option '\(TextRules.printable(name))' is not supported by this service.")
            default:
                continue
            }
        }
    }

    /// The next page's URL: the same options, the next offset.
    func nextLink(origin: String, skip next: Int) -> String {
        var pairs = [("$top", String(top))]
        if let selectText { pairs.append(("$select", selectText)) }
        if let filterText { pairs.append(("$filter", filterText)) }
        if count { pairs.append(("$count", "true")) }
        if let orderText { pairs.append(("$orderby", orderText)) }
        pairs.append(("$skiptoken", Base64URL.encode(Data("skip:\(next)".utf8))))
        return "\(origin)/v1.0/users?" + pairs.map { "\($0.0)=\(Self.escape($0.1))" }.joined(separator: "&")
    }

    /// A query value as the next links write it.
    static func escape(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~,"))) ?? value
    }
}

/// The `$filter` expressions B2C tenants are searched with:
/// - `identities/any(c:c/issuerAssignedId eq '…' and c/issuer eq '…')` (either order, or one);
/// - `{property} eq '…'` for displayName, mail, userPrincipalName, id, givenName, surname,
///   creationType, and `accountEnabled eq true|false`;
/// - `startswith({property},'…')`;
/// - `extension_{appId}_{name} eq '…'` (or an unquoted number or boolean) for the tenant's own
///   attributes.
/// Strings compare case-insensitively, as Graph's directory does.
indirect enum GraphFilter: Sendable, Equatable {
    case identity(issuerAssignedID: String?, issuer: String?, signInType: String?)
    case equals(property: String, value: String)
    case startsWith(property: String, prefix: String)

    static let stringProperties = ["displayName", "mail", "userPrincipalName", "id", "givenName", "surname", "creationType"]

    init(_ text: String, extensionProperties: [String] = []) throws {
        var tokens = try GraphFilterTokens(text)
        self = try Self.expression(&tokens, extensionProperties: extensionProperties)
        guard tokens.isAtEnd else { throw GraphFilterTokens.invalid(text) }
    }

    private static func expression(_ tokens: inout GraphFilterTokens, extensionProperties: [String]) throws -> GraphFilter {
        let head = try tokens.word()
        if let property = extensionProperties.first(where: { $0.lowercased() == head.lowercased() }) {
            try tokens.keyword("eq")
            return .equals(property: property, value: try tokens.literal())
        }
        if head.lowercased() == "identities/any" {
            try tokens.expect("(")
            let variable = try tokens.word()
            try tokens.expect(":")
            var fields: [String: String] = [:]
            repeat {
                let path = try tokens.word()
                guard path.lowercased().hasPrefix(variable.lowercased() + "/") else { throw tokens.unsupported }
                let field = String(path.dropFirst(variable.count + 1)).lowercased()
                guard ["issuerassignedid", "issuer", "signintype"].contains(field), fields[field] == nil else { throw tokens.unsupported }
                try tokens.keyword("eq")
                fields[field] = try tokens.string()
            } while try tokens.optionalKeyword("and")
            try tokens.expect(")")
            return .identity(issuerAssignedID: fields["issuerassignedid"], issuer: fields["issuer"], signInType: fields["signintype"])
        }
        if head.lowercased() == "startswith" {
            try tokens.expect("(")
            let property = try canonicalProperty(try tokens.word(), tokens: tokens)
            try tokens.expect(",")
            let prefix = try tokens.string()
            try tokens.expect(")")
            return .startsWith(property: property, prefix: prefix)
        }
        if head.lowercased() == "accountenabled" {
            try tokens.keyword("eq")
            let value = try tokens.word().lowercased()
            guard ["true", "false"].contains(value) else { throw tokens.unsupported }
            return .equals(property: "accountEnabled", value: value)
        }
        let property = try canonicalProperty(head, tokens: tokens)
        try tokens.keyword("eq")
        return .equals(property: property, value: try tokens.string())
    }

    private static func canonicalProperty(_ name: String, tokens: GraphFilterTokens) throws -> String {
        guard let property = stringProperties.first(where: { $0.lowercased() == name.lowercased() }) else { throw tokens.unsupported }
        return property
    }

    func matches(_ user: UserAccount, tenant: Tenant) -> Bool {
        func same(_ a: String?, _ b: String?) -> Bool { b == nil || a?.lowercased() == b?.lowercased() }
        switch self {
        case .identity(let id, let issuer, let type):
            return GraphUserJSON.identities(user, tenant: tenant).contains { identity in
                guard case .object(let members) = identity else { return false }
                let values = Dictionary(members.map { ($0.0, $0.1) }, uniquingKeysWith: { first, _ in first })
                func text(_ key: String) -> String? { if case .string(let value) = values[key] { value } else { nil } }
                return same(text("issuerAssignedId"), id) && same(text("issuer"), issuer) && same(text("signInType"), type)
            }
        case .equals(let property, let value):
            if property == "accountEnabled" { return String(user.accountEnabled) == value }
            return Self.text(of: property, user: user, tenant: tenant)?.lowercased() == value.lowercased()
        case .startsWith(let property, let prefix):
            return Self.text(of: property, user: user, tenant: tenant)?.lowercased().hasPrefix(prefix.lowercased()) ?? false
        }
    }

    private static func text(of property: String, user: UserAccount, tenant: Tenant) -> String? {
        switch GraphUserJSON.user(user, tenant: tenant, select: [property]) {
        case .object(let members):
            switch members.first?.1 {
            case .string(let value): return value
            case .int(let value): return String(value)
            case .bool(let value): return String(value)
            default: break
            }
        default: break
        }
        return nil
    }
}

/// The words, strings and punctuation of a `$filter`.
struct GraphFilterTokens {
    enum Token: Equatable {
        case word(String)
        case string(String)
        case symbol(Character)
    }

    private var tokens: [Token]
    private var position = 0
    let text: String

    init(_ text: String) throws {
        self.text = text
        var tokens: [Token] = []
        var characters = Array(text)[...]
        while let first = characters.first {
            if first == " " {
                characters = characters.dropFirst()
            } else if "(),:".contains(first) {
                tokens.append(.symbol(first))
                characters = characters.dropFirst()
            } else if first == "'" {
                // OData doubles a quote inside a string.
                var value = ""
                characters = characters.dropFirst()
                var closed = false
                while let next = characters.first {
                    characters = characters.dropFirst()
                    if next == "'" {
                        if characters.first == "'" {
                            value.append("'")
                            characters = characters.dropFirst()
                        } else {
                            closed = true
                            break
                        }
                    } else {
                        value.append(next)
                    }
                }
                guard closed else { throw Self.invalid(text) }
                tokens.append(.string(value))
            } else if first.isNumber {
                // A number, or an OData date-time (`2026-11-26T07:00:00Z`), whose colons are its own.
                let word = characters.prefix { !" (),'".contains($0) }
                guard word.allSatisfy({ $0.isNumber || "-:.+TZ".contains($0) }) else { throw Self.invalid(text) }
                tokens.append(.word(String(word)))
                characters = characters.dropFirst(word.count)
            } else {
                let word = characters.prefix { !" (),:'".contains($0) }
                guard word.allSatisfy({ $0.isLetter || $0.isNumber || "/_.@-".contains($0) }) else { throw Self.invalid(text) }
                tokens.append(.word(String(word)))
                characters = characters.dropFirst(word.count)
            }
        }
        self.tokens = tokens
    }

    static func invalid(_ text: String) -> GraphError {
        GraphError(status: .badRequest, code: "BadRequest", message: "Invalid filter clause: '\(TextRules.printable(text))'.")
    }

    var unsupported: GraphError {
        GraphError(
            status: .badRequest, code: "Request_UnsupportedQuery",
            message: "Unsupported or invalid query filter clause specified: '\(TextRules.printable(text))'.")
    }

    var isAtEnd: Bool { position == tokens.count }

    private mutating func next() throws -> Token {
        guard position < tokens.count else { throw Self.invalid(text) }
        defer { position += 1 }
        return tokens[position]
    }

    mutating func word() throws -> String {
        guard case .word(let value) = try next() else { throw Self.invalid(text) }
        return value
    }

    /// A quoted string, or an unquoted number or boolean, as its text.
    mutating func literal() throws -> String {
        switch try next() {
        case .string(let value): return value
        case .word(let value) where Int32(value) != nil || ["true", "false"].contains(value.lowercased()): return value.lowercased()
        default: throw Self.invalid(text)
        }
    }

    mutating func string() throws -> String {
        guard case .string(let value) = try next() else { throw Self.invalid(text) }
        return value
    }

    mutating func expect(_ symbol: Character) throws {
        guard try next() == .symbol(symbol) else { throw Self.invalid(text) }
    }

    mutating func keyword(_ keyword: String) throws {
        guard try word().lowercased() == keyword else { throw unsupported }
    }

    mutating func optionalKeyword(_ keyword: String) throws -> Bool {
        guard position < tokens.count, case .word(let value) = tokens[position], value.lowercased() == keyword else { return false }
        position += 1
        return true
    }
}
