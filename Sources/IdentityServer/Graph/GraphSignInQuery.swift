import Foundation
import IdentityDirectory
import TodoModels
import WireCoding

/// The query options of Graph's audit-log lists (`auditLogs/signIns`, `auditLogs/directoryAudits`):
/// `$top` (1–1000, Graph's limit), `$skiptoken` (from `@odata.nextLink`) and `$filter`, whose
/// clauses ``Filter`` applies to the log's query. Any other `$` option is refused, so a script
/// never mistakes an unfiltered answer for a filtered one.
struct AuditLogOptions<Query: Sendable> {
    /// Applies one clause (its property and operator lower-cased, the value still in the
    /// tokens) to the query, or throws Graph's error for one it does not support.
    typealias Filter = (_ property: String, _ operation: String, _ tokens: inout GraphFilterTokens, _ query: inout Query) throws -> Void

    var query: Query
    var top = 100
    var cursor: ActivityCursor?
    /// The log's segment (`signIns`) and what the skip token is marked with.
    let segment: String
    private var filterText: String?

    /// Longer filters, or more clauses, are refused before any work.
    static var maximumFilterLength: Int { 2_048 }
    static var maximumClauses: Int { 12 }

    init(_ text: String?, segment: String, query: Query, filter: Filter) throws {
        self.query = query
        self.segment = segment
        for (name, value) in FormEncoding.decode(text ?? "") {
            switch name.lowercased() {
            case "$top":
                guard let number = Int(value), (1...1000).contains(number) else {
                    throw GraphError.badRequest(
                        "Invalid page size specified: '\(TextRules.printable(value))'. Must be between 1 and 1000 inclusive.")
                }
                top = number
            case "$skiptoken":
                guard let data = Base64URL.decode(value), let token = String(data: data, encoding: .utf8) else { throw Self.foreignToken }
                let parts = token.split(separator: ":", maxSplits: 2).map(String.init)
                guard parts.count == 3, parts[0] == segment, let time = Int64(parts[1]), UUID(uuidString: parts[2]) != nil else {
                    throw Self.foreignToken
                }
                cursor = ActivityCursor(createdAt: time, id: parts[2])
            case "$filter":
                filterText = value
                try apply(filter: value, filter)
            case let option where option.hasPrefix("$"):
                throw GraphError(
                    status: .badRequest, code: "Request_UnsupportedQuery",
                    message: "The query option '\(TextRules.printable(name))' is not supported on auditLogs/\(segment).")
            default: continue
            }
        }
    }

    static var foreignToken: GraphError { GraphError.badRequest("The $skiptoken is not one this service issued.") }

    /// The next page's URL: the same options, after the row at `time` with `id`.
    func nextLink(origin: String, afterTime time: Date, id: String) -> String {
        var pairs = [("$top", String(top))]
        if let filterText { pairs.append(("$filter", filterText)) }
        pairs.append(("$skiptoken", Base64URL.encode(Data("\(segment):\(time.epochMilliseconds):\(id)".utf8))))
        return "\(origin)/v1.0/auditLogs/\(segment)?" + pairs.map { "\($0.0)=\(GraphQuery.escape($0.1))" }.joined(separator: "&")
    }

    /// `clause and clause …`, each one `filter` applies; at most one equality per property.
    private mutating func apply(filter text: String, _ filter: Filter) throws {
        guard text.count <= Self.maximumFilterLength else { throw GraphError.badRequest("The $filter is too long.") }
        var tokens = try GraphFilterTokens(text)
        var clauses = 0
        var named: Set<String> = []
        repeat {
            clauses += 1
            guard clauses <= Self.maximumClauses else { throw GraphError.badRequest("The $filter has too many clauses.") }
            let property = try tokens.word().lowercased()
            // `targetResources/any(t:t/id eq '…')`: the lambda is one clause on the target's id.
            if property == "targetresources/any" {
                try tokens.expect("(")
                let variable = try tokens.word()
                try tokens.expect(":")
                guard try tokens.word().lowercased() == variable.lowercased() + "/id", try tokens.word().lowercased() == "eq" else {
                    throw tokens.unsupported
                }
                guard named.insert(property).inserted else { throw Self.twice(property) }
                try filter(property, "eq", &tokens, &query)
                try tokens.expect(")")
                continue
            }
            let operation = try tokens.word().lowercased()
            // One equality per property: a second would silently replace the first.
            if operation == "eq" { guard named.insert(property).inserted else { throw Self.twice(property) } }
            try filter(property, operation, &tokens, &query)
        } while try tokens.optionalKeyword("and")
        guard tokens.isAtEnd else { throw GraphFilterTokens.invalid(text) }
    }

    private static func twice(_ property: String) -> GraphError {
        GraphError.badRequest("The $filter names '\(TextRules.printable(property))' twice.")
    }
}

/// A time bound on a log: `ge|gt|le|lt <date-time>` narrows `after`/`before` (milliseconds,
/// exclusive), keeping the narrower of two bounds.
enum AuditTimeBound {
    static func apply(_ operation: String, _ tokens: inout GraphFilterTokens, after: inout Int64?, before: inout Int64?) throws {
        guard let date = GraphTime.parse(try tokens.word()) else { throw GraphFilterTokens.invalid(tokens.text) }
        let ms = date.epochMilliseconds
        switch operation {
        case "ge": after = max(after ?? .min, ms - 1)
        case "gt": after = max(after ?? .min, ms)
        case "le": before = min(before ?? .max, ms + 1)
        case "lt": before = min(before ?? .max, ms)
        default: throw tokens.unsupported
        }
    }
}

extension AuditLogOptions where Query == SignInQuery {
    /// `GET auditLogs/signIns`: `createdDateTime ge|gt|le|lt <time>`, `status/errorCode eq <n>`,
    /// `appId|userId|userPrincipalName|correlationId eq '<text>'`.
    init(signIns text: String?) throws {
        try self.init(text, segment: "signIns", query: SignInQuery()) { property, operation, tokens, query in
            switch (property, operation) {
            case ("createddatetime", "ge"), ("createddatetime", "gt"), ("createddatetime", "le"), ("createddatetime", "lt"):
                try AuditTimeBound.apply(operation, &tokens, after: &query.after, before: &query.before)
            case ("status/errorcode", "eq"):
                guard let code = Int(try tokens.literal()), code >= 0 else { throw GraphFilterTokens.invalid(tokens.text) }
                query.errorCode = code
            case ("appid", "eq"): query.appID = try tokens.string()
            case ("userid", "eq"): query.userID = try tokens.string()
            case ("userprincipalname", "eq"): query.userPrincipalName = try tokens.string()
            case ("correlationid", "eq"): query.correlationID = try tokens.string()
            default: throw tokens.unsupported
            }
        }
        query.limit = top
        query.cursor = cursor
    }
}

extension AuditLogOptions where Query == DirectoryAuditQuery {
    /// `GET auditLogs/directoryAudits`: `activityDateTime ge|gt|le|lt <time>`, `result eq
    /// 'success'|'failure'`, `category|activityDisplayName|loggedByService|correlationId eq
    /// '<text>'`, `initiatedBy/app/appId|initiatedBy/user/id eq '<id>'` and
    /// `targetResources/any(t:t/id eq '<id>')`.
    init(directoryAudits text: String?) throws {
        try self.init(text, segment: "directoryAudits", query: DirectoryAuditQuery()) { property, operation, tokens, query in
            switch (property, operation) {
            case ("activitydatetime", "ge"), ("activitydatetime", "gt"), ("activitydatetime", "le"), ("activitydatetime", "lt"):
                try AuditTimeBound.apply(operation, &tokens, after: &query.after, before: &query.before)
            case ("result", "eq"):
                switch try tokens.string().lowercased() {
                case "success": query.succeeded = true
                case "failure": query.succeeded = false
                default: throw GraphFilterTokens.invalid(tokens.text)
                }
            case ("category", "eq"): query.category = try tokens.string()
            case ("activitydisplayname", "eq"): query.activityDisplayName = try tokens.string()
            case ("loggedbyservice", "eq"): query.loggedByService = try tokens.string()
            case ("correlationid", "eq"): query.correlationID = try tokens.string()
            case ("initiatedby/app/appid", "eq"): query.initiatorAppID = try tokens.string()
            case ("initiatedby/user/id", "eq"): query.initiatorUserID = try tokens.string()
            case ("targetresources/any", "eq"): query.targetID = try tokens.string()
            default: throw tokens.unsupported
            }
        }
        query.limit = top
        query.cursor = cursor
    }
}
