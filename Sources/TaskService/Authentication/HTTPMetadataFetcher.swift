import AsyncHTTPClient
import Foundation
import ServerSupport
import NIOCore
import NIOSSL

/// Fetches discovery documents and key sets over HTTP(S) with AsyncHTTPClient. An extra CA
/// (the identity service's development CA under `--tls`) can be trusted besides the system's.
public final class HTTPMetadataFetcher: MetadataFetcher {
    private let client: HTTPClient
    private let timeout: TimeAmount

    /// - Parameter timeout: for one fetch, connecting included (a validator waits on it).
    public init(additionalCACertificatePath: String? = nil, timeout: TimeAmount = .seconds(5)) throws {
        self.timeout = timeout
        var tls = TLSConfiguration.makeClientConfiguration()
        if let path = additionalCACertificatePath {
            tls.additionalTrustRoots = [.file(path)]
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.timeout.connect = .seconds(1)
        // AsyncHTTPClient's own spans record the full URL; ours (`OutboundTrace`) record the host.
        configuration.tracing.tracer = nil
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    struct FetchError: Error, CustomStringConvertible {
        let description: String
    }

    public func fetch(_ url: String) async throws -> Data {
        let response = try await OutboundTrace.call("GET authority-metadata", host: URL(string: url)?.host) { trace in
            var request = HTTPClientRequest(url: url)
            request.headers.add(contentsOf: trace)
            return try await client.execute(request, timeout: timeout)
        }
        guard response.status == .ok else { throw FetchError(description: "GET \(url): HTTP \(response.status.code)") }
        let body = try await response.body.collect(upTo: 1 << 20)
        return Data(buffer: body)
    }

    public func shutdown() async throws { try await client.shutdown() }
}
