import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failure the user should read: printed as one line on standard error, exit status 1.
struct CommandError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Colour and status output. Colour only on a terminal and without `NO_COLOR` (no-color.org).
enum Terminal {
    static let colour = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
    static let interactive = isatty(STDERR_FILENO) == 1

    static func green(_ text: String) -> String { paint(text, "32") }
    static func dim(_ text: String) -> String { paint(text, "2") }
    static func bold(_ text: String) -> String { paint(text, "1") }

    private static func paint(_ text: String, _ code: String) -> String { colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }

    static func error(_ message: String) {
        let prefix =
            isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil ? "\u{1B}[31mtodo:\u{1B}[0m" : "todo:"
        FileHandle.standardError.write(Data("\(prefix) \(message)\n".utf8))
    }

    static func note(_ message: String) { FileHandle.standardError.write(Data("\(message)\n".utf8)) }

    /// A spinner on standard error while `body` runs (only on a terminal).
    static func spinning<T>(_ message: String, _ body: () async throws -> T) async rethrows -> T {
        guard interactive else { return try await body() }
        let spinner = Task {
            let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
            var index = 0
            while !Task.isCancelled {
                FileHandle.standardError.write(Data("\r\(frames[index % frames.count]) \(message)".utf8))
                index += 1
                try? await Task.sleep(for: .milliseconds(100))
            }
            FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
        }
        defer { spinner.cancel() }
        let value = try await body()
        spinner.cancel()
        _ = await spinner.value
        return value
    }

    /// Name-value rows, sorted by name, names dimmed and padded to one column.
    static func printTable(_ rows: [String: some CustomStringConvertible], indent: String = "") {
        let width = rows.keys.map(\.count).max() ?? 0
        for (name, value) in rows.sorted(by: { $0.key < $1.key }) {
            print("\(indent)\(dim(name.padding(toLength: width, withPad: " ", startingAt: 0)))  \(value)")
        }
    }

    /// JSON for `--json`: sorted keys, ISO 8601 dates, no escaped slashes.
    static func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
