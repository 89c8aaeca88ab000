import Dispatch
import NIOCore
import NIOPosix

/// NIO's singleton event loops, handed out in turn for database connections.
///
/// `MultiThreadedEventLoopGroup.any()` prefers the calling thread's own loop. Once Swift
/// concurrency runs on those loops (`todo-server` installs them as its global executor), every
/// connection a pool opens from a task lands on the loop that task happened to run on, and each
/// request resumes there after its query: the PostgreSQL list's profile had one loop 76% busy
/// and the other 17% (issue 13). Here `any()` is `next()`: round robin.
final class EventLoopSpread: EventLoopGroup, Sendable {
    static let shared = EventLoopSpread()

    private let base = MultiThreadedEventLoopGroup.singleton

    func next() -> any EventLoop { base.next() }
    func any() -> any EventLoop { base.next() }
    func makeIterator() -> EventLoopIterator { base.makeIterator() }

    func shutdownGracefully(queue: DispatchQueue, _ callback: @escaping @Sendable ((any Error)?) -> Void) {
        base.shutdownGracefully(queue: queue, callback)
    }

    func _preconditionSafeToSyncShutdown(file: StaticString, line: UInt) {
        base._preconditionSafeToSyncShutdown(file: file, line: line)
    }
}
