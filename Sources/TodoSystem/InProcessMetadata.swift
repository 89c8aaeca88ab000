import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import TaskService
import UserJourneys

/// The Task API's discovery documents and key sets, taken from the identity service in the
/// same process when they are its own: the request goes through the identity router (the same
/// middleware, the same bytes as over HTTP) without a socket. Over loopback the fetch was one
/// more client of 127.0.0.1, and 1,024 idle connections from that address (the per-address cap)
/// made every authenticated API call of a fresh server answer 503 (issue 51, F8). Other
/// authorities (a real B2C tenant, another instance's URL) are fetched over the network.
struct InProcessMetadata: MetadataFetcher {
    /// The identity service's own origin as the Task API's URLs spell it: scheme, host, port.
    let origin: Origin
    let responder: RouterResponder<IdentityRequestContext>
    let network: any MetadataFetcher
    let logger: Logger

    struct Origin: Equatable {
        let scheme: String
        let host: String
        let port: Int

        init?(_ url: URL) {
            guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
            self.scheme = scheme
            self.host = host
            port = url.port ?? (scheme == "https" ? 443 : 80)
        }

        /// The `Host` the request names, as a client would send it (an IPv6 literal in brackets).
        var authority: String {
            let name = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            return (scheme == "https" && port == 443) || (scheme == "http" && port == 80) ? name : "\(name):\(port)"
        }
    }

    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// The same limit as ``HTTPMetadataFetcher``'s: a key set is a few kilobytes.
    static let maximumBody = 1 << 20

    func fetch(_ url: String) async throws -> Data {
        guard let parsed = URL(string: url), Origin(parsed) == origin, parsed.user == nil else {
            return try await network.fetch(url)
        }
        var path = parsed.path.isEmpty ? "/" : parsed.path
        if let query = parsed.query { path += "?\(query)" }
        let request = Request(
            head: HTTPRequest(method: .get, scheme: origin.scheme, authority: origin.authority, path: path),
            body: RequestBody(buffer: ByteBuffer()))
        let (responder, logger) = (self.responder, self.logger)
        // The network fetch's deadline: a validator waits on this, and with it every call that
        // needs the keys (a database that stalls the identity router must not stall them longer).
        return try await withThrowingTaskGroup(of: Data.self) { group in
            group.addTask {
                let response = try await responder.respond(to: request, context: IdentityRequestContext(inProcess: logger))
                guard response.status == .ok else { throw Refused(description: "GET \(url): HTTP \(response.status.code)") }
                let collected = Collected()
                try await response.body.write(collected)
                return Data(buffer: collected.buffer)
            }
            group.addTask {
                try await Task.sleep(for: Self.deadline)
                throw Refused(description: "GET \(url): no answer within \(Self.deadline)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// As long as ``HTTPMetadataFetcher``'s timeout.
    static let deadline: Duration = .seconds(5)

    /// A class: the body writes into a writer it consumes.
    private final class Collected: ResponseBodyWriter {
        var buffer = ByteBuffer()

        func write(_ part: ByteBuffer) async throws {
            guard buffer.readableBytes + part.readableBytes <= InProcessMetadata.maximumBody else {
                throw Refused(description: "authority metadata larger than \(InProcessMetadata.maximumBody) bytes")
            }
            var part = part
            buffer.writeBuffer(&part)
        }

        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
