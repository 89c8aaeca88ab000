import Foundation
@_exported import IdentityClient
@_exported import TaskClientCore

// The Task API client as apps import it: TaskClientCore, plus an initialiser that sends with
// `URLSessionTransport` (the core has no URLSession; see IdentityClient).

extension TaskClient {
    /// A client that sends requests with a new ``URLSessionTransport``.
    ///
    /// - Parameters:
    ///   - baseURL: the API's origin (`/api/tasks` is appended).
    ///   - accessToken: returns a bearer token; `forceRefresh` asks for a new one.
    public init(baseURL: URL, accessToken: @escaping @Sendable (_ forceRefresh: Bool) async throws -> String) {
        self.init(baseURL: baseURL, transport: URLSessionTransport(), accessToken: accessToken)
    }
}
