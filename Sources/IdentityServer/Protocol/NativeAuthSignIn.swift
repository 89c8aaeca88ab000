import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// An error of External ID's native authentication API (SPEC §2.15): Entra's JSON error with its
/// `AADSTS` number, and a `suberror` where Microsoft defines one. Status 400, as every error in
/// Microsoft's native-authentication API reference.
struct NativeAuthError: Error, Equatable {
    var error: String
    var code: Int
    var message: String
    var suberror: String?

    static let missingRedirect = NativeAuthError(
        error: "invalid_request", code: 901_007, message: "The challenge_type list parameter does not include the 'redirect' type.")
    static let invalidUsername = NativeAuthError(error: "invalid_request", code: 90_100, message: "The username parameter is empty or not valid.")
    static let invalidToken = NativeAuthError(error: "invalid_request", code: 55_200, message: "The continuation_token is invalid.")
    static let expiredToken = NativeAuthError(error: "expired_token", code: 552_003, message: "The continuation_token has expired.")
    static let userNotFound = NativeAuthError(error: "user_not_found", code: 50_034, message: "The user account does not exist in the directory.")
    static let wrongPassword = NativeAuthError(error: "invalid_grant", code: 50_126, message: "Error validating credentials due to invalid username or password.")
    static let locked = NativeAuthError(error: "invalid_grant", code: 50_053, message: "The account is locked: too many sign-in attempts.")
    static let disabled = NativeAuthError(error: "invalid_grant", code: 50_057, message: "The user account is disabled.")
    static let disabledForApp = NativeAuthError(
        error: "invalid_client", code: 500_208, message: "The native authentication API is not enabled for this app.", suberror: "nativeauthapi_disabled")
    static func unknownClient(_ id: String) -> NativeAuthError {
        NativeAuthError(error: "unauthorized_client", code: 700_016, message: "Application with identifier '\(id.prefix(64))' was not found in the directory.")
    }
    static func missing(_ name: String) -> NativeAuthError {
        NativeAuthError(error: "invalid_request", code: 900_144, message: "The request body must contain the following parameter: '\(name)'.")
    }

    func response(correlationID: String, at date: Date) -> Response {
        let traceID = UUID().uuidString.lowercased()
        let stamp = B2CTimestamp.format(date)
        var members: [(String, JSONText)] = [
            ("error", .string(error)),
            ("error_description", .string("AADSTS\(code): \(message)\r\nTrace ID: \(traceID)\r\nCorrelation ID: \(correlationID)\r\nTimestamp: \(stamp)")),
            ("error_codes", .array([.int(Int64(code))])), ("timestamp", .string(stamp)), ("trace_id", .string(traceID)),
            ("correlation_id", .string(correlationID)),
        ]
        if let suberror { members.append(("suberror", .string(suberror))) }
        return .json(.object(members), status: .badRequest, noStore: true)
    }
}

/// Native authentication's sign-in (SPEC §2.15; Microsoft's native-authentication API
/// reference): `oauth2/v2.0/initiate` names the account, `oauth2/v2.0/challenge` says how it
/// proves itself, and the token endpoint takes the proof with the continuation token
/// (``TokenEndpoint/nativeToken(_:form:context:now:)``). Only apps that opted in are answered.
/// The proof runs the password grant's journey, so lockout, a disabled account, a second
/// factor and consent hold as for every other sign-in; what needs a browser answers
/// `challenge_type: redirect`.
struct NativeAuthSignIn: Sendable {
    let service: IdentityService
    let flows: NativeAuthFlows

    /// The `challenge_type` list: space-separated, and it must offer `redirect` (the client's
    /// way out when the API cannot go on).
    static func challengeTypes(_ form: RequestParameters) throws(NativeAuthError) -> Set<String> {
        guard let text = form.nonEmpty("challenge_type") else { throw .missing("challenge_type") }
        let types = Set(text.split(separator: " ").map { $0.lowercased() })
        guard types.contains("redirect") else { throw .missingRedirect }
        return types
    }

    static let redirect = Response.json(.object([("challenge_type", .string("redirect"))]), noStore: true)

    /// The app, which must be this tenant's and have opted in.
    func client(_ form: RequestParameters, tenant: Tenant) async throws -> AppRegistration {
        guard let id = form.nonEmpty("client_id") else { throw NativeAuthError.missing("client_id") }
        guard let app = try await service.tenants.application(tenantID: tenant.id, clientID: id) else { throw NativeAuthError.unknownClient(id) }
        guard app.nativeAuthentication else { throw NativeAuthError.disabledForApp }
        return app
    }

    /// Runs `body`, answering a ``NativeAuthError`` in the API's own form.
    func answering(_ context: PolicyRequestContext, _ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch let error as NativeAuthError {
            return error.response(correlationID: context.correlationID, at: service.clock.now)
        }
    }

    /// `POST …/oauth2/v2.0/initiate` (`client_id`, `username`, `challenge_type`).
    @Sendable func initiate(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let form = try await FormBody.read(request, context: context)
        return try await answering(context) {
            let client = try await client(form, tenant: context.tenant)
            let types = try Self.challengeTypes(form)
            guard let username = form.nonEmpty("username"), let email = EmailAddress.canonical(username) else { throw NativeAuthError.invalidUsername }
            // Neither a password nor a code offered: the browser it is.
            guard types.contains("password") || types.contains("oob") else { return Self.redirect }
            guard let user = try await service.users.user(tenantID: context.tenant.id, provider: .local, signInName: email) else {
                throw NativeAuthError.userNotFound
            }
            let token = try await flows.start(
                tenantID: context.tenant.id, clientID: client.clientIDString, userID: user.id, step: .challenge, now: service.clock.now)
            return .json(.object([("continuation_token", .string(token))]), noStore: true)
        }
    }

    /// The live flow a request's continuation token continues, at `step`, for this app.
    func flow(_ form: RequestParameters, client: AppRegistration, tenant: Tenant, step: NativeAuthFlow.Step) async throws -> NativeAuthFlow {
        guard let token = form.nonEmpty("continuation_token") else { throw NativeAuthError.missing("continuation_token") }
        switch try await flows.find(token, now: service.clock.now) {
        case .expired: throw NativeAuthError.expiredToken
        case .unknown: throw NativeAuthError.invalidToken
        case .found(let flow):
            // Another app's, another tenant's, or another step's token continues nothing here.
            guard flow.clientID == client.clientIDString, flow.tenantID == tenant.id, flow.step == step else { throw NativeAuthError.invalidToken }
            return flow
        }
    }

    /// `POST …/oauth2/v2.0/challenge` (`client_id`, `continuation_token`, `challenge_type`): the
    /// account's method. An account with a password proves itself with it; one without (a
    /// federated account) goes to the browser.
    @Sendable func challenge(_ request: Request, context: PolicyRequestContext) async throws -> Response {
        let form = try await FormBody.read(request, context: context)
        return try await answering(context) {
            let client = try await client(form, tenant: context.tenant)
            let types = try Self.challengeTypes(form)
            let flow = try await flow(form, client: client, tenant: context.tenant, step: .challenge)
            guard let user = try await service.users.user(id: flow.userID), user.passwordHash != nil, types.contains("password") else {
                return Self.redirect
            }
            guard let next = try await flows.advance(flow, to: .token, method: "password") else { throw NativeAuthError.invalidToken }
            return .json(.object([("continuation_token", .string(next)), ("challenge_type", .string("password"))]), noStore: true)
        }
    }
}
