import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A loopback TCP relay in front of PostgreSQL that can cut the connection at a transaction's
/// COMMIT: the lost answer a restart causes, made to happen on cue. Every other byte passes
/// through unchanged, so the pool, the protocol and PostgreSQL are the real ones.
public final class CommitCuttingProxy: Sendable {
    public enum Cut: Sendable {
        /// COMMIT reaches PostgreSQL (which commits) and the connection closes before the
        /// answer comes back.
        case answerLost
        /// The connection closes before COMMIT is sent: PostgreSQL rolls the transaction back.
        case commitLost
    }

    public let port: Int
    private let listener: any Channel
    private let armed: NIOLockedValueBox<Cut?>

    private init(port: Int, listener: any Channel, armed: NIOLockedValueBox<Cut?>) {
        self.port = port
        self.listener = listener
        self.armed = armed
    }

    public static func start(upstreamHost: String, upstreamPort: Int) async throws -> CommitCuttingProxy {
        let armed = NIOLockedValueBox<Cut?>(nil)
        let group = MultiThreadedEventLoopGroup.singleton
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { client in
                ClientBootstrap(group: client.eventLoop).connect(host: upstreamHost, port: upstreamPort).flatMap { server in
                    let toServer = Relay(partner: server, armed: armed)
                    let toClient = Relay(partner: client, armed: nil)
                    toServer.answers = toClient
                    return server.pipeline.addHandler(toClient).flatMap { client.pipeline.addHandler(toServer) }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = listener.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        return CommitCuttingProxy(port: port, listener: listener, armed: armed)
    }

    /// Cuts the next connection that sends COMMIT, once.
    public func arm(_ cut: Cut) { armed.withLockedValue { $0 = cut } }

    /// Whether the armed cut has happened.
    public var hasCut: Bool { armed.withLockedValue { $0 == nil } }

    public func close() async throws { try await listener.close() }

    /// Copies what one side reads to the other; the client's side looks for COMMIT when armed.
    private final class Relay: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let partner: any Channel
        let armed: NIOLockedValueBox<Cut?>?
        /// The relay of PostgreSQL's answers, silenced once COMMIT's answer is to be lost.
        var answers: Relay?
        var silenced = false

        init(partner: any Channel, armed: NIOLockedValueBox<Cut?>?) {
            self.partner = partner
            self.armed = armed
        }

        // The client's side reads only once its relay is in place (autoRead is off until then).
        func channelActive(context: ChannelHandlerContext) { context.read() }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            guard !silenced else { return }
            // The extended protocol's Parse message carries the statement's text, NUL-terminated.
            if let armed, buffer.readableBytesView.firstRange(of: Array("COMMIT\0".utf8)) != nil,
                let cut = armed.withLockedValue({ cut -> Cut? in
                    defer { cut = nil }
                    return cut
                })
            {
                let client = context.channel
                switch cut {
                case .answerLost:
                    answers?.silenced = true
                    partner.writeAndFlush(buffer).whenComplete { [partner] _ in
                        // PostgreSQL reads COMMIT before it sees the connection close.
                        client.close(promise: nil)
                        partner.eventLoop.scheduleTask(in: .milliseconds(500)) { partner.close(promise: nil) }
                    }
                case .commitLost:
                    client.close(promise: nil)
                    partner.close(promise: nil)
                }
                return
            }
            partner.writeAndFlush(buffer, promise: nil)
        }

        func channelReadComplete(context: ChannelHandlerContext) { context.read() }

        func channelInactive(context: ChannelHandlerContext) { partner.close(promise: nil) }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }
}
