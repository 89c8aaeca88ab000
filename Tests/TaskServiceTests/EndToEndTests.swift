import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdTesting
import IdentityServer
import Storage
import TaskService
import TestSupport
import Testing
import TodoModels

@Suite("Task API with real sign-ins from the identity service")
struct EndToEndTests {
    @Test("two users sign in with ROPC at the identity service and keep their tasks apart", arguments: TestDatabase.engines)
    func twoUsers(engine: DatabaseEngine) async throws {
        try await TestDatabase.with(engine) { database in
            let identity = try await IdentityServer.make(
                configuration: .init(passwordHashCost: 4), database: database, dataKey: .generate(), logger: TestDatabase.logger)
            let seed = try await identity.seedDevelopmentTenant(apiPort: 3000)
            _ = try await identity.administration.createLocalUser(
                tenantID: seed.tenant.id, email: "ann@example.com", displayName: "Ann", password: "Ann-Pass1")
            _ = try await identity.administration.createLocalUser(
                tenantID: seed.tenant.id, email: "ben@example.com", displayName: "Ben", password: "Ben-Pass1")
            let identityApp = Application(
                router: identity.buildRouter(), configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: TestDatabase.logger)
            try await identityApp.test(.live) { identityClient in
                let base = "http://127.0.0.1:\(identityClient.port!)"
                let http = HTTPClient(eventLoopGroupProvider: .singleton)
                func signIn(_ email: String, _ password: String) async throws -> String {
                    var request = HTTPClientRequest(url: "\(base)/\(seed.tenant.name)/B2C_1_ROPC/oauth2/v2.0/token")
                    request.method = .POST
                    request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                    let client = seed.publicApp.clientIDString
                    request.body = .bytes(
                        ByteBuffer(
                            string: "grant_type=password&client_id=\(client)&username=\(email)&password=\(password)&scope=openid+\(client)")
                    )
                    let response = try await http.execute(request, timeout: .seconds(60))
                    let body = try await response.body.collect(upTo: 1 << 20)
                    let json = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any]
                    return try #require(json?["access_token"] as? String)
                }
                // The client is shut down on every path: AsyncHTTPClient traps when one is released
                // running, which would turn a failed sign-in into a crash of the whole test process.
                let tokens: (String, String)
                do {
                    tokens = (try await signIn("ann@example.com", "Ann-Pass1"), try await signIn("ben@example.com", "Ben-Pass1"))
                    try await http.shutdown()
                } catch {
                    try? await http.shutdown()
                    throw error
                }
                let (ann, ben) = tokens

                let policy = BearerPolicy(
                    discoveryURLs: ["\(base)/\(seed.tenant.name)/B2C_1_ROPC/v2.0/.well-known/openid-configuration"],
                    audiences: [seed.publicApp.clientIDString])
                let fetcher = try HTTPMetadataFetcher()
                do {
                    let tasks = try await TaskServer.make(
                        configuration: .init(policy: policy), database: database, fetcher: fetcher, logger: TestDatabase.logger)
                    try await Application(router: tasks.buildRouter(), logger: TestDatabase.logger).test(.router) { client in
                        let created = try await client.call(.post, "/api/tasks", token: ann, json: #"{"title":"Ann's task"}"#)
                        #expect(created.status == .created)
                        let task = try created.decode(TaskItem.self)
                        #expect(task.ownerName == "Ann")
                        #expect(try await client.call(.get, "/api/tasks", token: ann).decode(TaskPage.self).items.map(\.id) == [task.id])
                        #expect(try await client.call(.get, "/api/tasks", token: ben).decode(TaskPage.self).items.isEmpty)
                        #expect(try await client.call(.get, "/api/tasks/\(task.id)", token: ben).status == .notFound)
                        #expect(try await client.call(.delete, "/api/tasks/\(task.id)", token: ben).status == .notFound)
                        #expect(
                            try await client.call(.patch, "/api/tasks/\(task.id)", token: ann, json: #"{"completed":true}"#).status == .ok)
                        #expect(try await client.call(.delete, "/api/tasks/\(task.id)", token: ann).status == .noContent)
                    }
                } catch {
                    try? await fetcher.shutdown()
                    throw error
                }
                try await fetcher.shutdown()
            }
            try await identity.shutdown()
        }
    }
}
