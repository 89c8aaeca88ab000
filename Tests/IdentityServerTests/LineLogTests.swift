import Foundation
import IdentityServer
import Logging
import TestSupport
import Testing
import WireCoding

@testable import ServerSupport

/// The servers' log handler (issue 13): one event is one line, in order, escaped, and batched
/// without losing or holding back what an operator needs to see.
@Suite("Line log handler")
struct LineLogTests {
    /// A pipe whose read end never blocks; the output writes to its write end.
    final class Pipe: Sendable {
        let read: Int32
        let write: Int32
        init() throws {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw POSIXError(.EIO) }
            read = ends[0]
            write = ends[1]
            _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
        }
        deinit {
            close(read)
            close(write)
        }
        /// Whatever has been written so far.
        func available() -> String {
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { Foundation.read(read, $0.baseAddress, 4096) }
                if count <= 0 { break }
                bytes += chunk[0..<count]
            }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// 1970-01-02T03:04:05Z.
    static let fixedSecond = 86_400 + 3 * 3600 + 4 * 60 + 5

    static func logger(_ output: LogOutput, level: Logger.Level = .info) -> Logger {
        Logger(label: "todo-server") { label in LineLogHandler(label: label, output: output, logLevel: level) }
    }

    @Test("the layout: UTC time, level, label, message, metadata by key; the event's own metadata wins")
    func layout() throws {
        let pipe = try Pipe()
        let output = LogOutput(descriptor: pipe.write, batchDelay: .seconds(60), now: { Self.fixedSecond })
        var logger = Self.logger(output)
        logger[metadataKey: "request_id"] = "r-1"
        logger[metadataKey: "status"] = "from the logger"
        logger.info("request", metadata: ["status": "200", "method": "GET"])
        logger.debug("below the level")
        output.flush()
        #expect(pipe.available() == "1970-01-02T03:04:05Z info todo-server: request method=GET request_id=r-1 status=200\n")
    }

    @Test("control characters in a message or a value are escaped: one event stays one line")
    func escaping() throws {
        let pipe = try Pipe()
        let output = LogOutput(descriptor: pipe.write, batchDelay: .seconds(60), now: { Self.fixedSecond })
        let logger = Self.logger(output)
        logger.info("two\nlines", metadata: ["path": "/a\r\nforged 1970 info line\u{1B}[31m\u{7F}\t"])
        logger.info(
            "values",
            metadata: [
                "a": "x status=200", "b": #"back\slash \n"#, "c": "nel\u{85}csi\u{9B}ls\u{2028}ps\u{2029}", "d": "", "e": #"say "hi""#,
            ])
        output.flush()
        let lines = pipe.available().split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.hasSuffix(#"two\nlines path="/a\r\nforged 1970 info line\u{1B}[31m\u{7F}\t""#) == true)
        // A value with a space or `=` is quoted, so it cannot pass for another field; a literal
        // backslash is doubled, so it cannot pass for an escape; C1 controls and the Unicode line
        // separators are escaped too.
        #expect(
            lines.last?.hasSuffix(
                #"values a="x status=200" b="back\\slash \\n" c=nel\u{85}csi\u{9B}ls\u{2028}ps\u{2029} d="" e="say \"hi\"""#) == true,
            "\(lines.last ?? "")")
    }

    @Test("info lines wait for their batch; a warning goes out at once with everything before it, in order")
    func batching() throws {
        let pipe = try Pipe()
        let output = LogOutput(descriptor: pipe.write, batchDelay: .seconds(60), now: { Self.fixedSecond })
        let logger = Self.logger(output)
        logger.info("first")
        logger.info("second")
        #expect(pipe.available() == "")
        logger.warning("third")
        let lines = pipe.available().split(separator: "\n").map { $0.split(separator: " ").last.map(String.init) }
        #expect(lines == ["first", "second", "third"])
    }

    @Test("a batch is written by its timer without another line or a flush")
    func timer() async throws {
        let pipe = try Pipe()
        let output = LogOutput(descriptor: pipe.write, batchDelay: .milliseconds(10))
        Self.logger(output).info("on its own")
        var text = ""
        for _ in 0..<200 where text.isEmpty {
            try await Task.sleep(for: .milliseconds(10))
            text = pipe.available()
        }
        #expect(text.hasSuffix("info todo-server: on its own\n"))
    }

    @Test("a full batch is written without waiting for its timer")
    func fullBatch() throws {
        let pipe = try Pipe()
        let output = LogOutput(descriptor: pipe.write, batchDelay: .seconds(60), now: { Self.fixedSecond })
        let logger = Self.logger(output)
        let value = String(repeating: "x", count: 1000)
        for _ in 0..<40 { logger.info("line", metadata: ["v": "\(value)"]) }
        // 40 lines of about 1 KB pass the 32 KiB batch: at least 32 lines are out, whole.
        let lines = pipe.available().split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count >= 32 && lines.count < 40)
        #expect(lines.allSatisfy { $0.hasSuffix(value) })
    }

    @Test("a log that cannot be written loses its batches instead of keeping them")
    func unwritable() {
        let output = LogOutput(descriptor: -1, batchDelay: .seconds(60), now: { Self.fixedSecond })
        let logger = Self.logger(output)
        let value = String(repeating: "x", count: 1000)
        for _ in 0..<200 { logger.info("line", metadata: ["v": "\(value)"]) }
        #expect(output.pendingBytes < 32 * 1024)
        logger.warning("urgent")
        #expect(output.pendingBytes == 0)
    }

    @Test("random UUIDs are version 4 with the RFC 9562 variant, lowercase, and differ")
    func randomUUIDs() {
        let ids = (0..<1000).map { _ in Secrets.randomUUIDString() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(50) {
            let parsed = UUIDText.parse(id)
            #expect(parsed != nil && id == id.lowercased())
            let characters = Array(id)
            #expect(characters[14] == "4")
            #expect("89ab".contains(characters[19]))
        }
    }
}

@Suite("Request ids")
struct RequestIDTests {
    @Test("request ids are UUID-shaped (version 4, RFC 9562 variant, lowercase) and do not repeat")
    func shape() async {
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 { group.addTask { (0..<5000).map { _ in RequestIDs.next() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(Set(ids).count == 20_000)
        for id in ids.prefix(100) {
            #expect(UUIDText.parse(id) != nil && id == id.lowercased())
            #expect(Array(id)[14] == "4" && "89ab".contains(Array(id)[19]))
        }
    }
}

extension LineLogTests {
    @Test("a first start logs one line at info per library's migrations, each migration at debug (the banner is not buried)")
    func migrationsSummarised() async throws {
        try await TestDatabase.with(.sqlite) { database in
            let recorder = LogRecorder()
            try await IdentityServer.migrate(database, logger: recorder.logger)
            let lines = recorder.lines.withLock { $0 }
            let info = lines.filter { $0.hasPrefix("info ") }
            #expect(info.count == 1, "\(info)")
            #expect(info.first?.contains("applied migrations") == true && info.first?.contains("namespace=identity") == true)
            #expect(lines.filter { $0.hasPrefix("debug applied migration ") }.count > 20)
            // Nothing to apply: nothing at info.
            let again = LogRecorder()
            try await IdentityServer.migrate(database, logger: again.logger)
            #expect(again.lines.withLock { $0 }.filter { $0.hasPrefix("info ") }.isEmpty)
        }
    }

    @Test("the access log writes no email a path carries (Graph's /users/{upn}), however it is encoded")
    func pathsWithoutEmails() {
        #expect(LoggedPath.of("/v1.0/users/alice%40example.com") == "/v1.0/users/{redacted}")
        #expect(LoggedPath.of("/v1.0/users/bob@example.com/revokeSignInSessions")
            == "/v1.0/users/{redacted}/revokeSignInSessions")
        #expect(LoggedPath.of("/api/tasks/42") == "/api/tasks/42")
    }
}
