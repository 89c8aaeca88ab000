import Foundation

/// The time source of the identity service. Expiry, rotation and lockout read the time only
/// through this, so tests move time forward instead of sleeping (ARCHITECTURE.md).
public protocol IdentityClock: Sendable {
    var now: Date { get }
}

/// The wall clock.
public struct SystemClock: IdentityClock {
    public init() {}
    public var now: Date { Date() }
}

/// A clock that tests set and advance by hand.
final class ManualClock: IdentityClock, @unchecked Sendable {
    // @unchecked: `current` is only touched while holding `lock`.
    private let lock = NSLock()
    private var current: Date

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = start }

    public var now: Date { lock.withLock { current } }

    public func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
}

extension Date {
    /// Whole seconds since 1970, the unit of every JWT time claim and every stored timestamp.
    package var epochSeconds: Int64 { Int64(timeIntervalSince1970.rounded(.down)) }
    package var epochMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }
}
