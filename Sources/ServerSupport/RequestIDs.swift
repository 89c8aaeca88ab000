import Synchronization

/// Ids for requests: UUID-shaped (version 4 layout, lowercase), not repeating in practice
/// within a process, unrelated across processes. They name a request in logs, error bodies and `x-ms-request-id`;
/// they are not secrets, so they need not cost a CSPRNG call (`getrandom(2)`) per request, which
/// was 1% of the list route's CPU (issue 13). A counter, started at a random point, goes through
/// SplitMix64's finaliser (a bijection on 64 bits) keyed by per-process random values.
public enum RequestIDs {
    private static let counter = Atomic<UInt64>(UInt64.random(in: .min ... .max))
    private static let keys = (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max))

    /// The next id.
    public static func next() -> String {
        let count = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let high = mix(count ^ keys.0)
        let low = mix(count &+ keys.1) & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000  // RFC 9562 variant
        let versioned = high & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000  // version 4
        var text = [UInt8]()
        text.reserveCapacity(36)
        let digits = Array("0123456789abcdef".utf8)
        for (index, shift) in stride(from: 60, through: 0, by: -4).enumerated() {
            if index == 8 || index == 12 { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(versioned >> UInt64(shift) & 0xF)])
        }
        for (index, shift) in stride(from: 60, through: 0, by: -4).enumerated() {
            if index == 0 || index == 4 { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(low >> UInt64(shift) & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// SplitMix64's output function (Steele, Lea, Flood 2014): invertible, well mixed.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
