import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Storage
import TestSupport
import Testing
import TodoModels
import WireCoding

@testable import TaskService

/// The Task API on a real database, trusting a mock authority served over real HTTP.
struct TaskHarness: Sendable {
    let authority: MockAuthority
    let server: TaskServer

    static func run(
        _ engine: DatabaseEngine, requiredScopes: [String] = [], corsOrigins: [String] = [], over testing: TestingSetup = .router,
        _ body: @Sendable (TaskHarness, any TestClientProtocol) async throws -> Void
    ) async throws {
        let authority = try MockAuthority()
        try await authority.serve { discovery in
            try await TestDatabase.with(engine) { database in
                let policy = BearerPolicy(discoveryURLs: [discovery], audiences: [MockAuthority.audience], requiredScopes: requiredScopes)
                let fetcher = try HTTPMetadataFetcher()
                let server = try await TaskServer.make(
                    configuration: TaskServiceConfiguration(policy: policy, corsAllowedOrigins: corsOrigins), database: database,
                    fetcher: fetcher, logger: TestDatabase.logger)
                let app = Application(router: server.buildRouter(), logger: TestDatabase.logger)
                do {
                    try await app.test(testing) { client in try await body(TaskHarness(authority: authority, server: server), client) }
                    try await fetcher.shutdown()
                } catch {
                    try? await fetcher.shutdown()
                    throw error
                }
            }
        }
    }
}

extension TestClientProtocol {
    func call(
        _ method: HTTPRequest.Method, _ uri: String, token: String?, json: String? = nil, headers: HTTPFields = [:]
    ) async throws -> TestResponse {
        var headers = headers
        if let token { headers[.authorization] = "Bearer \(token)" }
        if json != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        return try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: Data(buffer: body))
    }
    var problemType: String? { (try? decode(ProblemDetails.self))?.type }
}

@Suite("Task API: resource, isolation and errors")
struct TaskAPITests {
    @Test("create, get, list, patch with ETag, delete — and another user sees none of it", arguments: TestDatabase.engines)
    func crudAndIsolation(engine: DatabaseEngine) async throws {
        try await TaskHarness.run(engine) { h, client in
            let alice = h.authority.token(oid: "alice")
            let bob = h.authority.token(oid: "bob", name: "Bob")
            let created = try await client.call(.post, "/api/tasks", token: alice, json: #"{"title":"  Buy milk  "}"#)
            #expect(created.status == .created)
            let task = try created.decode(TaskItem.self)
            #expect(task.title == "Buy milk")
            #expect(task.ownerName == "Alice")
            #expect(created.text.contains("\"id\":\"\(task.id.uuidString.lowercased())\""), "ids are lowercase on the wire")
            #expect(created.headers[.location] == "/api/tasks/\(task.id.uuidString.lowercased())")
            let etag = try #require(created.headers[.eTag])

            let fetched = try await client.call(.get, "/api/tasks/\(task.id)", token: alice)
            #expect(try fetched.decode(TaskItem.self) == task)
            #expect(
                try await client.call(.get, "/api/tasks/\(task.id)", token: alice, headers: [.ifNoneMatch: etag]).status == .notModified)

            // Bob cannot read, change or delete it, and cannot tell that it exists.
            #expect(try await client.call(.get, "/api/tasks/\(task.id)", token: bob).status == .notFound)
            #expect(try await client.call(.patch, "/api/tasks/\(task.id)", token: bob, json: #"{"completed":true}"#).status == .notFound)
            #expect(try await client.call(.delete, "/api/tasks/\(task.id)", token: bob).status == .notFound)
            #expect(try await client.call(.get, "/api/tasks", token: bob).decode(TaskPage.self).items.isEmpty)

            let weak = try await client.call(
                .patch, "/api/tasks/\(task.id)", token: alice, json: #"{"completed":true}"#, headers: [.ifMatch: "W/\(etag)"])
            #expect(weak.status == .preconditionFailed, "If-Match compares strongly (RFC 9110 §13.1.1)")
            let stale = try await client.call(
                .patch, "/api/tasks/\(task.id)", token: alice, json: #"{"completed":true}"#, headers: [.ifMatch: "\"99\""])
            #expect(stale.status == .preconditionFailed)
            let done = try await client.call(
                .patch, "/api/tasks/\(task.id)", token: alice, json: #"{"completed":true}"#, headers: [.ifMatch: etag])
            #expect(done.status == .ok)
            let completed = try done.decode(TaskItem.self)
            #expect(completed.completed)
            #expect(completed.completedAt != nil)
            #expect(done.headers[.eTag] != etag)
            #expect(
                try await client.call(.delete, "/api/tasks/\(task.id)", token: alice, headers: [.ifMatch: etag]).status
                    == .preconditionFailed)
            #expect(try await client.call(.delete, "/api/tasks/\(task.id)", token: alice).status == .noContent)
            #expect(try await client.call(.get, "/api/tasks/\(task.id)", token: alice).status == .notFound)
        }
    }

    @Test("lists are newest first, filter on completed and page through an opaque cursor", arguments: TestDatabase.engines)
    func paging(engine: DatabaseEngine) async throws {
        try await TaskHarness.run(engine) { h, client in
            let token = h.authority.token()
            for index in 0..<7 {
                let body = #"{"title":"task \#(index)","completed":\#(index % 2 == 0)}"#
                #expect(try await client.call(.post, "/api/tasks", token: token, json: body).status == .created)
            }
            var titles: [String] = []
            var uri = "/api/tasks?limit=3"
            var pages = 0
            while true {
                let response = try await client.call(.get, uri, token: token)
                let page = try response.decode(TaskPage.self)
                titles += page.items.map(\.title)
                pages += 1
                guard let next = page.nextCursor else {
                    #expect(response.headers[.init("Link")!] == nil)
                    break
                }
                #expect(response.headers[.init("Link")!]?.contains("rel=\"next\"") == true)
                uri = "/api/tasks?limit=3&cursor=\(next)"
            }
            #expect(pages == 3)
            #expect(titles == (0..<7).reversed().map { "task \($0)" })
            let open = try await client.call(.get, "/api/tasks?completed=false", token: token).decode(TaskPage.self)
            #expect(open.items.map(\.title) == ["task 5", "task 3", "task 1"])
            #expect(try await client.call(.get, "/api/tasks?limit=101", token: token).status == .badRequest)
            #expect(try await client.call(.get, "/api/tasks?cursor=bogus", token: token).status == .badRequest)
            #expect(try await client.call(.get, "/api/tasks?completed=maybe", token: token).status == .badRequest)
        }
    }

    @Test("text the store refuses (a NUL) is answered as the caller's bad input: 422 problem+json, never 500")
    func storeRefusalIsBadInput() async throws {
        let router = Router(context: TaskRequestContext.self)
        router.add(middleware: ProblemMiddleware())
        router.get("refused") { _, _ -> Response in throw StorageError.textContainsNUL }
        try await Application(router: router, logger: TestDatabase.logger).test(.router) { client in
            try await client.execute(uri: "/refused", method: .get) { response in
                #expect(response.status == .unprocessableContent)
                #expect(response.headers[.contentType] == "application/problem+json")
                #expect(String(buffer: response.body).contains("invalid-field"))
            }
        }
    }

    @Test("bad input gets a problem document with a stable type", arguments: TestDatabase.engines)
    func badInput(engine: DatabaseEngine) async throws {
        try await TaskHarness.run(engine) { h, client in
            let token = h.authority.token()
            let malformed = try await client.call(.post, "/api/tasks", token: token, json: #"{"title":"#)
            #expect(malformed.status == .badRequest)
            #expect(malformed.headers[.contentType] == "application/problem+json")
            #expect(malformed.problemType == "urn:todob2c:problem:malformed-json")
            let form = try await client.call(
                .post, "/api/tasks", token: token, json: "title=x", headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(form.status == .unsupportedMediaType)
            #expect(try await client.call(.post, "/api/tasks", token: token, json: #"{"title":"   "}"#).status == .unprocessableContent)
            let long = String(repeating: "x", count: 1001)
            #expect(
                try await client.call(.post, "/api/tasks", token: token, json: #"{"title":"\#(long)"}"#).status == .unprocessableContent)
            #expect(try await client.call(.post, "/api/tasks", token: token, json: #"{"nothing":1}"#).status == .unprocessableContent)
            #expect(try await client.call(.post, "/api/tasks", token: token, json: #"{"title":null}"#).status == .unprocessableContent)
            #expect(
                try await client.call(.post, "/api/tasks", token: token, json: #"{"title":"nul \u0000 inside"}"#).status
                    == .unprocessableContent)
            let huge = #"{"title":"\#(String(repeating: "y", count: 70_000))"}"#
            let tooLarge = try await client.call(.post, "/api/tasks", token: token, json: huge)
            #expect(tooLarge.status == .contentTooLarge)
            #expect(tooLarge.problemType == "urn:todob2c:problem:payload-too-large")
            #expect(try await client.call(.get, "/api/tasks/not-a-uuid", token: token).status == .notFound)
            #expect(try await client.call(.get, "/api/tasks/\(UUID())", token: token).problemType == "urn:todob2c:problem:not-found")
            // SQL metacharacters and emoji are stored and returned verbatim.
            let tricky = "Robert'); DROP TABLE tasks;-- 🎉 \\ \" ∑"
            let body = String(data: try JSONEncoder().encode(NewTask(title: tricky)), encoding: .utf8)!
            let created = try await client.call(.post, "/api/tasks", token: token, json: body).decode(TaskItem.self)
            #expect(created.title == tricky)
            #expect(try await client.call(.get, "/api/tasks/\(created.id)", token: token).decode(TaskItem.self).title == tricky)
            #expect(try await client.call(.get, "/api/tasks", token: token).decode(TaskPage.self).items.count == 1)
            #expect(!(try await client.call(.get, "/api/tasks/\(UUID())", token: token).text.contains("SELECT")))
        }
    }

    @Test("the tutorials' /tasks format: array of {task}, POST {task}, DELETE with a JSON body", arguments: TestDatabase.engines)
    func tutorialFormat(engine: DatabaseEngine) async throws {
        try await TaskHarness.run(engine) { h, client in
            let token = h.authority.token()
            #expect(try await client.call(.post, "/tasks", token: token, json: #"{"task":"walk the dog"}"#).status == .created)
            #expect(try await client.call(.post, "/tasks", token: token, json: #"{"task":"feed the cat"}"#).status == .created)
            let list = try await client.call(.get, "/tasks", token: token)
            let items = try #require(try JSONSerialization.jsonObject(with: Data(buffer: list.body)) as? [[String: Any]])
            #expect(items.compactMap { $0["task"] as? String } == ["feed the cat", "walk the dog"])
            #expect(try await client.call(.delete, "/tasks", token: token, json: #"{"task":"walk the dog"}"#).status == .noContent)
            let after =
                try JSONSerialization.jsonObject(with: Data(buffer: try await client.call(.get, "/tasks", token: token).body))
                as? [[String: Any]]
            #expect(after?.count == 1)
            #expect(try await client.call(.post, "/tasks", token: token, json: #"{}"#).status == .unprocessableContent)
        }
    }

    @Test("the tutorials' DELETE /tasks removes the caller's tasks of that title and no one else's", arguments: TestDatabase.engines)
    func tutorialDeleteIsOwnerScoped(engine: DatabaseEngine) async throws {
        try await TaskHarness.run(engine) { h, client in
            let ann = h.authority.token(oid: "ann")
            let ben = h.authority.token(oid: "ben", name: "Ben")
            for token in [ann, ben] {
                #expect(try await client.call(.post, "/tasks", token: token, json: #"{"task":"walk the dog"}"#).status == .created)
                #expect(try await client.call(.post, "/tasks", token: token, json: #"{"task":"feed the cat"}"#).status == .created)
            }
            #expect(try await client.call(.delete, "/tasks", token: ann, json: #"{"task":"walk the dog"}"#).status == .noContent)
            func titles(_ token: String) async throws -> [String] {
                let list = try await client.call(.get, "/tasks", token: token)
                let items = try JSONSerialization.jsonObject(with: Data(buffer: list.body)) as? [[String: Any]] ?? []
                return items.compactMap { $0["task"] as? String }
            }
            #expect(try await titles(ann) == ["feed the cat"])
            #expect(try await titles(ben) == ["feed the cat", "walk the dog"], "Ben's task of the same title stays")
            // A title the caller does not have: nothing of anyone's goes.
            _ = try await client.call(.delete, "/tasks", token: ben, json: #"{"task":"nobody's"}"#)
            let (bens, anns) = (try await titles(ben), try await titles(ann))
            #expect(bens.count == 2 && anns.count == 1)
            // Text no task can have is bad input, answered as a problem (PostgreSQL cannot even
            // compare a NUL: this was a 500 the schemathesis fuzzer found).
            for text in [#"walk the dog\u0000"#, #"\u0000"#, #"walk\u0007 the dog"#, #"\u00a3\uda5a\udced\u0000"#] {
                let refused = try await client.call(.delete, "/tasks", token: ben, json: #"{"task":""# + text + #""}"#)
                #expect(refused.status == .unprocessableContent, "\(text)")
                #expect(refused.headers[.contentType] == "application/problem+json")
            }
            #expect(try await titles(ben) == ["feed the cat", "walk the dog"])
        }
    }

    @Test(
        "the .NET TaskService format under /taskservice: a bare array of {Text}, POST Text=… as a form or JSON, owner-scoped",
        arguments: TestDatabase.engines)
    func dotNetTaskServiceFormat(engine: DatabaseEngine) async throws {
        try await TaskHarness.run(engine) { h, client in
            let ann = h.authority.token(oid: "ann")
            let ben = h.authority.token(oid: "ben")
            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            let created = try await client.call(.post, "/taskservice/api/tasks", token: ann, json: "Text=walk+the+dog%21", headers: form)
            #expect(created.status == .created)
            let createdTask = try #require(try JSONSerialization.jsonObject(with: Data(buffer: created.body)) as? [String: Any])
            #expect(createdTask["Text"] as? String == "walk the dog!")
            #expect(createdTask["Owner"] as? String == "ann")
            #expect(createdTask["Completed"] as? Bool == false)
            #expect(
                try await client.call(.post, "/taskservice/api/tasks", token: ann, json: #"{"Text":"feed the cat"}"#).status == .created)

            let list = try await client.call(.get, "/taskservice/api/tasks", token: ann)
            #expect(list.status == .ok)
            let items = try #require(try JSONSerialization.jsonObject(with: Data(buffer: list.body)) as? [[String: Any]])
            #expect(items.compactMap { $0["Text"] as? String } == ["feed the cat", "walk the dog!"])
            #expect(Set(items.flatMap { $0.keys }) == ["Id", "Owner", "Text", "Completed", "DateModified"])
            // The same tasks, seen through our own format; another owner sees none of them.
            #expect(try await client.call(.get, "/api/tasks", token: ann).decode(TaskPage.self).items.count == 2)
            #expect(try await client.call(.get, "/taskservice/api/tasks", token: ben).text == "[]")

            // Bad input changes nothing: no Text, an empty or control-character Text, another media type.
            for body in ["", "text2=x", "Text=", "Text=%00", "Text=a%0Db"] {
                let refused = try await client.call(.post, "/taskservice/api/tasks", token: ann, json: body, headers: form)
                #expect(refused.status == .unprocessableContent, "\(body)")
            }
            let plain = try await client.call(
                .post, "/taskservice/api/tasks", token: ann, json: "Text=x", headers: [.contentType: "text/plain"])
            #expect(plain.status == .unsupportedMediaType)
            #expect(
                try await client.call(.post, "/taskservice/api/tasks", token: nil, json: "Text=x", headers: form).status == .unauthorized)

            let id = try #require(createdTask["Id"] as? String)
            #expect(try await client.call(.delete, "/taskservice/api/tasks/\(id)", token: ben).status == .notFound)
            #expect(try await client.call(.delete, "/taskservice/api/tasks/\(id)", token: ann).status == .noContent)
            #expect(try await client.call(.get, "/api/tasks", token: ann).decode(TaskPage.self).items.map(\.title) == ["feed the cat"])
        }
    }

    @Test("1000 concurrent creates by one user are all stored", arguments: TestDatabase.engines)
    func concurrentCreates(engine: DatabaseEngine) async throws {
        try await TaskHarness.run(engine) { h, client in
            let token = h.authority.token()
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<1000 {
                    group.addTask { try await client.call(.post, "/api/tasks", token: token, json: #"{"title":"t\#(index)"}"#).status }
                }
                for try await status in group { #expect(status == .created) }
            }
            var count = 0
            var cursor: String?
            repeat {
                let page = try await client.call(.get, "/api/tasks?limit=100" + (cursor.map { "&cursor=\($0)" } ?? ""), token: token)
                    .decode(TaskPage.self)
                count += page.items.count
                cursor = page.nextCursor
            } while cursor != nil
            #expect(count == 1000)
        }
    }

    @Test("a method a path does not serve gets 405 with Allow")
    func methodNotAllowed() async throws {
        try await TaskHarness.run(.sqlite) { h, client in
            let put = try await client.call(.put, "/api/tasks/\(UUID())", token: h.authority.token(), json: "{}")
            #expect(put.status == .methodNotAllowed)
            #expect(put.headers[.allow] == "GET, PATCH, DELETE")
            #expect(put.problemType == "urn:todob2c:problem:method-not-allowed")
            let delete = try await client.call(.delete, "/api/tasks", token: nil)
            #expect(delete.status == .methodNotAllowed)
            #expect(delete.headers[.allow] == "GET, POST")
        }
    }

    @Test("CORS headers reach browsers on errors too, and only for allowed origins")
    func corsOnErrors() async throws {
        try await TaskHarness.run(.sqlite, corsOrigins: ["http://app.example"]) { h, client in
            let token = h.authority.token()
            let missing = try await client.call(.get, "/api/tasks/\(UUID())", token: token, headers: [.origin: "http://app.example"])
            #expect(missing.status == .notFound)
            #expect(missing.headers[.accessControlAllowOrigin] == "http://app.example")
            let other = try await client.call(.get, "/api/tasks", token: token, headers: [.origin: "http://evil.example"])
            #expect(other.status == .ok)
            #expect(other.headers[.accessControlAllowOrigin] == nil)
        }
    }

    @Test("metrics answer only a local request (loopback peer, loopback Host)")
    func metricsAreLocal() async throws {
        // The router test client has no socket, so no loopback peer.
        try await TaskHarness.run(.sqlite) { _, client in
            let response = try await client.call(.get, "/metrics", token: nil)
            #expect(response.status == .notFound)
        }
    }

    @Test("metrics answer a numeric loopback Host, never a DNS name that begins 127. (rebinding)")
    func metricsRefuseRebinding() async throws {
        try await TaskHarness.run(.sqlite, over: .ahc(.http)) { _, client in
            #expect(try await client.call(.get, "/metrics", token: nil).status == .ok)
            for host in ["127.evil.example", "127.0.0.1.evil.example:3000", "127.1"] {
                let response = try await client.call(.get, "/metrics", token: nil, headers: [HTTPField.Name("Host")!: host])
                #expect(response.status == .notFound, "\(host)")
            }
            #expect(try await client.call(.get, "/metrics", token: nil, headers: [HTTPField.Name("Host")!: "127.0.0.1:3000"]).status == .ok)
        }
    }

    @Test("health, readiness and metrics answer without a token")
    func operations() async throws {
        try await TaskHarness.run(.sqlite, over: .live) { h, client in
            #expect(try await client.call(.get, "/healthz", token: nil).status == .ok)
            #expect(try await client.call(.get, "/readyz", token: nil).status == .ok)
            _ = try await client.call(.get, "/api/tasks", token: "garbage")
            _ = try await client.call(.get, "/api/tasks", token: h.authority.token())
            let metrics = try await client.call(.get, "/metrics", token: nil).text
            #expect(metrics.contains("todo_http_requests_total"))
            #expect(metrics.contains("route=\"/api/tasks\""))
            #expect(metrics.contains("todo_token_validation_failures_total{reason=\"malformed\"}"))
        }
    }
}

@Suite("The OpenAPI document")
struct OpenAPITests {
    /// The statuses each operation can answer with, which the document must list.
    static let expectedStatuses: [String: Set<String>] = [
        "GET /api/tasks": ["200", "400", "401", "403", "503"],
        "POST /api/tasks": ["201", "400", "401", "403", "413", "415", "422", "503"],
        "GET /api/tasks/{id}": ["200", "304", "401", "403", "404", "503"],
        "PATCH /api/tasks/{id}": ["200", "400", "401", "403", "404", "412", "413", "415", "422", "503"],
        "DELETE /api/tasks/{id}": ["204", "401", "403", "404", "412", "503"],
        "GET /tasks": ["200", "401", "403", "503"],
        "POST /tasks": ["201", "400", "401", "403", "413", "415", "422", "503"],
        "DELETE /tasks": ["204", "400", "401", "403", "413", "415", "422", "503"],
        "GET /taskservice/api/tasks": ["200", "401", "403", "503"],
        "POST /taskservice/api/tasks": ["201", "400", "401", "403", "413", "415", "422", "503"],
        "DELETE /taskservice/api/tasks/{id}": ["204", "401", "403", "404", "503"],
        "GET /healthz": ["200"],
        "GET /readyz": ["200", "503"],
        "GET /metrics": ["200", "404"],
        "GET /openapi.json": ["200"],
    ]

    @Test("documents exactly the routes the router serves, each with every status it can answer")
    func documentMatchesRouter() async throws {
        try await TaskHarness.run(.sqlite) { h, client in
            let response = try await client.call(.get, "/openapi.json", token: nil)
            #expect(response.status == .ok)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
            let paths = try #require(document["paths"] as? [String: [String: Any]])
            var documented: [String: Set<String>] = [:]
            for (path, item) in paths {
                for (method, operation) in item where method != "parameters" {
                    let responses = (operation as? [String: Any])?["responses"] as? [String: Any] ?? [:]
                    documented["\(method.uppercased()) \(path)"] = Set(responses.keys)
                }
            }
            func normalized(_ route: String) -> String { route.replacingOccurrences(of: ":id", with: "{id}") }
            let answersOnly405 = Set(
                TaskServer.unsupportedMethods.flatMap { path, methods in methods.map { normalized("\($0) /\(path)") } })
            let served = Set(
                h.server.buildRouter().routes.map { normalized("\($0.method) \($0.path.description)") }.filter {
                    !answersOnly405.contains($0)
                })
            #expect(answersOnly405.count == 14)
            #expect(Set(documented.keys) == served, "documented vs served routes differ")
            #expect(Set(documented.keys) == Set(Self.expectedStatuses.keys))
            for (operation, statuses) in Self.expectedStatuses {
                #expect(documented[operation] == statuses, "\(operation)")
            }
        }
    }
}

@Suite("Hand-written task JSON")
struct TaskJSONTests {
    @Test("writes exactly what JSONEncoder writes (sorted keys, ISO 8601 dates)")
    func matchesJSONEncoder() throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let titles = [
            "plain", "quote \" backslash \\ slash /", "line\nbreak\ttab\r\u{8}\u{c}\u{1}\u{1f}", "emoji 🎉 ∑ é", "'); DROP TABLE tasks;--",
        ]
        var items: [TaskItem] = []
        for (index, title) in titles.enumerated() {
            items.append(
                TaskItem(
                    id: UUID(), title: title, completed: index % 2 == 0,
                    createdAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(index) * 86_400.5),
                    updatedAt: Date(timeIntervalSince1970: 2_000_000_000.75),
                    completedAt: index % 2 == 0 ? Date(timeIntervalSince1970: 1_000_000_000) : nil,
                    ownerName: index == 3 ? nil : "Owner \"\(index)\""))
        }
        for item in items {
            #expect(String(decoding: TaskJSON.item(item), as: UTF8.self) == String(decoding: try encoder.encode(item), as: UTF8.self))
        }
        for page in [TaskPage(items: items, nextCursor: "abc_-1"), TaskPage(items: [], nextCursor: nil)] {
            #expect(String(decoding: TaskJSON.page(page), as: UTF8.self) == String(decoding: try encoder.encode(page), as: UTF8.self))
        }
    }

    @Test("UUIDText parses and writes what Foundation does, and refuses every other shape")
    func uuidText() {
        for _ in 0..<200 {
            let id = UUID()
            var written: [UInt8] = []
            UUIDText.appendLowercase(id, to: &written)
            #expect(String(decoding: written, as: UTF8.self) == id.uuidString.lowercased())
            #expect(UUIDText.parse(id.uuidString) == id)
            #expect(UUIDText.parse(id.uuidString.lowercased()) == id)
            #expect(UUIDText.parse(Substring(id.uuidString)) == id)
        }
        let good = "0f8fad5b-d9cb-469f-a165-70867728950e"
        for bad in [
            "", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5b-d9cb-469f-a165-70867728950e0", "0f8fad5bd-9cb-469f-a165-70867728950e",
            "0f8fad5b-d9cb-469f-a165-70867728950g", "0f8fad5b_d9cb_469f_a165_70867728950e", "{f8fad5b-d9cb-469f-a165-70867728950e",
            "0f8fad5b-d9cb-469f-a165-7086772895é", "0f8fad5b-d9cb-469f-a165-70867728950e ",
        ] {
            #expect(UUIDText.parse(bad) == nil, "\(bad)")
            #expect(UUID(uuidString: bad) == nil, "Foundation agrees on \(bad)")
        }
        #expect(UUIDText.parse(good) == UUID(uuidString: good))
    }
}
