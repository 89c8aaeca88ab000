import AsyncHTTPClient
import Foundation
import IdentityClientCore
import NIOCore
import NIOFoundationCompat
import NIOSSL

/// The SDK's transport over AsyncHTTPClient for server-side use: pooled keep-alive connections
/// on SwiftNIO (FoundationNetworking's `URLSession` costs a thread hop and a new libcurl handle
/// per request on Linux), and the development CA trusted under `--tls`. Redirects are not
/// followed, like the SDK's default transport. Call ``shutdown()`` before exit.
public final class AsyncHTTPClientTransport: HTTPTransport {
    private let client: HTTPClient

    /// - Parameter additionalCACertificatePath: a PEM CA to trust besides the system's.
    public init(additionalCACertificatePath: String? = nil) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let path = additionalCACertificatePath {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(path))]
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow)
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = .init(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(data: body)) }
        do {
            let response = try await client.execute(outgoing, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 8 << 20)
            var headers: [String: String] = [:]
            for field in response.headers where headers[field.name.lowercased()] == nil { headers[field.name.lowercased()] = field.value }
            return TransportResponse(status: Int(response.status.code), headers: headers, body: Data(buffer: body))
        } catch {
            throw IdentityError.network("\(request.url.host ?? request.url.absoluteString): \(error)")
        }
    }

    public func shutdown() async throws { try await client.shutdown() }
}
