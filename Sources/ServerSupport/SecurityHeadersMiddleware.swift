import HTTPTypes
import Hummingbird

/// Headers every response of the system carries, whatever its wire format.
///
/// - `X-Content-Type-Options: nosniff`, so a browser never reads a JSON or text answer as a
///   script or a page (Fetch standard §3.5.1).
/// - `Strict-Transport-Security` when served over HTTPS to a name other than a loopback one
///   (RFC 6797). Not on `localhost`: HSTS binds the whole host, every port, so it would force
///   HTTPS on every other development server of that browser.
public struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    let https: Bool

    public init(https: Bool) { self.https = https }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        if https, !Loopback.isAuthority(request.head.authority ?? "") {
            response.headers[.strictTransportSecurity] = "max-age=31536000"
        }
        return response
    }

}
