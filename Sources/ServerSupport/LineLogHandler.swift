import Dispatch
import Logging
import Synchronization
import WireCoding

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The servers' log handler: one event, one line, one `write(2)` to standard error.
///
/// It replaces swift-log's `StreamLogHandler` for `serve` because the access log (one line per
/// request, on by default) cost 14–19% of the bare route's rate with it (issue 13): per line it
/// called `localtime_r` (a `stat` of `/etc/localtime` each time), merged and sorted metadata
/// dictionaries into a new string, and re-rendered the logger's metadata on every change. Here the
/// time is UTC, formatted once per second; the line is built in one byte buffer; metadata is
/// rendered when a line is written, not when it is set.
///
/// Lines are written in batches (``LogOutput``): within 20 ms, and at once for a warning or worse.
///
/// Layout: `2026-11-24T04:42:52Z info todo-server: request method=GET path=/ status=200`, the
/// metadata sorted by key. Control characters in the message or a value are escaped (`\n`,
/// `\u{1B}`), so one event stays one line whatever a client managed to put in a value.
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let output: LogOutput

    public init(label: String, output: LogOutput = .standardError, logLevel: Logger.Level = .info) {
        self.label = label
        self.output = output
        self.logLevel = logLevel
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [(key: String, value: Logger.Metadata.Value)] = []
        let provided = metadataProvider?.get() ?? [:]
        let own = event.metadata ?? [:]
        fields.reserveCapacity(metadata.count + provided.count + own.count)
        // The event's own metadata wins over the provider's, which wins over the logger's.
        for (key, value) in metadata where own[key] == nil && provided[key] == nil { fields.append((key, value)) }
        for (key, value) in provided where own[key] == nil { fields.append((key, value)) }
        for (key, value) in own { fields.append((key, value)) }
        fields.sort { $0.key < $1.key }

        var line: [UInt8] = []
        line.reserveCapacity(160)
        output.appendTimestamp(to: &line)
        line.append(0x20)
        line.append(contentsOf: event.level.rawValue.utf8)
        line.append(0x20)
        Self.appendEscaped(label, to: &line)
        line.append(contentsOf: ": ".utf8)
        Self.appendEscaped(event.message.description, to: &line)
        for field in fields {
            line.append(0x20)
            Self.appendEscaped(field.key, to: &line)
            line.append(UInt8(ascii: "="))
            Self.appendValue(field.value.description, to: &line)
        }
        if let error = event.error {
            line.append(contentsOf: " error=".utf8)
            Self.appendValue(String(describing: error), to: &line)
        }
        line.append(0x0A)
        output.write(line, urgent: event.level >= .warning)
    }

    /// A metadata value, quoted (logfmt's way) when it is empty or holds a space, `=` or `"`, so
    /// a value cannot pass for more `key=value` fields.
    static func appendValue(_ text: String, to line: inout [UInt8]) {
        let quoted = text.isEmpty || text.utf8.contains { $0 == 0x20 || $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\"") }
        if quoted { line.append(UInt8(ascii: "\"")) }
        appendEscaped(text, to: &line, quotes: quoted)
        if quoted { line.append(UInt8(ascii: "\"")) }
    }

    /// The text's UTF-8 with a backslash doubled, and as escapes: C0 and C1 controls, DEL, the
    /// line and paragraph separators (U+2028, U+2029), and `"` inside quotes.
    static func appendEscaped(_ text: String, to line: inout [UInt8], quotes: Bool = false) {
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A: line.append(contentsOf: #"\n"#.utf8)
            case 0x0D: line.append(contentsOf: #"\r"#.utf8)
            case 0x09: line.append(contentsOf: #"\t"#.utf8)
            case 0x5C: line.append(contentsOf: #"\\"#.utf8)
            case 0x22 where quotes: line.append(contentsOf: #"\""#.utf8)
            case 0x00..<0x20, 0x7F...0x9F, 0x2028, 0x2029:
                line.append(contentsOf: #"\u{"#.utf8)
                line.append(contentsOf: String(scalar.value, radix: 16, uppercase: true).utf8)
                line.append(UInt8(ascii: "}"))
            case 0x20..<0x7F: line.append(UInt8(scalar.value))
            default: line.append(contentsOf: String(scalar).utf8)
            }
        }
    }
}

/// Where ``LineLogHandler`` writes: a file descriptor, lines gathered in a buffer and written by
/// one `write(2)` per batch, so lines from the event loops never interleave and the access log
/// costs a system call per batch, not per request. A batch goes out when it reaches 32 KiB, 20 ms
/// after its first line, at once for a warning or worse (with everything before it), and on
/// ``flush()`` (`serve` calls it on the way out).
public final class LogOutput: Sendable {
    private struct State {
        var second = -1
        var stamp: [UInt8] = []
        var pending: [UInt8] = []
        var flushScheduled = false
    }

    static let batchBytes = 32 * 1024

    private let descriptor: Int32
    private let state = Mutex(State())
    /// Held while a batch is taken and written, so batches go out in order; the state's lock
    /// (which every log call takes) is not held across `write(2)`, so a slow log does not stall
    /// the loops that log.
    private let writer = Mutex(())
    private let batchDelay: DispatchTimeInterval
    /// The current time in whole seconds since 1970; a test can fix it.
    private let now: @Sendable () -> Int

    public static let standardError = LogOutput(descriptor: 2)

    public init(
        descriptor: Int32, batchDelay: DispatchTimeInterval = .milliseconds(20), now: @escaping @Sendable () -> Int = { Int(time(nil)) }
    ) {
        self.descriptor = descriptor
        self.batchDelay = batchDelay
        self.now = now
    }

    /// `2026-11-24T04:42:52Z` (``RFC3339``), made once per second.
    func appendTimestamp(to line: inout [UInt8]) {
        let second = now()
        state.withLock { state in
            if state.second != second {
                state.second = second
                state.stamp = Self.stamp(second)
            }
            line.append(contentsOf: state.stamp)
        }
    }

    static func stamp(_ second: Int) -> [UInt8] {
        var stamp: [UInt8] = []
        RFC3339.appendUTC(secondsSince1970: second, to: &stamp)
        return stamp
    }

    func write(_ line: [UInt8], urgent: Bool) {
        let (flushNow, schedule) = state.withLock { state -> (Bool, Bool) in
            state.pending.append(contentsOf: line)
            if urgent || state.pending.count >= Self.batchBytes { return (true, false) }
            guard !state.flushScheduled else { return (false, false) }
            state.flushScheduled = true
            return (false, true)
        }
        if flushNow { flush() }
        if schedule {
            DispatchQueue.global().asyncAfter(deadline: .now() + batchDelay) { self.flush() }
        }
    }

    /// Bytes gathered and not yet written.
    var pendingBytes: Int { state.withLock { $0.pending.count } }

    /// Writes whatever is gathered now.
    public func flush() {
        writer.withLock { _ in
            let batch = state.withLock { state -> [UInt8] in
                state.flushScheduled = false
                defer { state.pending.removeAll(keepingCapacity: true) }
                return state.pending
            }
            writeAll(batch)
        }
    }

    /// One batch, retried on EINTR and partial writes. A log that cannot be written (closed,
    /// full) loses the batch: kept, it would grow with every request.
    private func writeAll(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = writeBytes(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}

/// `write(2)`, named apart from ``LogOutput``'s own `write`.
private func writeBytes(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
