import Foundation
import HTTPTypes
import Hummingbird
import Storage
import TodoModels

/// The Task API's failures, mapped to RFC 9457 problem documents in one place (``Problem``).
enum TaskAPIError: Error, Equatable {
    case unauthenticated
    case tokenRejected(TokenRejection)
    case notFound
    case methodNotAllowed
    case malformedJSON(String)
    case unsupportedMediaType
    case payloadTooLarge
    case invalidField(String)
    case invalidQuery(String)
    case versionMismatch
    case unavailable
}

enum Problem {
    /// Stable `type` URIs: clients switch on them.
    static func document(for error: TaskAPIError) -> ProblemDetails {
        func problem(_ slug: String, _ title: String, _ status: HTTPResponse.Status, _ detail: String? = nil) -> ProblemDetails {
            ProblemDetails(type: "urn:todob2c:problem:\(slug)", title: title, status: status.code, detail: detail)
        }
        switch error {
        case .unauthenticated: return problem("unauthenticated", "Authentication required", .unauthorized)
        case .tokenRejected(let rejection):
            switch rejection {
            case .missing: return problem("unauthenticated", "Authentication required", .unauthorized, rejection.description)
            case .insufficientScope: return problem("insufficient-scope", "Insufficient scope", .forbidden, rejection.description)
            case .appOnly: return problem("user-required", "A signed-in user is required", .forbidden, rejection.description)
            case .authorityUnavailable:
                return problem("authority-unavailable", "Cannot validate tokens now", .serviceUnavailable, rejection.description)
            default: return problem("invalid-token", "Invalid token", .unauthorized, rejection.description)
            }
        case .notFound: return problem("not-found", "Not found", .notFound, "There is no such task.")
        case .methodNotAllowed: return problem("method-not-allowed", "Method not allowed", .methodNotAllowed)
        case .malformedJSON(let detail): return problem("malformed-json", "Malformed JSON", .badRequest, detail)
        case .unsupportedMediaType:
            return problem("unsupported-media-type", "Unsupported media type", .unsupportedMediaType, "Send application/json.")
        case .payloadTooLarge: return problem("payload-too-large", "Payload too large", .contentTooLarge, "Bodies are limited to 64 KiB.")
        case .invalidField(let detail): return problem("invalid-field", "Invalid field", .unprocessableContent, detail)
        case .invalidQuery(let detail): return problem("invalid-query", "Invalid query parameter", .badRequest, detail)
        case .versionMismatch:
            return problem(
                "precondition-failed", "Precondition failed", .preconditionFailed, "The task has changed since the ETag given in If-Match.")
        case .unavailable:
            return problem("unavailable", "Service unavailable", .serviceUnavailable, "The database cannot be used now; retry shortly.")
        }
    }

    static func response(for error: TaskAPIError) -> Response {
        let document = document(for: error)
        var headers: HTTPFields = [.contentType: "application/problem+json", .cacheControl: "no-store"]
        if case .tokenRejected(let rejection) = error {
            // 503: the token may be fine, so no challenge that would make clients drop it.
            if rejection == .authorityUnavailable {
                headers[.retryAfter] = "5"
            } else {
                headers[.wwwAuthenticate] = challenge(for: rejection)
            }
        } else if error == .unauthenticated {
            headers[.wwwAuthenticate] = "Bearer realm=\"TodoB2C\""
        } else if error == .unavailable {
            headers[.retryAfter] = "5"
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(document)) ?? Data()
        return Response(
            status: HTTPResponse.Status(code: document.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// RFC 6750 §3: no error code when no credentials were sent; `invalid_token` or
    /// `insufficient_scope` (with the scope) otherwise.
    static func challenge(for rejection: TokenRejection) -> String {
        let description = rejection.description.replacingOccurrences(of: "\"", with: "'")
        switch rejection {
        case .missing: return "Bearer realm=\"TodoB2C\""
        case .insufficientScope(let required):
            return
                "Bearer realm=\"TodoB2C\", error=\"insufficient_scope\", error_description=\"\(description)\", scope=\"\(required.joined(separator: " "))\""
        // A valid token that cannot be used here: 403 with insufficient_scope (RFC 6750 §3.1).
        case .appOnly: return "Bearer realm=\"TodoB2C\", error=\"insufficient_scope\", error_description=\"\(description)\""
        default: return "Bearer realm=\"TodoB2C\", error=\"invalid_token\", error_description=\"\(description)\""
        }
    }
}

/// Turns thrown errors into problem documents, and anything unexpected into a bare 500 that
/// reveals nothing (the details go to the log with the request id).
struct ProblemMiddleware: RouterMiddleware {
    typealias Context = TaskRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as TaskAPIError {
            return Problem.response(for: error)
        } catch StorageError.unavailable(let reason) {
            // The database cannot work now (a lost COMMIT is not this case: it is a 500): retry later.
            context.logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
            return Problem.response(for: .unavailable)
        } catch StorageError.textContainsNUL {
            // Text the store refuses (TextGuardedSQLDatabase) is the caller's bad input, never a
            // fault: a route that missed validating it still answers 422, not 500.
            return Problem.response(for: .invalidField("Text fields cannot contain a NUL character."))
        } catch let error as any HTTPResponseError {
            switch error.status {
            case .notFound: return Problem.response(for: .notFound)
            case .contentTooLarge: return Problem.response(for: .payloadTooLarge)
            case .methodNotAllowed: return Problem.response(for: .methodNotAllowed)
            default:
                let document = ProblemDetails(
                    type: "urn:todob2c:problem:http-\(error.status.code)", title: error.status.reasonPhrase, status: error.status.code)
                let body = (try? JSONEncoder().encode(document)) ?? Data()
                return Response(
                    status: error.status, headers: [.contentType: "application/problem+json"],
                    body: .init(byteBuffer: ByteBuffer(bytes: body)))
            }
        } catch {
            context.logger.error("unhandled error", metadata: ["error": "\(String(reflecting: error))"])
            let document = ProblemDetails(
                type: "urn:todob2c:problem:internal", title: "Internal error", status: 500, detail: "Request id \(context.requestID).")
            let body = (try? JSONEncoder().encode(document)) ?? Data()
            return Response(
                status: .internalServerError, headers: [.contentType: "application/problem+json"],
                body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
    }
}
