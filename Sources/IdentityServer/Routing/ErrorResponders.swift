import Foundation
import Hummingbird
import IdentityDirectory
import ServerSupport
import Storage
import UserJourneys

// One responder per wire format (SPEC §2.6). Controllers throw ``ProtocolFailure`` or ``PageError``;
// the middleware of their route group writes it in the form that route's callers read:
// - ``OAuthErrorMiddleware``: JSON `{"error","error_description"}` (discovery, keys, token);
// - ``PageErrorMiddleware``: a page in the browser (authorize before the redirect URI is
//   trusted, hosted pages, logout, the federation callback);
// - ``RedirectResponder/error(_:redirectURI:mode:state:correlationID:now:)``: to the app's
//   redirect URI, once it is trusted (the authorize controller and a finished transaction);
// - ``GraphErrorMiddleware`` (Graph/GraphError.swift): Graph's `{"error":{"code",…}}` for `/v1.0`;
// - ``UnhandledErrorMiddleware``: everything else, as B2C's JSON 404 or 500.

extension Response {
    /// A 503 that tells clients when to come back (RFC 9110 §10.2.3): the database or the
    /// password hasher is busy or away, not the request at fault.
    func retryingAfter(seconds: Int = 5) -> Response {
        var response = self
        response.headers[.retryAfter] = "\(seconds)"
        return response
    }
}

/// B2C's JSON error form (https://learn.microsoft.com/azure/active-directory-b2c/openid-connect#get-a-token) for the machine-facing endpoints.
/// On a policy-less (Entra) route the same errors take Entra's JSON form (SPEC §2.9).
struct OAuthErrorMiddleware<Context: IdentityContext>: RouterMiddleware {
    let clock: any IdentityClock
    /// The URL shape of the group, which decides the face of its errors.
    var placement: PolicyPlacement = .path
    var hosts: HostPolicy?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as ProtocolFailure {
            context.logger.info("request refused", metadata: ["code": "\(error.code)", "error": "\(error.oauthError)"])
            return respond(error, request: request, context: context)
        } catch PasswordHasher.HasherError.busy {
            return respond(.temporarilyUnavailable, request: request, context: context).retryingAfter()
        } catch StorageError.unavailable(let reason) {
            context.logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
            return respond(.temporarilyUnavailable, request: request, context: context).retryingAfter()
        }
    }

    private func respond(_ error: ProtocolFailure, request: Request, context: Context) -> Response {
        TokenErrorResponder.respond(
            error, correlationID: context.correlationID, now: clock.now, face: placement.face(of: request),
            origin: hosts?.origin(of: request) ?? "")
    }
}

extension PolicyPlacement {
    /// The face of a request to a route of this shape: a query-shape route without `p` is Entra's.
    func face(of request: Request) -> ProtocolFace {
        guard self == .query else { return ProtocolFace(placement: self) }
        return RequestParameters(query: request.uri.query).nonEmpty("p") == nil ? .entra : .b2c
    }
}

/// The error page for the routes a person's browser is on: never a redirect to an untrusted
/// URI (RFC 6749 §4.1.2.1), branded for the tenant once the request's tenant is known.
struct PageErrorMiddleware<Context: IdentityContext>: RouterMiddleware {
    let pages: PageRenderer
    let clock: any IdentityClock
    /// The URL shape of the group: on a policy-less route the page quotes Entra's code.
    var placement: PolicyPlacement = .path

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as PageError {
            return page(error, context: context)
        } catch let error as ProtocolFailure {
            context.logger.info("request refused on a page", metadata: ["code": "\(error.code)"])
            return page(PageError(error, face: placement.face(of: request)), context: context)
        } catch PasswordHasher.HasherError.busy {
            return page(PageError(.temporarilyUnavailable), context: context).retryingAfter()
        } catch StorageError.unavailable(let reason) {
            context.logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
            return page(PageError(.temporarilyUnavailable), context: context).retryingAfter()
        }
    }

    private func page(_ error: PageError, context: Context) -> Response {
        var values: [String: Any] = [
            "title": error.title, "message": error.message, "correlationID": context.correlationID,
            "timestamp": B2CTimestamp.format(clock.now),
        ]
        if let code = error.code { values["code"] = code }
        let html =
            (try? pages.render(.error, values, tenant: context.brandingTenant))
            ?? "<!DOCTYPE html><title>Error</title><p>\(MarkupTemplates.escape(error.message))</p>"
        return .html(html, status: error.status)
    }
}

/// The outermost net: a URL or method nothing serves gets B2C's JSON 404 (`AADB2C90037`); an
/// unexpected error is logged once with the correlation id and answered 500 without details.
struct UnhandledErrorMiddleware: RouterMiddleware {
    typealias Context = IdentityRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            return TokenErrorResponder.respond(
                .resourceNotFound,
                correlationID: context.correlationID, now: Date())
        } catch let error as any HTTPResponseError {
            throw error
        } catch StorageError.unavailable(let reason) {
            context.logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
            return TokenErrorResponder.respond(.temporarilyUnavailable, correlationID: context.correlationID, now: Date()).retryingAfter()
        } catch StorageError.textContainsNUL {
            // A NUL in a lookup key (a tenant name, a transaction id) is bad input, not a fault:
            // the store refuses it (TextGuardedSQLDatabase), and the caller hears why.
            return TokenErrorResponder.respond(
                .malformedRequest("The request contains a NUL character."), correlationID: context.correlationID, now: Date())
        } catch {
            context.logger.error("unhandled error", metadata: ["error": "\(String(reflecting: error))"])
            return TokenErrorResponder.respond(.internalError, correlationID: context.correlationID, now: Date())
        }
    }
}
