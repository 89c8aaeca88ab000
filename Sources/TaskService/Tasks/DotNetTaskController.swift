import Foundation
import Hummingbird
import TodoModels
import WireCoding

/// `/taskservice/api/tasks`: the wire format of the .NET TaskService the NXOAuth2 tutorial
/// calls (SPEC §2.8, https://github.com/Azure-Samples/active-directory-b2c-dotnet-webapp-and-webapi/blob/master/TaskService/Controllers/TasksController.cs). `GET` answers a bare JSON array of
/// Web API 2's PascalCase task model; `POST` takes the form body NXOAuth2 sends (`Text=…`) or
/// the same fields as JSON, as Web API's model binding does; `DELETE {id}` removes one task.
/// Our own `/api/tasks` keeps its paged format, so this shape lives under its own base: the
/// NXOAuth2 plist's `taskAPI` points here. Owner rules are those of §3.
struct DotNetTaskController<Repository: TaskRepository>: Sendable {
    let repository: Repository

    /// Web API 2's serialisation of the sample's `Task` model (Json.NET keeps property names).
    /// `Id` is an int in the sample; ours are UUIDs, and the NXOAuth2 client reads only `Text`.
    struct DotNetTask: Encodable {
        var id: String
        var owner: String
        var text: String
        var completed: Bool
        var dateModified: Date

        enum CodingKeys: String, CodingKey {
            case id = "Id"
            case owner = "Owner"
            case text = "Text"
            case completed = "Completed"
            case dateModified = "DateModified"
        }
    }

    struct Draft: Decodable {
        var text: String
        enum CodingKeys: String, CodingKey { case text = "Text" }
    }

    var endpoints: RouteCollection<TaskRequestContext> {
        RouteCollection(context: TaskRequestContext.self)
            .get(use: list)
            .post(use: create)
            .delete(":id", use: delete)
    }

    func list(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let records = try await repository.unpagedList(owner: user.ownerID)
        return try JSONResponse.make(records.map { Self.task($0, owner: user.objectID) }, status: .ok)
    }

    func create(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let text = try await Self.text(of: request, context: context)
        let title = try TaskLimits.title(text, field: "Text")
        let record = try await repository.create(owner: user.ownerID, ownerName: user.name, title: title, completed: false, now: Date())
        var response = try JSONResponse.make(Self.task(record, owner: user.objectID), status: .created)
        response.headers[.location] = "/taskservice/api/tasks/\(record.item.id.uuidString.lowercased())"
        return response
    }

    func delete(_ request: Request, context: TaskRequestContext) async throws -> Response {
        let user = try context.requireUser()
        guard let text = context.parameters.get("id"), let id = UUIDText.parse(text) else { throw TaskAPIError.notFound }
        switch try await repository.delete(owner: user.ownerID, id: id, ifVersion: nil) {
        case .updated: return Response(status: .noContent)
        case .notFound, .versionMismatch: throw TaskAPIError.notFound
        }
    }

    /// `Owner` is the token's object id, as the sample stores it (not our issuer-scoped key).
    private static func task(_ record: TaskRecord, owner: String) -> DotNetTask {
        DotNetTask(
            id: record.item.id.uuidString.lowercased(), owner: owner, text: record.item.title,
            completed: record.item.completed, dateModified: record.item.updatedAt)
    }

    /// `Text` from a form body (what NXOAuth2 posts) or a JSON one.
    private static func text(of request: Request, context: TaskRequestContext) async throws -> String {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else {
            return try await JSONBody.decode(Draft.self, from: request, context: context).text
        }
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: context.maxUploadSize)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw TaskAPIError.payloadTooLarge
        }
        guard let body = String(validating: buffer.readableBytesView, as: UTF8.self) else {
            throw TaskAPIError.invalidField("The form body is not UTF-8.")
        }
        // Form field names are case-insensitive to Web API's model binder.
        guard let text = FormEncoding.decode(body).first(where: { $0.0.lowercased() == "text" })?.1 else {
            throw TaskAPIError.invalidField("Text is required.")
        }
        return text
    }
}
