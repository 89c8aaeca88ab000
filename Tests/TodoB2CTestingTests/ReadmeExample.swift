import Foundation
import Testing
import TodoB2CTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Test func signedInUserAddsATaskUntilTheTokenExpires() async throws {
    try await TodoB2CTestServer.run { b2c in
        let alice = try await b2c.createUser(email: "alice@example.com", displayName: "Alice")
        let tokens = try await b2c.tokens(for: alice.email)

        // The code under test calls an API with the bearer token: here the Task API.
        func addTask(_ title: String, token: String) async throws -> Int {
            var request = URLRequest(url: b2c.apiURL.appendingPathComponent("api/tasks"))
            request.httpMethod = "POST"
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONEncoder().encode(["title": title])
            let (_, response) = try await URLSession.shared.data(for: request)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        }
        #expect(try await addTask("Buy milk", token: tokens.accessToken!) == 201)

        // Two hours later the same token is refused, without waiting two hours.
        try b2c.advanceClock(bySeconds: 7200)
        #expect(try await addTask("Buy bread", token: tokens.accessToken!) == 401)
    }
}
