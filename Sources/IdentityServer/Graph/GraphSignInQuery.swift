import Foundation
import IdentityDirectory
import TodoModels
import WireCoding

/// The query options of `GET /v1.0/auditLogs/signIns`: `$top` (1–1000, Graph's limit for sign-ins),
/// `$skiptoken` (from `@odata.nextLink`) and `$filter`. Any other `$` option is refused, so a
/// script never mistakes an unfiltered answer for a filtered one.
struct SignInListOptions {
    var query = SignInQuery()
    private var filterText: String?

    /// Longer filters, or more clauses, are refused before any work.
    static let maximumFilterLength = 2_048
    static let maximumClauses = 12

    init(_ text: String?) throws {
        for (name, value) in FormEncoding.decode(text ?? "") {
            switch name.lowercased() {
            case "$top":
                guard let number = Int(value), (1...1000).contains(number) else {
                    throw GraphError.badRequest(
                        "Invalid page size specified: '\(TextRules.printable(value))'. Must be between 1 and 1000 inclusive.")
                }
                query.limit = number
            case "$skiptoken":
                guard let data = Base64URL.decode(value), let token = String(data: data, encoding: .utf8) else { throw Self.foreignToken }
                let parts = token.split(separator: ":", maxSplits: 2).map(String.init)
                guard parts.count == 3, parts[0] == "signin", let time = Int64(parts[1]), UUID(uuidString: parts[2]) != nil else {
                    throw Self.foreignToken
                }
                query.cursor = .init(createdAt: time, id: parts[2])
            case "$filter":
                filterText = value
                try apply(filter: value)
            case let option where option.hasPrefix("$"):
                throw GraphError(
                    status: .badRequest, code: "Request_UnsupportedQuery",
                    message: "The query option '\(TextRules.printable(name))' is not supported on auditLogs/signIns.")
            default: continue
            }
        }
    }

    static let foreignToken = GraphError.badRequest("The $skiptoken is not one this service issued.")

    /// The next page's URL: the same options, after `last`.
    func nextLink(origin: String, after last: SignInEvent) -> String {
        var pairs = [("$top", String(query.limit))]
        if let filterText { pairs.append(("$filter", filterText)) }
        pairs.append(("$skiptoken", Base64URL.encode(Data("signin:\(last.at.epochMilliseconds):\(last.id)".utf8))))
        return "\(origin)/v1.0/auditLogs/signIns?" + pairs.map { "\($0.0)=\(GraphQuery.escape($0.1))" }.joined(separator: "&")
    }

    /// `clause and clause …`, each `createdDateTime ge|gt|le|lt <time>`, `status/errorCode eq <n>`
    /// or `appId|userId|userPrincipalName|correlationId eq '<text>'`.
    private mutating func apply(filter text: String) throws {
        guard text.count <= Self.maximumFilterLength else { throw GraphError.badRequest("The $filter is too long.") }
        var tokens = try GraphFilterTokens(text)
        var clauses = 0
        var named: Set<String> = []
        repeat {
            clauses += 1
            guard clauses <= Self.maximumClauses else { throw GraphError.badRequest("The $filter has too many clauses.") }
            let property = try tokens.word().lowercased()
            let operation = try tokens.word().lowercased()
            // One equality per property: a second would silently replace the first.
            if operation == "eq" {
                guard named.insert(property).inserted else {
                    throw GraphError.badRequest("The $filter names '\(TextRules.printable(property))' twice.")
                }
            }
            switch (property, operation) {
            case ("createddatetime", "ge"), ("createddatetime", "gt"), ("createddatetime", "le"), ("createddatetime", "lt"):
                guard let date = GraphTime.parse(try tokens.word()) else { throw GraphFilterTokens.invalid(text) }
                let ms = date.epochMilliseconds
                switch operation {
                case "ge": query.after = max(query.after ?? .min, ms - 1)
                case "gt": query.after = max(query.after ?? .min, ms)
                case "le": query.before = min(query.before ?? .max, ms + 1)
                default: query.before = min(query.before ?? .max, ms)
                }
            case ("status/errorcode", "eq"):
                guard let code = Int(try tokens.literal()), code >= 0 else { throw GraphFilterTokens.invalid(text) }
                query.errorCode = code
            case ("appid", "eq"): query.appID = try tokens.string()
            case ("userid", "eq"): query.userID = try tokens.string()
            case ("userprincipalname", "eq"): query.userPrincipalName = try tokens.string()
            case ("correlationid", "eq"): query.correlationID = try tokens.string()
            default: throw tokens.unsupported
            }
        } while try tokens.optionalKeyword("and")
        guard tokens.isAtEnd else { throw GraphFilterTokens.invalid(text) }
    }
}
