import Foundation
import Synchronization
import WireCoding

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Ids for requests: random version 4 UUIDs, lowercase. They name a request in logs, error
/// bodies and `x-ms-request-id`. Foundation's `UUID()` opened and read `/dev/urandom` for each
/// (1% of the list route's CPU, issue 13); here the bytes come from the system CSPRNG 4 KiB at a
/// time (a call per 256 ids). Random rather than counted, so ids reveal nothing about
/// how many requests the server handles.
public enum RequestIDs {
    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: 4096)
        var offset = 4096
    }

    private static let pool = Mutex(Pool())

    /// The next id.
    public static func next() -> String {
        var id = pool.withLock { pool -> [UInt8] in
            if pool.offset + 16 > pool.bytes.count {
                pool.bytes.withUnsafeMutableBytes { fill($0) }
                pool.offset = 0
            }
            defer { pool.offset += 16 }
            return Array(pool.bytes[pool.offset..<pool.offset + 16])
        }
        id[6] = id[6] & 0x0F | 0x40  // version 4
        id[8] = id[8] & 0x3F | 0x80  // the RFC 9562 variant
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { $0.copyBytes(from: id) }
        var text = [UInt8]()
        text.reserveCapacity(36)
        UUIDText.appendLowercase(UUID(uuid: uuid), to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// The buffer from the CSPRNG: `arc4random_buf` (glibc 2.36 and later draw it from
    /// `getrandom(2)`; Apple platforms have always had it).
    private static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        arc4random_buf(buffer.baseAddress!, buffer.count)
    }
}
