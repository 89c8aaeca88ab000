import Foundation

/// base64url without padding (RFC 4648 §5), the encoding of JWTs, PKCE and `client_info`.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Straight from bytes: every token is encoded this way, so it is on the hot path.
    public static func encode<Bytes: Sequence>(_ data: Bytes) -> String where Bytes.Element == UInt8 {
        let bytes = Array(data)
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(chunk >> 18 & 63)])
            out.append(alphabet[Int(chunk >> 12 & 63)])
            out.append(alphabet[Int(chunk >> 6 & 63)])
            out.append(alphabet[Int(chunk & 63)])
            index += 3
        }
        let remaining = bytes.count - index
        if remaining > 0 {
            let chunk = UInt32(bytes[index]) << 16 | (remaining == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            out.append(alphabet[Int(chunk >> 18 & 63)])
            out.append(alphabet[Int(chunk >> 12 & 63)])
            if remaining == 2 { out.append(alphabet[Int(chunk >> 6 & 63)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func encode(_ string: String) -> String { encode(string.utf8) }

    public static func decode(_ string: String) -> Data? {
        var base64 = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.contains("=") else { return nil }
        let remainder = base64.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { base64 += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: base64)
    }
}

/// Lowercase hexadecimal, for digests used as lookup keys (hashed secrets, cached tokens).
public enum Hex {
    @usableFromInline static let digits = Array("0123456789abcdef".utf8)

    /// Inlinable so callers in other modules get a specialised loop (it runs per request for
    /// token-cache keys).
    @inlinable
    public static func lowercase<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The value of one ASCII hex digit, either case.
    @inlinable
    static func value(_ ascii: UInt8) -> UInt8? {
        switch ascii {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): ascii - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): ascii - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): ascii - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The 8-4-4-4-12 text form of UUIDs (RFC 9562 §4), without Foundation's `sscanf`-based parser:
/// task ids are parsed and written for every row of every list.
public enum UUIDText {
    /// Parses either case; `nil` for anything but exactly 36 characters in the 8-4-4-4-12 shape.
    public static func parse(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { parse(utf8: $0) }
    }

    public static func parse(_ text: Substring) -> UUID? { parse(String(text)) }

    static func parse(utf8: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard utf8.count == 36, utf8[8] == 0x2D, utf8[13] == 0x2D, utf8[18] == 0x2D, utf8[23] == 0x2D else { return nil }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let complete = withUnsafeMutableBytes(of: &uuid) { bytes -> Bool in
            var position = 0
            for index in 0..<16 {
                if position == 8 || position == 13 || position == 18 || position == 23 { position += 1 }
                guard let high = Hex.value(utf8[position]), let low = Hex.value(utf8[position + 1]) else { return false }
                bytes[index] = high << 4 | low
                position += 2
            }
            return true
        }
        return complete ? UUID(uuid: uuid) : nil
    }

    /// Appends the lowercase form (the one this system stores and sends).
    public static func appendLowercase(_ id: UUID, to out: inout [UInt8]) {
        withUnsafeBytes(of: id.uuid) { bytes in
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
                out.append(Hex.digits[Int(byte >> 4)])
                out.append(Hex.digits[Int(byte & 0x0f)])
            }
        }
    }
}

/// RFC 3339 timestamps in UTC to the second (`2026-11-24T04:42:52Z`), the form
/// `JSONEncoder.DateEncodingStrategy.iso8601` writes, appended as bytes: task JSON writes one
/// per date of every listed task and the log one per line. `gmtime_r` reads no time-zone file.
public enum RFC3339 {
    public static func appendUTC(secondsSince1970 value: Int, to out: inout [UInt8]) {
        var seconds = time_t(value)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) {
            out.append(UInt8(ascii: "0") + UInt8(value / 10))
            out.append(UInt8(ascii: "0") + UInt8(value % 10))
        }
        let year = Int32(parts.tm_year) + 1900
        two(year / 100)
        two(year % 100)
        out.append(UInt8(ascii: "-"))
        two(parts.tm_mon + 1)
        out.append(UInt8(ascii: "-"))
        two(parts.tm_mday)
        out.append(UInt8(ascii: "T"))
        two(parts.tm_hour)
        out.append(UInt8(ascii: ":"))
        two(parts.tm_min)
        out.append(UInt8(ascii: ":"))
        two(parts.tm_sec)
        out.append(UInt8(ascii: "Z"))
    }
}
