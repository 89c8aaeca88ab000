import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Ports for the systems this process starts: each is handed out once, comes from below Linux's
/// ephemeral range (32768–60999, so no outgoing connection can be holding it), and is checked
/// free by binding it. A port picked by binding port 0 could be reused by another test's
/// outgoing connection, or handed to a second system, before the first one listens on it.
package enum LoopbackPorts {
    private static let next = Atomic<Int>(Int.random(in: 0..<12_000))

    package static func reserve() throws -> Int {
        for _ in 0..<500 {
            // 20000–31999, round and round: a long test process does not run out.
            let port = 20_000 + next.add(1, ordering: .relaxed).newValue % 12_000
            if canBind(port) { return port }
        }
        throw TodoB2CTestError(code: "no_free_port", message: "No free loopback port was found below 32000.")
    }

    private static func canBind(_ port: Int) -> Bool {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
