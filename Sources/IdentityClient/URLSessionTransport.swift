import Foundation
import IdentityClientCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``HTTPTransport`` over Foundation's `URLSession` (FoundationNetworking on Linux). Redirects
/// are not followed: OAuth endpoints answer directly, and a redirect would carry a form body
/// with secrets to another URL.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let delegate = NoRedirects()

    /// - Parameter timeout: seconds before a request without an answer fails.
    public init(timeout: TimeInterval = 30) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    deinit { session.finishTasksAndInvalidate() }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        do {
            let (data, response) = try await session.data(for: urlRequest)
            guard let http = response as? HTTPURLResponse else { throw IdentityError.network("not an HTTP response") }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return TransportResponse(status: http.statusCode, headers: headers, body: data)
        } catch let error as IdentityError {
            throw error
        } catch {
            throw IdentityError.network("\(request.url.host ?? request.url.absoluteString): \(error.localizedDescription)")
        }
    }

    /// `URLSession` delegates are classes; this one holds no state.
    // @unchecked: no stored properties, so nothing to race on.
    private final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }
    }
}
