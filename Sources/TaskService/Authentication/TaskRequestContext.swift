import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServerSupport

/// The Task API's request context: the authenticated user once the bearer middleware ran, and
/// the request id that the logs and problem documents carry.
public struct TaskRequestContext: RequestContext, RemoteAddressRequestContext, IdentifiedRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var user: AuthenticatedUser?
    public var requestID: String
    /// The connection's peer (nil in router tests, which have no socket).
    public var remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        user = nil
        requestID = RequestIDs.next()
        remoteAddress = source.channel.remoteAddress
        socketPeer = source.channel.remoteAddress
    }

    /// The connection's own peer, whatever a trusted proxy's `X-Forwarded-For` says.
    public var socketPeer: SocketAddress?

    /// A request from this machine to a loopback name: the socket's peer is loopback and so is
    /// the `Host`, and no proxy forwarded it (a reverse proxy on the same machine forwards the
    /// public name or adds `X-Forwarded-For`, so its requests do not count).
    func isLocal(_ request: Request) -> Bool {
        guard let peer = socketPeer?.ipAddress, request.headers[TrustedProxies.forwardedFor] == nil else { return false }
        let loopbackPeer = peer.hasPrefix("127.") || peer == "::1" || peer.hasPrefix("::ffff:127.")
        // A numeric loopback `Host` or a loopback name, never `127.<anything>`: a DNS name that
        // begins so is another site's, rebound to this machine.
        return loopbackPeer && Loopback.isAuthority(request.head.authority ?? "")
    }

    /// Task bodies are small; beyond this, 413 (SPEC §3).
    public var maxUploadSize: Int { 64 * 1024 }

    /// The signed-in user; only absent if a route were registered outside the bearer middleware.
    func requireUser() throws -> AuthenticatedUser {
        guard let user else { throw TaskAPIError.unauthenticated }
        return user
    }
}

/// Checks `Authorization: Bearer …` (RFC 6750 §2.1) and answers 401/403 with the precise
/// `WWW-Authenticate` challenge when the token is refused.
struct BearerAuthenticationMiddleware: RouterMiddleware {
    typealias Context = TaskRequestContext
    let validator: BearerValidator
    let metrics: TaskMetrics
    let adoption: LegacyOwnerAdoption

    /// The credentials of `Bearer <token>` (scheme case-insensitive, RFC 6750 §2.1), or "".
    /// Works on UTF-8 bytes: it runs on every request.
    static func bearerToken(_ header: String) -> String {
        let bytes = Array(header.utf8)
        guard bytes.count > 7, String(decoding: bytes[0..<7], as: UTF8.self).lowercased() == "bearer " else { return "" }
        var start = 7
        var end = bytes.count
        while start < end, bytes[start] == UInt8(ascii: " ") { start += 1 }
        while end > start, bytes[end - 1] == UInt8(ascii: " ") { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method != .options else { return try await next(request, context) }
        let token = Self.bearerToken(request.headers[.authorization] ?? "")
        do {
            var context = context
            context.user = try await validator.validate(token)
            context.logger[metadataKey: "oid"] = .string(context.user!.objectID)
            try await adoption.adopt(for: context.user!)
            return try await next(request, context)
        } catch let rejection as TokenRejection {
            metrics.tokenRejected(rejection)
            context.logger.info("bearer token refused", metadata: ["reason": "\(rejection.reason)"])
            return Problem.response(for: .tokenRejected(rejection))
        }
    }
}

extension RequestIDConvention {
    /// The API takes MSAL's `client-request-id` or a proxy's `x-request-id` (a short token, so
    /// nothing odd reaches a log) and answers with `x-request-id`.
    static let taskAPI = RequestIDConvention(
        headers: [HTTPField.Name("client-request-id")!, HTTPField.Name("x-request-id")!], echo: HTTPField.Name("x-request-id")!,
        metadataKey: "request_id",
        isUsable: { $0.count <= 128 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) } })
}

/// Behind a trusted balancer, the client is the one its `X-Forwarded-For` names (issue 14).
struct ForwardedClientMiddleware: RouterMiddleware {
    typealias Context = TaskRequestContext
    let proxies: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let peer = context.remoteAddress?.ipAddress, let client = proxies.clientAddress(peer: peer, fields: request.headers),
            client != peer
        {
            context.remoteAddress = try? SocketAddress(ipAddress: client, port: 0)
        }
        return try await next(request, context)
    }
}
