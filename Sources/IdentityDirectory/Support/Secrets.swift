import Crypto
import Foundation
import WireCoding

/// Only hashes of the secrets the service hands out are stored, so a database leak does not
/// leak usable credentials (RFC 9700 §4.14, OWASP ASVS V3).
extension Secrets {
    /// Lowercase hex SHA-256; the lookup key for a stored secret.
    package static func sha256Hex(_ value: String) -> String {
        Hex.lowercase(SHA256.hash(data: Data(value.utf8)))
    }
}
