import Foundation
import Hummingbird
import IdentityClient
import Logging
import Storage
import TestSupport
import Testing

@testable import WebApp

@Suite("The web app and the Host header")
struct WebAppHostTests {
    @Test("the reply URL follows Host only when Host names a registered reply URL")
    func replyURLFollowsOnlyRegisteredHosts() async throws {
        try await TestDatabase.with(.sqlite) { database in
            var configuration = WebAppConfiguration(
                clientID: UUID().uuidString, clientSecret: "s", authority: "http://127.0.0.1:5080/todob2c.onmicrosoft.com/",
                apiBaseURL: URL(string: "http://127.0.0.1:3000")!, apiScopes: [])
            configuration.replyURLs = ["http://localhost:3000/auth/openid/return", "http://127.0.0.1:3000/auth/openid/return"]
            let app = try await WebApp.make(
                configuration: configuration, database: database, dataKey: .generate(), transport: URLSessionTransport(),
                logger: TestDatabase.logger)
            func reply(_ host: String) -> String {
                app.returnURL(
                    Request(
                        head: .init(method: .get, scheme: "http", authority: host, path: "/auth/signin"), body: .init(buffer: ByteBuffer()))
                )
            }
            #expect(reply("127.0.0.1:3000") == "http://127.0.0.1:3000/auth/openid/return")
            #expect(reply("localhost:3000") == "http://localhost:3000/auth/openid/return")
            #expect(reply("attacker.example") == "http://localhost:3000/auth/openid/return")
            #expect(reply("localhost:3000@attacker.example") == "http://localhost:3000/auth/openid/return")
        }
    }
}
