import AsyncHTTPClient
import Foundation
import IdentityClientCore
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOSSL
import Tracing

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
        // AsyncHTTPClient's own spans record the full URL (a query can hold a code); ours record the host.
        configuration.tracing.tracer = nil
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = .init(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(data: body)) }
        // A client span whose W3C trace context the request carries: the web app's call to the
        // Task API or the token endpoint joins the trace of the page that made it. (The
        // process's tracer is a no-op unless `serve` was given an OTLP endpoint.)
        return try await withSpan("\(request.method) \(request.url.host ?? "")", ofKind: .client) { span in
            InstrumentationSystem.instrument.inject(span.context, into: &outgoing.headers, using: Self.TraceHeaders())
            do {
                let response = try await client.execute(outgoing, timeout: .seconds(30))
                let body = try await response.body.collect(upTo: 8 << 20)
                span.attributes["http.response.status_code"] = Int(response.status.code)
                var headers: [String: String] = [:]
                for field in response.headers where headers[field.name.lowercased()] == nil { headers[field.name.lowercased()] = field.value }
                return TransportResponse(status: Int(response.status.code), headers: headers, body: Data(buffer: body))
            } catch {
                throw IdentityError.network("\(request.url.host ?? request.url.absoluteString): \(error)")
            }
        }
    }

    private struct TraceHeaders: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout HTTPHeaders) { carrier.replaceOrAdd(name: key, value: value) }
    }

    public func shutdown() async throws { try await client.shutdown() }
}
