import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

public enum SilentPort {
    /// A loopback port whose connections complete and are never answered (a listener that never
    /// accepts): PostgreSQL behind a dropped network. Closed when `body` returns.
    public static func with<T>(_ body: (Int) async throws -> T) async throws -> T {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        try #require(bound && listen(descriptor, 64) == 0)
        return try await body(Int(UInt16(bigEndian: address.sin_port)))
    }
}
