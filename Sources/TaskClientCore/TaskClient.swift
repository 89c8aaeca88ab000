import Foundation
import IdentityClientCore
import TodoModels

/// What the Task API refused, in typed form.
public enum TaskClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 404: no such task for this user (another user's task looks the same).
    case notFound
    /// 412: the task changed since it was read (`If-Match`).
    case versionMismatch
    /// 401 even after a fresh token: sign in again.
    case unauthorized(String)
    /// 403 `insufficient_scope`.
    case forbidden(String)
    /// 422 and 400: the request's fields, with the API's explanation.
    case invalid(ProblemDetails)
    /// Any other problem document.
    case problem(ProblemDetails)
    /// No HTTP answer, or one that is not the API's.
    case network(String)

    public var description: String {
        switch self {
        case .notFound: "no such task"
        case .versionMismatch: "the task was changed elsewhere; reload and try again"
        case .unauthorized(let reason): "not signed in: \(reason)"
        case .forbidden(let reason): "not allowed: \(reason)"
        case .invalid(let problem), .problem(let problem): problem.detail ?? problem.title
        case .network(let message): "cannot reach the Task API: \(message)"
        }
    }
}

/// A task with the version the API reported (its `ETag`), for conditional updates.
public struct VersionedTask: Sendable, Equatable {
    public var task: TaskItem
    /// The strong `ETag`, quoted, e.g. `"3"`.
    public var etag: String?
}

/// Typed calls for every `/api/tasks` route (SPEC §3). Each call asks `accessToken` for a bearer
/// token; on a 401 `invalid_token` it asks once more with `forceRefresh: true` and retries.
///
/// ```swift
/// let tasks = TaskClient(baseURL: URL(string: "http://127.0.0.1:3000")!) { force in
///     try await app.acquireTokenSilently(scopes: scopes, account: account, forceRefresh: force).accessToken
/// }
/// let created = try await tasks.create(title: "Buy milk")
/// ```
public struct TaskClient: Sendable {
    public let baseURL: URL
    let transport: any HTTPTransport
    let accessToken: @Sendable (_ forceRefresh: Bool) async throws -> String

    /// - Parameters:
    ///   - baseURL: the API's origin (`/api/tasks` is appended).
    ///   - transport: how to send requests (`import TaskClient` adds an initialiser that uses
    ///     `URLSessionTransport`).
    ///   - accessToken: returns a bearer token; `forceRefresh` asks for a new one.
    public init(
        baseURL: URL, transport: any HTTPTransport,
        accessToken: @escaping @Sendable (_ forceRefresh: Bool) async throws -> String
    ) {
        self.baseURL = baseURL
        self.transport = transport
        self.accessToken = accessToken
    }

    /// One page, newest first.
    ///
    /// - Parameters:
    ///   - completed: only done (`true`) or open (`false`) tasks; all when nil.
    ///   - limit: 1–100 (the API's default is 50).
    ///   - cursor: the previous page's `nextCursor`.
    public func list(completed: Bool? = nil, limit: Int? = nil, cursor: String? = nil) async throws -> TaskPage {
        var query: [URLQueryItem] = []
        if let completed { query.append(URLQueryItem(name: "completed", value: completed ? "true" : "false")) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
        let response = try await send("GET", path: "", query: query)
        return try decode(TaskPage.self, response)
    }

    /// Every task, following cursors.
    public func all(completed: Bool? = nil) async throws -> [TaskItem] {
        var items: [TaskItem] = []
        var cursor: String? = nil
        var seen: Set<String> = []
        repeat {
            let page = try await list(completed: completed, limit: TaskLimits.pageSizeMaximum, cursor: cursor)
            items += page.items
            cursor = page.nextCursor
            // A server that hands back a cursor twice would otherwise keep this loop going forever.
            if let next = cursor, !seen.insert(next).inserted { throw TaskClientError.network("the Task API repeated a page cursor") }
        } while cursor != nil
        return items
    }

    /// Creates a task. Throws ``TaskClientError/invalid(_:)`` for an empty or over-long title.
    public func create(title: String, completed: Bool = false) async throws -> VersionedTask {
        let body = try JSONEncoder().encode(NewTask(title: title, completed: completed ? true : nil))
        let response = try await send("POST", path: "", body: body)
        return VersionedTask(task: try decode(TaskItem.self, response), etag: response.headers["etag"])
    }

    /// One task.
    public func get(_ id: UUID) async throws -> VersionedTask {
        let response = try await send("GET", path: "/\(id.uuidString.lowercased())")
        return VersionedTask(task: try decode(TaskItem.self, response), etag: response.headers["etag"])
    }

    /// Changes the fields the patch names. With `ifMatch` (an ETag) it fails with
    /// ``TaskClientError/versionMismatch`` when the task changed meanwhile.
    public func update(_ id: UUID, _ patch: TaskPatch, ifMatch etag: String? = nil) async throws -> VersionedTask {
        let response = try await send(
            "PATCH", path: "/\(id.uuidString.lowercased())", body: try JSONEncoder().encode(patch),
            headers: etag.map { ["If-Match": $0] } ?? [:])
        return VersionedTask(task: try decode(TaskItem.self, response), etag: response.headers["etag"])
    }

    /// Deletes a task.
    public func delete(_ id: UUID, ifMatch etag: String? = nil) async throws {
        _ = try await send("DELETE", path: "/\(id.uuidString.lowercased())", headers: etag.map { ["If-Match": $0] } ?? [:])
    }

    // MARK: Wire

    private func send(
        _ method: String, path: String, query: [URLQueryItem] = [], body: Data? = nil, headers: [String: String] = [:]
    ) async throws -> TransportResponse {
        var components = URLComponents(url: baseURL.appendingPathComponent("api/tasks"), resolvingAgainstBaseURL: false)
        components?.path += path
        if !query.isEmpty { components?.queryItems = query }
        guard let url = components?.url else { throw TaskClientError.network("bad API URL \(baseURL)") }
        var response = try await attempt(method, url, body, headers, forceRefresh: false)
        // One retry with a new token: the cached one may have been revoked or its key rotated
        // (RFC 6750 §3.1: invalid_token means "get a new token").
        if response.status == 401, response.headers["www-authenticate"]?.contains("invalid_token") == true {
            response = try await attempt(method, url, body, headers, forceRefresh: true)
        }
        guard (200..<300).contains(response.status) else { throw Self.error(from: response) }
        return response
    }

    private func attempt(_ method: String, _ url: URL, _ body: Data?, _ headers: [String: String], forceRefresh: Bool) async throws
        -> TransportResponse
    {
        var allHeaders = headers
        allHeaders["Authorization"] = "Bearer \(try await accessToken(forceRefresh))"
        allHeaders["Accept"] = "application/json"
        if body != nil { allHeaders["Content-Type"] = "application/json" }
        do {
            return try await transport.send(TransportRequest(method: method, url: url, headers: allHeaders, body: body))
        } catch let error as IdentityError {
            if case .network(let message) = error { throw TaskClientError.network(message) }
            throw error
        } catch {
            throw TaskClientError.network("\(error)")
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ response: TransportResponse) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(type, from: response.body)
        } catch {
            throw TaskClientError.network("the Task API's answer is not what its OpenAPI document says")
        }
    }

    static func error(from response: TransportResponse) -> TaskClientError {
        let problem = try? JSONDecoder().decode(ProblemDetails.self, from: response.body)
        switch response.status {
        case 404: return .notFound
        case 412: return .versionMismatch
        case 401: return .unauthorized(Self.challengeDescription(response) ?? problem?.detail ?? "the token was refused")
        case 403: return .forbidden(Self.challengeDescription(response) ?? problem?.detail ?? "insufficient scope")
        case 400, 413, 415, 422:
            return .invalid(problem ?? ProblemDetails(type: "about:blank", title: "Invalid request", status: response.status))
        default:
            if let problem { return .problem(problem) }
            return .network("HTTP \(response.status)")
        }
    }

    /// `error_description` from `WWW-Authenticate: Bearer error="…", error_description="…"`.
    static func challengeDescription(_ response: TransportResponse) -> String? {
        guard let header = response.headers["www-authenticate"],
            let range = header.range(of: #"error_description="[^"]*""#, options: .regularExpression)
        else { return nil }
        return String(header[range].dropFirst("error_description=\"".count).dropLast())
    }
}
