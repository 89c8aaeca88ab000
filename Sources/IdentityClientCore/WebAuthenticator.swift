import Foundation
import Synchronization
import WireCoding

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How the authorization response comes back (OAuth 2.0 Multiple Response Type Encoding
/// Practices; OAuth 2.0 Form Post Response Mode).
public enum ResponseMode: String, Sendable {
    /// Parameters in the redirect URL's query: the only mode custom URL schemes can receive.
    case query
    /// Parameters in an auto-submitted POST body: the code never appears in a URL or browser
    /// history. What MSAL uses for loopback redirects.
    case formPost = "form_post"
}

/// Shows the identity service's pages to the user and returns the authorization response.
///
/// The SDK builds the authorize URL only once it knows the redirect URI, because a loopback
/// receiver learns its port when it binds. Implementations: ``LoopbackWebAuthenticator`` (CLI
/// and desktop), `SystemWebAuthenticator` (`ASWebAuthenticationSession`, Apple platforms) and
/// ``ScriptedWebAuthenticator`` (tests).
public protocol WebAuthenticator: Sendable {
    /// Runs one browser round trip.
    ///
    /// - Parameters:
    ///   - redirectURI: the app's configured redirect URI.
    ///   - start: builds the URL to open from the redirect URI actually used and the response
    ///     mode this authenticator can receive.
    /// - Returns: the parameters of the redirect (`code`, `state`, or `error`, …).
    /// - Throws: ``IdentityError/userCanceled``, ``IdentityError/timedOut``, or cancellation.
    func authenticate(redirectURI: String, start: @Sendable (_ redirectURI: String, _ mode: ResponseMode) async throws -> URL)
        async throws -> [String: String]
}

/// A browser round trip driven by code: the script gets the URL to open and returns the
/// redirect's parameters. Tests use it to post the hosted pages' forms headlessly.
public struct ScriptedWebAuthenticator: WebAuthenticator {
    let redirectURI: String?
    let responseMode: ResponseMode
    let script: @Sendable (URL) async throws -> [String: String]

    /// - Parameters:
    ///   - redirectURI: overrides the configured one (e.g. a fixed loopback port).
    ///   - responseMode: what the script can return.
    ///   - script: opens the URL in some fashion and returns the redirect parameters.
    public init(
        redirectURI: String? = nil, responseMode: ResponseMode = .query, script: @escaping @Sendable (URL) async throws -> [String: String]
    ) {
        self.redirectURI = redirectURI
        self.responseMode = responseMode
        self.script = script
    }

    public func authenticate(redirectURI: String, start: @Sendable (String, ResponseMode) async throws -> URL) async throws -> [String:
        String]
    {
        try await script(try await start(self.redirectURI ?? redirectURI, responseMode))
    }

    /// The query (or fragment) parameters of a redirect URL.
    public static func parameters(fromRedirect url: URL) -> [String: String] {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        var parameters = FormEncoding.fields(components?.percentEncodedQuery ?? "")
        for (name, value) in FormEncoding.fields(components?.percentEncodedFragment ?? "") where parameters[name] == nil {
            parameters[name] = value
        }
        return parameters
    }
}

/// Receives the redirect on `http://127.0.0.1:<random port>` (RFC 8252 §7.3), for command-line
/// and desktop apps. It accepts both `query` and `form_post` responses, answers the browser with
/// a page saying the tab can be closed, and gives up after `timeout` or when its task is
/// cancelled. Requests to other paths (a browser's `/favicon.ico`) are answered 404 and ignored.
public struct LoopbackWebAuthenticator: WebAuthenticator {
    public var responseMode: ResponseMode
    public var timeout: Duration
    /// Opens the URL for the user; the default starts the system browser, or prints the URL
    /// when there is none.
    public var openBrowser: @Sendable (URL) -> Void

    public init(responseMode: ResponseMode = .formPost, timeout: Duration = .seconds(300), openBrowser: (@Sendable (URL) -> Void)? = nil) {
        self.responseMode = responseMode
        self.timeout = timeout
        self.openBrowser = openBrowser ?? Self.systemBrowser
    }

    public func authenticate(redirectURI: String, start: @Sendable (String, ResponseMode) async throws -> URL) async throws -> [String:
        String]
    {
        guard let configured = URLComponents(string: redirectURI), configured.scheme == "http",
            let host = configured.host, Authority.isLoopback(host)
        else { throw IdentityError.invalidConfiguration("the redirect URI \(redirectURI) is not a loopback http URI") }
        let listener = try LoopbackListener()
        defer { listener.close() }
        let path = configured.path.isEmpty ? "/" : configured.path
        let actual = "http://127.0.0.1:\(listener.port)\(configured.path)"
        let url = try await start(actual, responseMode)
        // Answers that carry another state belong to no sign-in of ours (a page probing loopback
        // ports, a stale tab): they are refused and the receiver keeps waiting for the real one.
        let expectedState = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "state" }?.value
        openBrowser(url)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let timeout = self.timeout
                let thread = Thread {
                    continuation.resume(with: Result { try listener.awaitRedirect(path: path, state: expectedState, timeout: timeout) })
                }
                thread.start()
            }
        } onCancel: {
            listener.cancel()
        }
    }

    #if os(Linux) || os(macOS)
        /// `open` on macOS; `xdg-open` on Linux when a display is set; otherwise the URL is
        /// printed to standard error for the user to open.
        public static let systemBrowser: @Sendable (URL) -> Void = { url in
            #if os(macOS)
                let candidates = ["/usr/bin/open"]
            #else
                let environment = ProcessInfo.processInfo.environment
                let hasDisplay = environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil
                let candidates = hasDisplay ? ["/usr/bin/xdg-open", "/usr/local/bin/xdg-open"] : []
            #endif
            if let opener = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: opener)
                process.arguments = [url.absoluteString]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                if (try? process.run()) != nil { return }
            }
            FileHandle.standardError.write(Data("Open this URL in a browser to continue:\n  \(url.absoluteString)\n".utf8))
        }
    #else
        public static let systemBrowser: @Sendable (URL) -> Void = { _ in }
    #endif

    static let closeTabPage = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Signed in</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1b1f24}</style>
        </head><body><h1>You can close this tab</h1><p>The app has received the answer and carries on in the terminal.</p></body></html>
        """
}

/// One listening socket on 127.0.0.1, port chosen by the kernel.
final class LoopbackListener: Sendable {
    let descriptor: Int32
    let port: UInt16
    let cancelled = Atomic<Bool>(false)

    init() throws {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw IdentityError.network("cannot open a loopback socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 8) == 0 else {
            _ = POSIX.close(descriptor)
            throw IdentityError.network("cannot listen on 127.0.0.1")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.descriptor = descriptor
        self.port = UInt16(bigEndian: address.sin_port)
    }

    func close() { _ = POSIX.close(descriptor) }

    func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Accepts connections until one brings the authorization response to `path`.
    func awaitRedirect(path: String, state expected: String?, timeout: Duration) throws -> [String: String] {
        let deadline = ContinuousClock.now + timeout
        while true {
            if cancelled.load(ordering: .relaxed) { throw CancellationError() }
            if ContinuousClock.now >= deadline { throw IdentityError.timedOut }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) > 0 else { continue }
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else { continue }
            defer { _ = POSIX.close(connection) }
            guard let request = Self.readRequest(connection) else { continue }
            let parameters: [String: String]
            if request.path != path {
                Self.respond(connection, status: "404 Not Found", body: "Not found")
                continue
            } else if request.method == "POST" {
                parameters = FormEncoding.fields(String(decoding: request.body, as: UTF8.self))
            } else {
                parameters = FormEncoding.fields(request.query)
            }
            guard parameters["code"] != nil || parameters["error"] != nil || parameters["state"] != nil else {
                Self.respond(connection, status: "400 Bad Request", body: "This address only receives sign-in responses.")
                continue
            }
            if let expected, parameters["state"] != expected {
                Self.respond(connection, status: "400 Bad Request", body: "This response belongs to another sign-in.")
                continue
            }
            Self.respond(connection, status: "200 OK", body: LoopbackWebAuthenticator.closeTabPage, html: true)
            return parameters
        }
    }

    struct Request {
        var method: String
        var path: String
        var query: String
        var body: [UInt8]
    }

    /// A minimal HTTP/1.1 request reader: headers up to 16 KiB, a body up to 64 KiB by
    /// `Content-Length`, two seconds to arrive.
    static func readRequest(_ connection: Int32) -> Request? {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // Two seconds per read and five in all: a client trickling bytes cannot hold the receiver.
        let deadline = ContinuousClock.now + .seconds(5)
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let separator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int? = nil
        while headerEnd == nil {
            let count = recv(connection, &chunk, chunk.count, 0)
            guard count > 0, ContinuousClock.now < deadline else { return nil }
            buffer += chunk[0..<count]
            headerEnd = buffer.firstRange(of: separator)?.lowerBound
            if headerEnd == nil && buffer.count > 16_384 { return nil }
        }
        guard let headerEnd else { return nil }
        let head = String(decoding: buffer[0..<headerEnd], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        var contentLength = 0
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                contentLength = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        guard (0...65_536).contains(contentLength) else { return nil }
        var body = Array(buffer[(headerEnd + 4)...])
        while body.count < contentLength {
            let count = recv(connection, &chunk, chunk.count, 0)
            guard count > 0, ContinuousClock.now < deadline else { return nil }
            body += chunk[0..<count]
        }
        let target = String(requestLine[1])
        let pathEnd = target.firstIndex(of: "?") ?? target.endIndex
        let query = pathEnd < target.endIndex ? String(target[target.index(after: pathEnd)...]) : ""
        return Request(
            method: String(requestLine[0]), path: String(target[..<pathEnd]), query: query, body: Array(body.prefix(contentLength)))
    }

    static func respond(_ connection: Int32, status: String, body: String, html: Bool = false) {
        let payload = Array(body.utf8)
        let head =
            "HTTP/1.1 \(status)\r\nContent-Type: \(html ? "text/html" : "text/plain"); charset=utf-8\r\n"
            + "Content-Length: \(payload.count)\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + payload
        // No SIGPIPE if the browser hung up: the process must not die of it.
        #if canImport(Glibc)
            _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #else
            var on: Int32 = 1
            setsockopt(connection, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
            _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, 0) }
        #endif
    }
}

#if canImport(Glibc)
    enum POSIX {
        static func close(_ descriptor: Int32) -> Int32 { Glibc.close(descriptor) }
    }
#else
    enum POSIX {
        static func close(_ descriptor: Int32) -> Int32 { Darwin.close(descriptor) }
    }
#endif
