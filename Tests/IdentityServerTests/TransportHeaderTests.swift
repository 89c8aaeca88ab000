import HTTPTypes
import Hummingbird
import Logging
import ServerSupport
import Testing

/// A request context needing nothing but a logger, to drive a middleware directly with any
/// `Host` (Hummingbird's test clients always send `localhost`).
private struct PlainContext: RequestContext {
    struct Source: RequestContextSource { var logger: Logger }
    var coreContext: CoreRequestContextStorage
    init(source: Source) { coreContext = .init(source: source) }
}

@Suite("Transport headers on every answer")
struct TransportHeaderTests {
    private func headers(https: Bool, authority: String) async throws -> HTTPFields {
        let middleware = SecurityHeadersMiddleware<PlainContext>(https: https)
        let request = Request(
            head: HTTPRequest(method: .get, scheme: https ? "https" : "http", authority: authority, path: "/healthz"),
            body: .init(buffer: ByteBuffer()))
        let response = try await middleware.handle(request, context: PlainContext(source: .init(logger: Logger(label: "test")))) { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"])
        }
        return response.headers
    }

    @Test("nosniff always; HSTS only over HTTPS to a name that is not loopback (HSTS binds every port of a host)")
    func hstsAndNosniff() async throws {
        let remote = try await headers(https: true, authority: "login.contoso.example")
        #expect(remote[.xContentTypeOptions] == "nosniff")
        #expect(remote[.strictTransportSecurity] == "max-age=31536000")
        for loopback in ["localhost:5443", "127.0.0.1:5443", "[::1]:5443", "LOCALHOST"] {
            let local = try await headers(https: true, authority: loopback)
            #expect(local[.strictTransportSecurity] == nil, "\(loopback)")
            #expect(local[.xContentTypeOptions] == "nosniff")
        }
        #expect(try await headers(https: false, authority: "login.contoso.example")[.strictTransportSecurity] == nil, "never over HTTP")
    }
}
