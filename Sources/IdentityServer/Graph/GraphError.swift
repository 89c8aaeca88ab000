import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import Storage
import UserJourneys
import WireCoding

/// Microsoft Graph's error form: `{"error":{"code","message","innerError":{"date","request-id",
/// "client-request-id"}}}` (Graph REST API reference, "Microsoft Graph error responses").
struct GraphError: Error, Equatable {
    var status: HTTPResponse.Status
    var code: String
    var message: String

    static let emptyToken = GraphError(status: .unauthorized, code: "InvalidAuthenticationToken", message: "Access token is empty.")
    static let invalidToken = GraphError(
        status: .unauthorized, code: "InvalidAuthenticationToken", message: "Access token validation failure.")
    static let insufficientPrivileges = GraphError(
        status: .forbidden, code: "Authorization_RequestDenied", message: "Insufficient privileges to complete the operation.")
    static let resourceNotFound = GraphError(
        status: .notFound, code: "Request_ResourceNotFound",
        message: "Resource does not exist or one of its queried reference-property objects are not present.")
    /// Graph's code for a 503 ("Microsoft Graph error responses": serviceNotAvailable).
    static let serviceUnavailable = GraphError(
        status: .serviceUnavailable, code: "serviceNotAvailable",
        message: "The service is temporarily unavailable. Retry after a few seconds.")
}

/// Writes ``GraphError`` in Graph's form for the Graph routes; a 401 carries Graph's
/// `WWW-Authenticate: Bearer` challenge.
struct GraphErrorMiddleware<Context: IdentityContext>: RouterMiddleware {
    let clock: any IdentityClock

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            do {
                return try await next(request, context)
            } catch StorageError.unavailable(let reason) {
                context.logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
                throw GraphError.serviceUnavailable
            } catch let refusal as IdentityAdministration.AdministrationError {
                // The administration door's refusals, in Graph's words (``GraphError/init(_:)``).
                throw GraphError(refusal)
            }
        } catch let error as GraphError {
            let body = JSONText.object([
                (
                    "error",
                    .object([
                        ("code", .string(error.code)), ("message", .string(error.message)),
                        (
                            "innerError",
                            .object([
                                ("date", .string(ISO8601DateFormatter().string(from: clock.now))),
                                ("request-id", .string(context.correlationID)), ("client-request-id", .string(context.correlationID)),
                            ])
                        ),
                    ])
                )
            ])
            var response = Response.json(body, status: error.status)
            if error.status == .unauthorized { response.headers[.wwwAuthenticate] = "Bearer realm=\"\", error=\"invalid_token\"" }
            if error.status == .serviceUnavailable { response = response.retryingAfter() }
            return response
        }
    }
}
