import Foundation
import HTTPTypes
import Hummingbird
import TodoModels
import WireCoding

/// `/api/tasks`: the resource of SPEC §3, every route scoped to the token's owner.
struct TaskController<Repository: TaskRepository>: Sendable {
    let repository: Repository

    var endpoints: RouteCollection<TaskRequestContext> {
        RouteCollection(context: TaskRequestContext.self)
            .get(use: list)
            .post(use: create)
            .get(":id", use: get)
            .patch(":id", use: update)
            .delete(":id", use: delete)
    }

    func list(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let query = request.uri.queryParameters
        var completed: Bool?
        if let value = query["completed"].map(String.init) {
            guard let parsed = Bool(value.lowercased()) else { throw TaskAPIError.invalidQuery("completed must be true or false.") }
            completed = parsed
        }
        var limit = TaskLimits.pageSizeDefault
        if let value = query["limit"].map(String.init) {
            guard let parsed = Int(value), (1...TaskLimits.pageSizeMaximum).contains(parsed) else {
                throw TaskAPIError.invalidQuery("limit must be between 1 and \(TaskLimits.pageSizeMaximum).")
            }
            limit = parsed
        }
        var cursor: TaskCursor?
        if let value = query["cursor"].map(String.init) {
            guard let parsed = TaskCursor(token: value) else { throw TaskAPIError.invalidQuery("cursor is not one this API issued.") }
            cursor = parsed
        }
        let (body, next) = try await repository.encodedList(owner: user.ownerID, completed: completed, limit: limit, after: cursor) {
            records, next in TaskJSON.page(TaskPage(items: records.map(\.item), nextCursor: next?.token))
        }
        var response = JSONResponse.make(bytes: body, status: .ok)
        if let next {
            var parameters = ["limit=\(limit)", "cursor=\(next.token)"]
            if let completed { parameters.append("completed=\(completed)") }
            response.headers[HTTPField.Name("Link")!] = "</api/tasks?\(parameters.joined(separator: "&"))>; rel=\"next\""
        }
        return response
    }

    func create(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let draft = try await JSONBody.decode(NewTask.self, from: request, context: context)
        let title = try TaskLimits.title(draft.title, field: "title")
        let record = try await repository.create(
            owner: user.ownerID, ownerName: user.name, title: title, completed: draft.completed ?? false, now: Date())
        var response = JSONResponse.make(bytes: TaskJSON.item(record.item), status: .created)
        response.headers[.location] = "/api/tasks/\(record.item.id.uuidString.lowercased())"
        response.headers[.eTag] = record.etag
        return response
    }

    func get(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        guard let record = try await repository.get(owner: user.ownerID, id: try Self.id(context)) else { throw TaskAPIError.notFound }
        if let match = request.headers[.ifNoneMatch], match == record.etag || match == "*" {
            return Response(status: .notModified, headers: [.eTag: record.etag])
        }
        var response = JSONResponse.make(bytes: TaskJSON.item(record.item), status: .ok)
        response.headers[.eTag] = record.etag
        return response
    }

    func update(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let id = try Self.id(context)
        var patch = try await JSONBody.decode(TaskPatch.self, from: request, context: context)
        guard patch.title != nil || patch.completed != nil else { throw TaskAPIError.invalidField("Give a title or completed to change.") }
        if let title = patch.title {
            let normalized = try TaskLimits.title(title, field: "title")
            patch.title = normalized
        }
        switch try await repository.update(
            owner: user.ownerID, id: id, patch: patch, ifVersion: try Self.expectedVersion(request), now: Date())
        {
        case .notFound: throw TaskAPIError.notFound
        case .versionMismatch: throw TaskAPIError.versionMismatch
        case .updated(let record):
            var response = JSONResponse.make(bytes: TaskJSON.item(record.item), status: .ok)
            response.headers[.eTag] = record.etag
            return response
        }
    }

    func delete(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        switch try await repository.delete(owner: user.ownerID, id: try Self.id(context), ifVersion: try Self.expectedVersion(request)) {
        case .notFound: throw TaskAPIError.notFound
        case .versionMismatch: throw TaskAPIError.versionMismatch
        case .updated: return Response(status: .noContent)
        }
    }

    /// A malformed id is simply not found: nothing about other ids is revealed.
    static func id(_ context: TaskRequestContext) throws -> UUID {
        guard let text = context.parameters.get("id"), let id = UUIDText.parse(text) else { throw TaskAPIError.notFound }
        return id
    }

    /// `If-Match: "3"` → 3; `*` or absent → no condition; anything else cannot match (412).
    static func expectedVersion(_ request: Request) throws -> Int64? {
        guard let value = request.headers[.ifMatch]?.trimmingCharacters(in: .whitespaces), value != "*" else { return nil }
        // RFC 9110 §13.1.1: If-Match uses the strong comparison, so a weak tag never matches.
        let unquoted = value
        guard !unquoted.hasPrefix("W/"), unquoted.count >= 3, unquoted.first == "\"", unquoted.last == "\"",
            let version = Int64(unquoted.dropFirst().dropLast())
        else {
            throw TaskAPIError.versionMismatch
        }
        return version
    }
}

/// The tutorials' wire format on `/tasks` (https://github.com/AzureADQuickStarts/B2C-NativeClient-iOS/blob/complete/Microsoft%20Tasks/samplesWebAPIConnector.m): a JSON array of
/// `{"task": …}` objects, `POST {"task": …}`, and `DELETE` with a JSON body naming the task.
struct TutorialTaskController<Repository: TaskRepository>: Sendable {
    let repository: Repository

    struct TutorialTask: Codable {
        var task: String
        var completed: Bool?
        var id: String?
        var date: Date?
    }

    var endpoints: RouteCollection<TaskRequestContext> {
        RouteCollection(context: TaskRequestContext.self)
            .get(use: list)
            .post(use: create)
            .delete(use: delete)
    }

    func list(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let tasks = try await repository.unpagedList(owner: user.ownerID).map {
            TutorialTask(task: $0.item.title, completed: $0.item.completed, id: $0.item.id.uuidString.lowercased(), date: $0.item.createdAt)
        }
        return try JSONResponse.make(tasks, status: .ok)
    }

    func create(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let body = try await JSONBody.decode(TutorialTask.self, from: request, context: context)
        let title = try TaskLimits.title(body.task, field: "\"task\"")
        let record = try await repository.create(owner: user.ownerID, ownerName: user.name, title: title, completed: false, now: Date())
        var response = try JSONResponse.make(
            TutorialTask(
                task: record.item.title, completed: false, id: record.item.id.uuidString.lowercased(), date: record.item.createdAt),
            status: .created)
        response.headers[.location] = "/api/tasks/\(record.item.id.uuidString.lowercased())"
        return response
    }

    func delete(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let body = try await JSONBody.decode(TutorialTask.self, from: request, context: context)
        // Matched as `create` stored it: the same rules, so text no task can have (a NUL, a
        // control character) is refused as bad input instead of reaching the database.
        let title = try TaskLimits.title(body.task, field: "\"task\"")
        _ = try await repository.delete(owner: user.ownerID, title: title)
        return Response(status: .noContent)
    }
}

extension TaskRepository {
    /// The owner's tasks newest first in one list, for the tutorials' unpaged formats: at most
    /// about 1,000 (whole pages), so one response stays bounded.
    func unpagedList(owner: String) async throws -> [TaskRecord] {
        var records: [TaskRecord] = []
        var cursor: TaskCursor?
        repeat {
            let page = try await list(owner: owner, completed: nil, limit: TaskLimits.pageSizeMaximum, after: cursor)
            records += page.records
            cursor = page.next
        } while cursor != nil && records.count < 1000
        return records
    }
}

/// JSON in and out, with the API's limits and errors (one place for the wire format).
enum JSONBody {
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, context: TaskRequestContext) async throws -> T {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/json") || (contentType.hasPrefix("application/") && contentType.contains("+json")) else {
            throw TaskAPIError.unsupportedMediaType
        }
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: context.maxUploadSize)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw TaskAPIError.payloadTooLarge
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(T.self, from: Data(buffer: buffer))
        } catch DecodingError.keyNotFound(let key, _) {
            throw TaskAPIError.invalidField("\(key.stringValue) is required.")
        } catch DecodingError.valueNotFound(_, let context) {
            throw TaskAPIError.invalidField("\(context.codingPath.map(\.stringValue).joined(separator: ".")) must not be null.")
        } catch DecodingError.typeMismatch(_, let context) {
            throw TaskAPIError.invalidField("\(context.codingPath.map(\.stringValue).joined(separator: ".")) has the wrong type.")
        } catch {
            throw TaskAPIError.malformedJSON("The body is not valid JSON.")
        }
    }
}

enum JSONResponse {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func make(bytes: [UInt8], status: HTTPResponse.Status) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func make(_ value: some Encodable, status: HTTPResponse.Status) throws -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}

extension TaskLimits {
    /// `text` as a stored title, or the Task API's 422 naming `field`: one rule for every route
    /// and wire format that takes a title.
    static func title(_ text: String, field: String) throws -> String {
        guard let title = normalizedTitle(text) else {
            throw TaskAPIError.invalidField(
                "\(field) must be 1 to \(titleMaximumLength) characters after trimming, without control or format characters.")
        }
        return title
    }
}
