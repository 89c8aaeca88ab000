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

extension UUID {
    /// A UUID every instance derives alike from `name`: version 8, a name-based id of our own
    /// scheme (RFC 9562 §5.8), from SHA-256. For ids of things that exist by derivation (a
    /// tenant's directory role, an app's service principal, an exposed scope's default id).
    package init(nameBased name: String) {
        var bytes = Array(SHA256.hash(data: Data(name.utf8)).prefix(16))
        bytes[6] = bytes[6] & 0x0F | 0x80
        bytes[8] = bytes[8] & 0x3F | 0x80
        self.init(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11],
                bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}
