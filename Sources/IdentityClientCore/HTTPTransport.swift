import Foundation
import WireCoding

/// One HTTP request as the SDK sends it.
public struct TransportRequest: Sendable {
    public var method: String
    public var url: URL
    /// Header fields; names are case-insensitive.
    public var headers: [String: String]
    public var body: Data?

    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A `application/x-www-form-urlencoded` POST (the token endpoint's only format, RFC 6749 §4.1.3).
    static func form(_ url: URL, _ fields: [(String, String)], headers: [String: String] = [:]) -> TransportRequest {
        var headers = headers
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return TransportRequest(method: "POST", url: url, headers: headers, body: Data(FormEncoding.encode(fields).utf8))
    }
}

/// One HTTP response.
public struct TransportResponse: Sendable {
    public var status: Int
    /// Header fields with lowercased names.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }
}

/// How the SDK talks HTTP. `import IdentityClient` brings `URLSessionTransport`, the default
/// wherever a transport is left out; apps inject their own for proxies, custom TLS trust or tests.
public protocol HTTPTransport: Sendable {
    /// Sends the request. Throws only when no HTTP response arrived; an HTTP error status is a
    /// normal response.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}
