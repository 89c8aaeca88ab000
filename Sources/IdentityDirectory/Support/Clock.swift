import Foundation
import Synchronization

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

/// The wall clock plus an offset the test-control surface moves forward (`POST /dev/clock`,
/// SPEC §2.14), so a test can pass a token's, a code's or a session's lifetime without sleeping.
/// One instance is shared by everything in the process that tells time for the protocol: the
/// issuer, the Task API's bearer validator, sessions, codes and MFA "remember this browser".
/// Only forward: a protocol clock that runs backwards would un-expire what was spent.
public final class AdjustableClock: IdentityClock {
    /// Milliseconds ahead of the wall clock.
    private let offset = Atomic<Int64>(0)
    /// One move at most ten years; the total at most a hundred (dates stay far inside `Int64` seconds).
    public static let maximumStep: Int64 = 10 * 366 * 86_400
    public static let maximumOffset: Int64 = 100 * 366 * 86_400

    public enum Refusal: Error, Equatable, CustomStringConvertible {
        case backwards
        case tooFar

        public var description: String {
            switch self {
            case .backwards: "The clock only moves forward: advanceSeconds must be 0 or more (DELETE /dev/clock goes back to the wall clock)."
            case .tooFar: "advanceSeconds moves the clock at most \(AdjustableClock.maximumStep) seconds at once, and \(AdjustableClock.maximumOffset) in all."
            }
        }
    }

    public init() {}

    public var now: Date { Date().addingTimeInterval(Double(offset.load(ordering: .relaxed)) / 1000) }

    /// How far ahead of the wall clock it is, in whole seconds.
    public var offsetSeconds: Int64 { offset.load(ordering: .relaxed) / 1000 }

    /// Moves the clock `seconds` forward; a refused move changes nothing.
    public func advance(bySeconds seconds: Int64) throws(Refusal) {
        guard seconds >= 0 else { throw .backwards }
        guard seconds <= Self.maximumStep else { throw .tooFar }
        var current = offset.load(ordering: .relaxed)
        while true {
            let next = current + seconds * 1000
            guard next / 1000 <= Self.maximumOffset else { throw .tooFar }
            let (done, original) = offset.compareExchange(expected: current, desired: next, ordering: .relaxed)
            if done { return }
            current = original
        }
    }

    /// Back to the wall clock.
    public func reset() { offset.store(0, ordering: .relaxed) }
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
