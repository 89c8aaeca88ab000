import Crypto
import Foundation
import TodoModels

/// Random values and one-way hashes for everything secret the service hands out: codes,
/// refresh tokens, session ids, CSRF tokens. Only hashes are stored, so a database leak does not
/// leak usable credentials (RFC 9700 §4.14, OWASP ASVS V3).
enum Secrets {
    /// `byteCount` random bytes from the system CSPRNG, base64url without padding.
    static func randomToken(byteCount: Int = 32) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Base64URL.encode(Data(bytes))
    }

    /// Lowercase hex SHA-256; the lookup key for a stored secret.
    static func sha256Hex(_ value: String) -> String {
        Hex.lowercase(SHA256.hash(data: Data(value.utf8)))
    }

    /// Compares two secrets in time independent of where they first differ.
    static func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
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
