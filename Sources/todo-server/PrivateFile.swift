import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Files only their owner may read, from the first byte: a backup or an export holds sealed
/// secrets and account data. Foundation's `createFile(atPath:contents:attributes:)` writes with
/// the default mode and restricts it afterwards, so another user could open it in between (the
/// second outside attack's F-8). Written to a new file created 0600 beside the target, then
/// renamed over it, so no one holding the old file open reads the new contents either.
enum PrivateFile {
    static func write(_ data: Data, to path: String) throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)").path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CommandFailure("cannot write \(path): \(String(cString: strerror(errno)))") }
        var written = 0
        let failure: String? = data.withUnsafeBytes { bytes -> String? in
            while written < bytes.count {
                let count = Foundation.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                if count < 0 {
                    if errno == EINTR { continue }
                    return String(cString: strerror(errno))
                }
                written += count
            }
            return fsync(descriptor) == 0 ? nil : String(cString: strerror(errno))
        }
        close(descriptor)
        if let failure {
            unlink(temporary)
            throw CommandFailure("cannot write \(path): \(failure)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CommandFailure("cannot write \(path): \(reason)")
        }
    }
}
