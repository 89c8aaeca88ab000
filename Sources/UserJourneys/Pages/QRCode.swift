import Foundation

/// A QR code (ISO/IEC 18004) of a short text in byte mode, versions 1 to 10 at error
/// correction level M, drawn as an inline SVG: the TOTP enrolment page shows the `otpauth://`
/// URI this way so an authenticator app can scan it (SPEC §2.11). No Swift QR library is
/// available to this project, so the encoder is written here from the standard, and the
/// interop suite reads what it draws with a decoder nobody here wrote (zxing-cpp).
struct QRCode: Sendable {
    /// The modules, row by row; true is dark.
    private(set) var modules: [[Bool]]
    let version: Int
    var size: Int { modules.count }

    enum EncodingError: Error { case tooLong(Int) }

    /// Level M: error-correction codewords per block, and the number of blocks, by version
    /// (ISO/IEC 18004 Table 9).
    private static let eccPerBlock = [0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26]
    private static let blockCount = [0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5]
    /// Level M's two format bits, and the largest version encoded.
    private static let levelBits = 0b00
    static let maximumVersion = 10

    init(text: String) throws {
        let bytes = Array(text.utf8)
        // The smallest version whose data capacity holds mode (4 bits), count and the bytes.
        guard
            let version = (1...Self.maximumVersion).first(where: { version in
                4 + (version < 10 ? 8 : 16) + bytes.count * 8 <= Self.dataCodewords(version) * 8
            })
        else { throw EncodingError.tooLong(bytes.count) }
        self.version = version
        let size = version * 4 + 17
        modules = Array(repeating: Array(repeating: false, count: size), count: size)
        var function = modules
        Self.drawFunctionPatterns(version: version, modules: &modules, function: &function)
        let codewords = Self.interleavedCodewords(Self.dataCodewords(for: bytes, version: version), version: version)
        Self.placeData(codewords, modules: &modules, function: function)
        // The mask with the lowest penalty (ISO/IEC 18004 §7.8.3), then its format bits.
        var best: (penalty: Int, modules: [[Bool]])?
        for mask in 0..<8 {
            var candidate = modules
            Self.apply(mask: mask, to: &candidate, function: function)
            Self.drawFormatBits(mask: mask, modules: &candidate)
            let penalty = Self.penalty(candidate)
            if best == nil || penalty < best!.penalty { best = (penalty, candidate) }
        }
        modules = best!.modules
    }

    /// An SVG of the code with a four-module quiet zone, one path of unit squares.
    func svg(pixelsPerModule: Int = 5) -> String {
        let full = size + 8
        var path = ""
        for (y, row) in modules.enumerated() {
            for (x, dark) in row.enumerated() where dark { path += "M\(x + 4),\(y + 4)h1v1h-1z" }
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(full) \(full)" width="\(full * pixelsPerModule)" \
            height="\(full * pixelsPerModule)" shape-rendering="crispEdges" role="img" aria-label="QR code">\
            <rect width="100%" height="100%" fill="#fff"/><path d="\(path)" fill="#000"/></svg>
            """
    }

    // MARK: Capacity

    /// Modules available for codewords: the whole symbol less the function patterns.
    private static func rawDataModules(_ version: Int) -> Int {
        var result = (16 * version + 128) * version + 64
        if version >= 2 {
            let alignments = version / 7 + 2
            result -= (25 * alignments - 10) * alignments - 55
            if version >= 7 { result -= 36 }
        }
        return result
    }

    private static func dataCodewords(_ version: Int) -> Int {
        rawDataModules(version) / 8 - eccPerBlock[version] * blockCount[version]
    }

    // MARK: Codewords

    /// Mode indicator, character count, the bytes, the terminator and the pad codewords.
    private static func dataCodewords(for bytes: [UInt8], version: Int) -> [UInt8] {
        var bits: [Bool] = []
        func append(_ value: Int, _ count: Int) {
            for shift in stride(from: count - 1, through: 0, by: -1) { bits.append((value >> shift) & 1 == 1) }
        }
        append(0b0100, 4)
        append(bytes.count, version < 10 ? 8 : 16)
        for byte in bytes { append(Int(byte), 8) }
        let capacity = dataCodewords(version) * 8
        append(0, min(4, capacity - bits.count))
        append(0, (8 - bits.count % 8) % 8)
        var codewords = stride(from: 0, to: bits.count, by: 8).map { start in
            bits[start..<start + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) }
        }
        var pad: UInt8 = 0xEC
        while codewords.count < capacity / 8 {
            codewords.append(pad)
            pad = pad == 0xEC ? 0x11 : 0xEC
        }
        return codewords
    }

    /// Splits the data into blocks, adds each block's Reed-Solomon codewords, and interleaves.
    private static func interleavedCodewords(_ data: [UInt8], version: Int) -> [UInt8] {
        let blocks = blockCount[version]
        let ecc = eccPerBlock[version]
        let raw = rawDataModules(version) / 8
        let shortBlocks = blocks - raw % blocks
        let shortLength = raw / blocks - ecc
        let divisor = reedSolomonDivisor(degree: ecc)
        var dataBlocks: [[UInt8]] = []
        var eccBlocks: [[UInt8]] = []
        var offset = 0
        for index in 0..<blocks {
            let length = shortLength + (index < shortBlocks ? 0 : 1)
            let block = Array(data[offset..<offset + length])
            offset += length
            dataBlocks.append(block)
            eccBlocks.append(reedSolomonRemainder(block, divisor: divisor))
        }
        var result: [UInt8] = []
        for column in 0...shortLength {
            for block in dataBlocks where column < block.count { result.append(block[column]) }
        }
        for column in 0..<ecc {
            for block in eccBlocks { result.append(block[column]) }
        }
        return result
    }

    /// GF(2^8) multiplication modulo x^8 + x^4 + x^3 + x^2 + 1 (0x11D).
    private static func multiply(_ x: UInt8, _ y: UInt8) -> UInt8 {
        var result = 0
        for bit in stride(from: 7, through: 0, by: -1) {
            result = (result << 1) ^ ((result >> 7) * 0x11D)
            result ^= ((Int(y) >> bit) & 1) * Int(x)
        }
        return UInt8(result)
    }

    /// The generator polynomial (x − α⁰)(x − α¹)…(x − α^(degree−1)), leading term dropped.
    private static func reedSolomonDivisor(degree: Int) -> [UInt8] {
        var result = Array(repeating: UInt8(0), count: degree)
        result[degree - 1] = 1
        var root: UInt8 = 1
        for _ in 0..<degree {
            for index in 0..<degree {
                result[index] = multiply(result[index], root)
                if index + 1 < degree { result[index] ^= result[index + 1] }
            }
            root = multiply(root, 0x02)
        }
        return result
    }

    private static func reedSolomonRemainder(_ data: [UInt8], divisor: [UInt8]) -> [UInt8] {
        var result = Array(repeating: UInt8(0), count: divisor.count)
        for byte in data {
            let factor = byte ^ result.removeFirst()
            result.append(0)
            for index in 0..<result.count { result[index] ^= multiply(divisor[index], factor) }
        }
        return result
    }

    // MARK: Function patterns

    private static func alignmentPositions(_ version: Int) -> [Int] {
        guard version >= 2 else { return [] }
        let count = version / 7 + 2
        let step = (version * 4 + count * 2 + 1) / (count * 2 - 2) * 2
        let last = version * 4 + 17 - 7
        return [6] + (0..<(count - 1)).map { last - $0 * step }.reversed()
    }

    private static func drawFunctionPatterns(version: Int, modules: inout [[Bool]], function: inout [[Bool]]) {
        let size = modules.count
        func set(_ x: Int, _ y: Int, _ dark: Bool) {
            modules[y][x] = dark
            function[y][x] = true
        }
        // Timing patterns.
        for index in 0..<size {
            set(6, index, index % 2 == 0)
            set(index, 6, index % 2 == 0)
        }
        // Finder patterns with their separators, at three corners.
        for (cx, cy) in [(3, 3), (size - 4, 3), (3, size - 4)] {
            for dy in -4...4 {
                for dx in -4...4 {
                    let (x, y) = (cx + dx, cy + dy)
                    guard (0..<size).contains(x), (0..<size).contains(y) else { continue }
                    let distance = max(abs(dx), abs(dy))
                    set(x, y, distance != 2 && distance != 4)
                }
            }
        }
        // Alignment patterns, except where they would overlap a finder.
        let positions = alignmentPositions(version)
        for (i, ay) in positions.enumerated() {
            for (j, ax) in positions.enumerated() {
                let last = positions.count - 1
                if (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0) { continue }
                for dy in -2...2 {
                    for dx in -2...2 { set(ax + dx, ay + dy, max(abs(dx), abs(dy)) != 1) }
                }
            }
        }
        // Reserve the format areas (drawn per mask later) and the dark module.
        drawFormatBits(mask: 0, modules: &modules, function: &function)
        // Version information from version 7: 6 bits and a BCH(18, 6) remainder.
        if version >= 7 {
            var remainder = version
            for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
            let bits = version << 12 | remainder
            for index in 0..<18 {
                let dark = (bits >> index) & 1 == 1
                let (a, b) = (size - 11 + index % 3, index / 3)
                set(a, b, dark)
                set(b, a, dark)
            }
        }
    }

    private static func drawFormatBits(mask: Int, modules: inout [[Bool]]) {
        var function = modules
        drawFormatBits(mask: mask, modules: &modules, function: &function)
    }

    /// The 15 format bits (level and mask with a BCH(15, 5) remainder, XOR 0x5412), twice.
    private static func drawFormatBits(mask: Int, modules: inout [[Bool]], function: inout [[Bool]]) {
        let size = modules.count
        func set(_ x: Int, _ y: Int, _ dark: Bool) {
            modules[y][x] = dark
            function[y][x] = true
        }
        let data = levelBits << 3 | mask
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        let bits = (data << 10 | remainder) ^ 0x5412
        func bit(_ index: Int) -> Bool { (bits >> index) & 1 == 1 }
        // Around the top-left finder.
        for index in 0...5 { set(8, index, bit(index)) }
        set(8, 7, bit(6))
        set(8, 8, bit(7))
        set(7, 8, bit(8))
        for index in 9..<15 { set(14 - index, 8, bit(index)) }
        // Split between the top-right and bottom-left finders.
        for index in 0..<8 { set(size - 1 - index, 8, bit(index)) }
        for index in 8..<15 { set(8, size - 15 + index, bit(index)) }
        set(8, size - 8, true)  // the dark module
    }

    // MARK: Data and masks

    /// Codeword bits in the zig-zag order: column pairs from the right, up then down,
    /// skipping the vertical timing column.
    private static func placeData(_ codewords: [UInt8], modules: inout [[Bool]], function: [[Bool]]) {
        let size = modules.count
        var bitIndex = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            for vertical in 0..<size {
                for offset in 0..<2 {
                    let x = right - offset
                    let upward = (right + 1) & 2 == 0
                    let y = upward ? size - 1 - vertical : vertical
                    guard !function[y][x] else { continue }
                    if bitIndex < codewords.count * 8 {
                        modules[y][x] = (codewords[bitIndex >> 3] >> (7 - (bitIndex & 7))) & 1 == 1
                        bitIndex += 1
                    }
                }
            }
            right -= 2
        }
    }

    private static func apply(mask: Int, to modules: inout [[Bool]], function: [[Bool]]) {
        for y in 0..<modules.count {
            for x in 0..<modules.count where !function[y][x] {
                let flip: Bool
                switch mask {
                case 0: flip = (x + y) % 2 == 0
                case 1: flip = y % 2 == 0
                case 2: flip = x % 3 == 0
                case 3: flip = (x + y) % 3 == 0
                case 4: flip = (x / 3 + y / 2) % 2 == 0
                case 5: flip = x * y % 2 + x * y % 3 == 0
                case 6: flip = (x * y % 2 + x * y % 3) % 2 == 0
                default: flip = ((x + y) % 2 + x * y % 3) % 2 == 0
                }
                if flip { modules[y][x].toggle() }
            }
        }
    }

    /// The four penalty rules of ISO/IEC 18004 §7.8.3.1: runs of five or more, 2×2 blocks,
    /// finder-like sequences, and the balance of dark and light.
    static func penalty(_ modules: [[Bool]]) -> Int {
        let size = modules.count
        var total = 0
        let finderLike: [Bool] = [true, false, true, true, true, false, true]
        func lines() -> [[Bool]] {
            modules + (0..<size).map { x in (0..<size).map { y in modules[y][x] } }
        }
        for line in lines() {
            var run = 1
            for index in 1..<size {
                if line[index] == line[index - 1] {
                    run += 1
                } else {
                    if run >= 5 { total += run - 2 }
                    run = 1
                }
            }
            if run >= 5 { total += run - 2 }
            // 1:1:3:1:1 with four light modules on either side (or the edge).
            for start in 0...(size - 7) where Array(line[start..<start + 7]) == finderLike {
                let before = (max(0, start - 4)..<start).allSatisfy { !line[$0] }
                let after = (start + 7..<min(size, start + 11)).allSatisfy { !line[$0] }
                if before || after { total += 40 }
            }
        }
        for y in 0..<(size - 1) {
            for x in 0..<(size - 1) {
                let color = modules[y][x]
                if modules[y][x + 1] == color && modules[y + 1][x] == color && modules[y + 1][x + 1] == color { total += 3 }
            }
        }
        let dark = modules.reduce(0) { $0 + $1.filter { $0 }.count }
        let percent = dark * 100 / (size * size)
        total += abs(percent - 50) / 5 * 10
        return total
    }
}
