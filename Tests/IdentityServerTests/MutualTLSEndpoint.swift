import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A REST endpoint on loopback that speaks TLS and requires a client certificate its CA issued
/// (a B2C REST technical profile's `ClientCertificate` counterpart). Plain NIO rather than a
/// Hummingbird test application: it records the certificate each request presented.
final class MutualTLSEndpoint: Sendable {
    let port: Int
    private let listener: any Channel
    private let presented: NIOLockedValueBox<[String]>

    /// The subjects of the client certificates the requests presented, in order.
    var subjects: [String] { presented.withLockedValue { $0 } }

    static func start(certificate: String, key: String, clientCA: String, answer: String) async throws -> MutualTLSEndpoint {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        tls.certificateVerification = .noHostnameVerification  // a client certificate is required and checked
        tls.trustRoots = .file(clientCA)
        let context = try NIOSSLContext(configuration: tls)
        let presented = NIOLockedValueBox<[String]>([])
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Responder(answer: answer, presented: presented))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = listener.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        return MutualTLSEndpoint(port: port, listener: listener, presented: presented)
    }

    private init(port: Int, listener: any Channel, presented: NIOLockedValueBox<[String]>) {
        self.port = port
        self.listener = listener
        self.presented = presented
    }

    func close() async throws { try await listener.close() }

    private final class Responder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let answer: String
        let presented: NIOLockedValueBox<[String]>

        init(answer: String, presented: NIOLockedValueBox<[String]>) {
            self.answer = answer
            self.presented = presented
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            let (channel, presented, answer) = (context.channel, presented, answer)
            channel.nioSSL_peerCertificate().whenComplete { result in
                let subject = (try? result.get())?.flatMap { $0.description } ?? "none"
                presented.withLockedValue { $0.append(subject) }
                var headers = HTTPHeaders([("Content-Type", "application/json"), ("Connection", "close")])
                headers.add(name: "Content-Length", value: "\(answer.utf8.count)")
                channel.write(HTTPServerResponsePart.head(.init(version: .http1_1, status: .ok, headers: headers)), promise: nil)
                channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: answer))), promise: nil)
                channel.writeAndFlush(HTTPServerResponsePart.end(nil)).whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }
}
