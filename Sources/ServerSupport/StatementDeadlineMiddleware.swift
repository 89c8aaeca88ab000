import Hummingbird
import Storage

/// Gives the PostgreSQL statements a request runs a deadline (``StatementDeadline/request``): a
/// connection that neither answers nor closes (a half-open TCP connection) is closed under the
/// statement, so the request is answered 503 instead of waiting until TCP gives up (the
/// reliability rerun's P-3). Outside requests (migrations, backups) statements have none.
public struct StatementDeadlineMiddleware<Context: RequestContext>: RouterMiddleware {
    let deadline: Duration

    public init(deadline: Duration = StatementDeadline.request) { self.deadline = deadline }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        try await StatementDeadline.$current.withValue(deadline) { try await next(request, context) }
    }
}
