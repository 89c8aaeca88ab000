import Foundation

/// Random values and comparisons for everything secret the system hands out or checks: codes,
/// refresh tokens, session ids, CSRF tokens, PKCE verifiers, `state` and `nonce`. One place for
/// the identity service, the SDK and the web app.
public enum Secrets {
    /// `byteCount` random bytes from the system CSPRNG (getrandom(2) on Linux, arc4random on
    /// Apple platforms), base64url without padding.
    public static func randomToken(byteCount: Int = 32) -> String {
        Base64URL.encode(Data(randomBytes(byteCount)))
    }

    /// `count` bytes from the system CSPRNG, eight per call of the generator (one `getrandom`
    /// each), not one call per byte.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < count {
                let word = generator.next()
                withUnsafeBytes(of: word) { wordBytes in
                    let n = min(8, count - offset)
                    buffer.baseAddress!.advanced(by: offset).copyMemory(from: wordBytes.baseAddress!, byteCount: n)
                    offset += n
                }
            }
        }
        return bytes
    }

    /// A random (version 4) UUID from the system CSPRNG, in lowercase text (RFC 9562 §5.4).
    /// Foundation's `UUID()` opens and reads `/dev/urandom` for each one on Linux; request ids,
    /// correlation ids and task ids are made for every request (issue 13's profile).
    public static func randomUUIDString() -> String {
        var generator = SystemRandomNumberGenerator()
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { bytes in
            withUnsafeBytes(of: (generator.next(), generator.next())) { random in bytes.copyMemory(from: random) }
            bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
            bytes[8] = bytes[8] & 0x3F | 0x80  // the RFC 9562 variant
        }
        var text: [UInt8] = []
        text.reserveCapacity(36)
        UUIDText.appendLowercase(UUID(uuid: uuid), to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Compares two secrets in time independent of where they first differ.
    public static func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
        let a = Array(lhs.utf8)
        let b = Array(rhs.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0
    }
}
