import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import ServerSupport
import Synchronization

/// Limits on how a client may use a connection, beyond Hummingbird's idle timeout (which
/// restarts on every body part, so a body sent one byte every few seconds never timed out: 20
/// such connections held a listener capped at 20, the second outside attack's F-10).
struct RequestPacing: Sendable {
    /// From a request's head to the end of its body, at most.
    var requestDeadline: TimeAmount
    /// A request whose body is still arriving after ``rateGrace`` must have come at this
    /// average rate at least (bytes per second), or the connection is closed.
    var minimumBodyRate: Int = 1024
    var rateGrace: TimeAmount = .seconds(10)
    /// Connections one client (an address, an IPv6 /64) may hold on the server's listeners
    /// together; trusted proxies are exempt (every client behind them shares their address).
    var connectionsPerAddress: Int
    var proxies: TrustedProxies
    /// Only the proxies may connect: a plain-HTTP listener off loopback, whose TLS a declared
    /// proxy terminates (``SystemConfiguration/isBehindTLSProxy``). Anyone else reaching it
    /// would speak in clear text past the proxy.
    var proxiesOnly: Bool

    init(requestDeadline: TimeAmount, connectionsPerAddress: Int, proxies: [String], proxiesOnly: Bool = false) {
        self.requestDeadline = requestDeadline
        self.connectionsPerAddress = connectionsPerAddress
        self.proxies = TrustedProxies(proxies)
        self.proxiesOnly = proxiesOnly
    }

    /// A connection's handlers; `addresses` counts connections by client across the listeners.
    func handlers(counting addresses: ConnectionsByAddress) -> [any RemovableChannelHandler] {
        [
            ConnectionCapHandler(limit: connectionsPerAddress, proxies: proxies, proxiesOnly: proxiesOnly, addresses: addresses),
            RequestDeadlineHandler(deadline: requestDeadline, minimumRate: minimumBodyRate, grace: rateGrace),
            ClosingNotice(),
        ]
    }
}

/// Open connections per client address on one listener.
final class ConnectionsByAddress: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    /// Counts one more for `address`; false (and not counted) when it already has `limit`.
    func open(_ address: String, limit: Int) -> Bool {
        counts.withLock { counts in
            let current = counts[address, default: 0]
            guard current < limit else { return false }
            counts[address] = current + 1
            return true
        }
    }

    func close(_ address: String) {
        counts.withLock { counts in
            let remaining = counts[address, default: 1] - 1
            counts[address] = remaining > 0 ? remaining : nil
        }
    }

    func count(_ address: String) -> Int { counts.withLock { $0[address, default: 0] } }
}

/// Closes a connection at once when its client address already holds its share, or, on a
/// listener only the proxies may reach, when it is not from one of them.
final class ConnectionCapHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let limit: Int
    private let proxies: TrustedProxies
    private let proxiesOnly: Bool
    private let addresses: ConnectionsByAddress
    private var counted: String?

    init(limit: Int, proxies: TrustedProxies, proxiesOnly: Bool, addresses: ConnectionsByAddress) {
        self.limit = limit
        self.proxies = proxies
        self.proxiesOnly = proxiesOnly
        self.addresses = addresses
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { _ = admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        // A connection closed here is not announced to the handlers after this one.
        if admit(context) { context.fireChannelActive() }
    }

    /// Whether the connection may stay; closes it when not.
    private func admit(_ context: ChannelHandlerContext) -> Bool {
        guard counted == nil else { return true }
        let canonical = context.remoteAddress?.ipAddress.flatMap(TrustedProxies.canonical)
        // Loopback traffic crosses no network: a health check inside the container is let in.
        if proxiesOnly, !(canonical.map { proxies.contains($0) || Loopback.isHost($0) } ?? false) {
            context.close(promise: nil)
            return false
        }
        guard let canonical, !proxies.contains(canonical), let client = TrustedProxies.client(canonical) else { return true }
        if addresses.open(client, limit: limit) {
            counted = client
            return true
        }
        context.close(promise: nil)
        return false
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { release() }

    private func release() {
        if let counted { addresses.close(counted) }
        counted = nil
    }
}

/// Closes a connection whose request body has not fully arrived within the deadline of its
/// first part, or trickles in below the minimum rate once the grace has passed. Only the arrival of the request
/// is timed: the answer may take as long as the work does.
final class RequestDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let deadline: TimeAmount
    private let minimumRate: Int
    private let grace: TimeAmount
    private var timers: [Scheduled<Void>] = []
    private var bodyBytes = 0

    init(deadline: TimeAmount, minimumRate: Int, grace: TimeAmount) {
        self.deadline = deadline
        self.minimumRate = minimumRate
        self.grace = grace
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            // A head is one part: Hummingbird's idle timeout covers a slow one. Timers start
            // with the body, so a request without one (most) costs none.
            cancelTimers()
            bodyBytes = 0
        case .body(let buffer):
            if timers.isEmpty && bodyBytes == 0 { startTimers(context) }
            bodyBytes += buffer.readableBytes
        case .end:
            cancelTimers()
        }
        context.fireChannelRead(data)
    }

    private func startTimers(_ context: ChannelHandlerContext) {
        let loop = context.eventLoop
        let channel = context.channel
        timers.append(loop.scheduleTask(in: deadline) { channel.close(promise: nil) })
        if grace < deadline {
            let required = Int(Int64(minimumRate) * grace.nanoseconds / 1_000_000_000)
            let handler = NIOLoopBound(self, eventLoop: loop)
            timers.append(
                loop.scheduleTask(in: grace) {
                    guard handler.value.bodyBytes < required else { return }
                    channel.close(promise: nil)
                })
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimers()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { cancelTimers() }

    private func cancelTimers() {
        for timer in timers { timer.cancel() }
        timers.removeAll()
    }
}

/// Ends a connection without losing a request when the server shuts down. Hummingbird's
/// graceful shutdown lets a request under way finish and then closes its connection, and closes
/// an idle one at once; a keep-alive client that sent its next request just then lost it to the
/// close (issue 51's F7: under load, about one request per connection failed at every SIGTERM).
/// Here a response written after the shutdown began says `Connection: close` (RFC 9112 §9.6),
/// so the client opens a new connection instead, which the closed listener refuses cleanly (or
/// another instance takes); and an idle connection is given ``idleGrace`` to send a request
/// already on its way, which is answered, before it is closed.
final class ClosingNotice: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// A client in a request loop sends its next request within a round trip of the last answer.
    static let idleGrace: TimeAmount = .milliseconds(250)

    private enum State {
        case serving
        /// Shutting down with no request under way: closed when the grace ends.
        case closingIdle(Scheduled<Void>)
        /// Shutting down; the connection closes after the response under way.
        case closingAfterResponse
    }

    private var state = State.serving
    /// Requests read whose response has not ended.
    private var underWay = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        underWay += 1
        context.fireChannelRead(data)
        if case .closingIdle(let timer) = state {
            // The request that was on its way: answered, and then the connection closes.
            timer.cancel()
            state = .closingAfterResponse
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, case .serving = state else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        guard underWay == 0 else {
            state = .closingAfterResponse
            context.fireUserInboundEventTriggered(event)
            return
        }
        let channel = context.channel
        state = .closingIdle(context.eventLoop.scheduleTask(in: Self.idleGrace) { channel.close(promise: nil) })
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.kind != .informational:
            if case .serving = state {
                context.write(data, promise: promise)
            } else {
                head.headerFields[.connection] = "close"
                context.write(wrapOutboundOut(.head(head)), promise: promise)
            }
        case .end:
            underWay = max(0, underWay - 1)
            context.write(data, promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .closingIdle(let timer) = state { timer.cancel() }
        context.fireChannelInactive()
    }
}
