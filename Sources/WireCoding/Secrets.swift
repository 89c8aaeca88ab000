import Foundation

/// Random values and comparisons for everything secret the system hands out or checks: codes,
/// refresh tokens, session ids, CSRF tokens, PKCE verifiers, `state` and `nonce`. One place for
/// the identity service, the SDK and the web app.
public enum Secrets {
    /// `byteCount` random bytes from the system CSPRNG (getrandom(2) on Linux, arc4random on
    /// Apple platforms), base64url without padding.
    public static func randomToken(byteCount: Int = 32) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Base64URL.encode(Data(bytes))
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
