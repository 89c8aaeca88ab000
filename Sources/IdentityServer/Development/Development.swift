import Foundation
import Hummingbird
import IdentityDirectory
import TodoModels
import UserJourneys
import WireCoding

/// What a tester asks to be minted: the user (email or object id), the app, optionally the user
/// flow (else the tenant's default), the scopes (else `openid offline_access {client}`),
/// whether the tokens take the Entra face's shapes, and claims to add.
public struct TokenMintRequest: Sendable, Decodable {
    public var user: String
    public var client: String
    public var policy: String?
    public var scope: String?
    public var entra: Bool?
    /// Claims added to both tokens, or replacing the issuer's value of that name (SPEC §2.14);
    /// not `iss`, `aud` or the times (``ExtraClaims``).
    public var claims: [String: JSONValue]?

    public init(
        user: String, client: String, policy: String? = nil, scope: String? = nil, entra: Bool? = nil, claims: [String: JSONValue]? = nil
    ) {
        self.claims = claims
        self.user = user
        self.client = client
        self.policy = policy
        self.scope = scope
        self.entra = entra
    }
}

/// The test-control surface (issue 11): what the users of mock OAuth servers lean on, served
/// only where development is on (a loopback server, or `--dev-endpoints`).
extension IdentityServer {
    /// Tokens for a user without a browser, through the real issuer: the same keys, claims,
    /// refresh-token family and response as a sign-in (`POST /dev/tokens`, `todo-server token`).
    /// `origin` is the identity service's public origin, which the issuer is written with.
    public func mintTokens(tenantID: UUID, _ request: TokenMintRequest, origin: String) async throws -> JSONText {
        do {
            return try await mint(tenantID: tenantID, request, origin: origin)
        } catch let error as ProtocolFailure {
            throw IdentityAdministration.AdministrationError.refused("\(error.code): \(error.message)")
        }
    }

    /// ``mintTokens(tenantID:_:origin:)`` with its refusals in B2C's form, for the HTTP surface.
    func mint(tenantID: UUID, _ request: TokenMintRequest, origin: String) async throws -> JSONText {
        let now = clock.now
        guard let tenant = try await tenants.tenant(matching: tenantID.uuidString) else {
            throw ProtocolFailure.unknownTenant(tenantID.uuidString)
        }
        let user = try await administration.findUser(tenantID: tenantID, emailOrID: request.user)
        guard user.accountEnabled else { throw ProtocolFailure.accountDisabled }
        let name = request.policy ?? tenant.defaultPolicy
        guard let flow = try await tenants.userFlow(tenantID: tenantID, name: name) else {
            throw ProtocolFailure.unknownPolicy(name, tenant: tenant.name)
        }
        guard let client = try await tenants.application(tenantID: tenantID, clientID: request.client) else {
            throw ProtocolFailure.clientNotRegistered(request.client, tenant: tenant.name)
        }
        let face: ProtocolFace = request.entra == true ? .entra : .b2c
        let apps = try await tenants.applications(tenantID: tenantID)
        let scopes = try GrantedScopes.resolve(
            .scopes(request.scope ?? "openid offline_access \(client.clientIDString)"), client: client, tenantApps: apps)
        var issuance = IssuanceContext(
            tenant: tenant, flow: flow, client: client, user: user, issuer: HostPolicy.issuer(origin: origin, tenant: tenant, face: face),
            scopes: scopes, nonce: nil, authTime: now, newUser: false, identityProvider: user.identityProvider, face: face)
        // Microsoft Graph's tokens carry only what Graph grants: extra claims (scopes, roles)
        // would be a way around its permissions.
        if request.claims?.isEmpty == false, scopes.isForMicrosoftGraph {
            throw ProtocolFailure.malformedRequest("Extra claims are not added to Microsoft Graph's tokens.")
        }
        do {
            issuance.extraClaims = try ExtraClaims(request.claims ?? [:])
        } catch {
            throw ProtocolFailure.malformedRequest(error.description)
        }
        let endpoint = TokenEndpoint(
            tenants: tenants, users: users, grants: service.grants, consents: service.consents, tokens: service.issuer,
            clock: clock, hosts: service.hosts, connectors: service.connectors,
            journeys: service.journeyEngine(), refreshReuseInterval: service.configuration.refreshTokenReuseInterval,
            signIns: service.signIns)
        return try await endpoint.mint(issuance, now: now)
    }

    /// Back to the seeded state: every account of the tenant and what hangs off it (sessions,
    /// refresh tokens, consents, lockout), every transaction, the outbox and the armed faults go;
    /// the tenant, its flows, apps and keys stay. Returns how many accounts went.
    public func resetAccounts(tenantID: UUID) async throws -> Int {
        let accounts = try await users.users(tenantID: tenantID)
        for account in accounts { _ = try await users.delete(id: account.id) }
        try await service.interactions.clearTenantState(tenantID: tenantID)
        service.faults.clear()
        return accounts.count
    }
}

/// Keeps other sites' pages out of the test-control surface: a browser marks a request a page
/// made on another site (`Sec-Fetch-Site: cross-site` or `same-site`, or an `Origin` not this
/// service's), and such a write is refused before any handler runs.
struct SameOriginOnly: RouterMiddleware {
    typealias Context = IdentityRequestContext
    let hosts: HostPolicy

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // Reading the outbox is a page a person may open from anywhere (another site cannot
        // read the answer); only the writes need the guard.
        guard request.method != .get, request.method != .head else { return try await next(request, context) }
        let site = request.headers[.init("Sec-Fetch-Site")!]?.lowercased()
        let origin = request.headers[.origin]
        if site == "cross-site" || site == "same-site" || (origin != nil && origin != hosts.origin(of: request)) {
            context.logger.warning("cross-site request to the test-control surface refused", metadata: ["path": "\(request.uri.path)"])
            throw HTTPError(.forbidden)
        }
        return try await next(request, context)
    }
}

/// `/dev/…`: the test-control surface over HTTP, a view of ``DevelopmentControl``. Errors are
/// B2C's JSON (the token endpoint's form).
struct DevelopmentEndpoints: Sendable {
    let server: IdentityServer
    var service: IdentityService { server.service }

    /// The default tenant's control, on an allowed host; anything else is a 404 (the surface is not there).
    func control(_ request: Request) async throws -> DevelopmentControl {
        guard service.hosts.isAllowedHost(request), let control = try await DevelopmentControl.forDefaultTenant(of: server) else {
            throw HTTPError(.notFound)
        }
        return control
    }

    /// `GET /dev/outbox`: a page, or with `Accept: application/json` (or `?format=json`) the
    /// messages as data, newest first, with the code of each parsed out.
    @Sendable func outbox(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let control = try await control(request)
        let messages = try await control.outbox()
        let wantsJSON =
            request.headers[.accept]?.lowercased().contains("application/json") == true
            || RequestParameters(query: request.uri.query)["format"] == "json"
        if wantsJSON { return .json(DevelopmentControl.json(messages), noStore: true) }
        let formatter = ISO8601DateFormatter()
        let values: [String: Any] = [
            "title": "Development outbox",
            "messages": messages.map {
                ["subject": $0.subject, "recipient": $0.recipient, "body": $0.body, "createdAt": formatter.string(from: $0.createdAt)]
            },
        ]
        return .html(try service.pages.render(.outbox, values, tenant: control.tenant))
    }

    /// `POST /dev/tokens` with `{"user","client","policy"?,"scope"?,"entra"?}`: the token
    /// response a sign-in would give.
    @Sendable func tokens(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let control = try await control(request)
        let mint = try await Self.body(TokenMintRequest.self, request, context: context)
        do {
            return .json(try await control.mintTokens(mint, origin: service.origin(of: request)), noStore: true)
        } catch let error as IdentityAdministration.AdministrationError {
            throw ProtocolFailure.malformedRequest(error.description)
        }
    }

    /// `POST /dev/reset`: back to the seeded state (``IdentityServer/resetAccounts(tenantID:)``).
    /// It takes a JSON body (`{}`) like the other writes, so no HTML form on another site can
    /// send it (a form's content types are CORS-safelisted; JSON needs a preflight nobody grants).
    @Sendable func reset(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let control = try await control(request)
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
            throw ProtocolFailure.malformedRequest("The request body must be application/json ({}).")
        }
        let removed = try await control.resetAccounts()
        context.logger.notice("development reset", metadata: ["accounts": "\(removed)"])
        return .json(.object([("accountsRemoved", .int(Int64(removed)))]), noStore: true)
    }

    struct FaultRequest: Decodable {
        var policy: String?
        /// A native-authentication endpoint (`signup/v1.0/start`, `oauth2/v2.0/token`, …)
        /// instead of a flow.
        var endpoint: String?
        var error: String?
        var delayMs: Int?
    }

    /// `POST /dev/faults` with `{"policy", "error": "AADB2C90118" | "AADB2C90091" | "server_error" | …}`
    /// or `{"policy", "delayMs": n}`: the next authorize or token call on that flow fails (or
    /// waits) once; `{"endpoint": "signup/v1.0/start", "error": "user_already_exists"}`, the next
    /// call to that native-authentication endpoint. `DELETE /dev/faults` disarms everything.
    @Sendable func arm(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let control = try await control(request)
        let fault = try await Self.body(FaultRequest.self, request, context: context)
        try await control.arm(policy: fault.policy, endpoint: fault.endpoint, error: fault.error, delayMs: fault.delayMs)
        return Response(status: .noContent)
    }

    @Sendable func disarm(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await control(request).disarmFaults()
        return Response(status: .noContent)
    }

    struct ClockMove: Decodable {
        var advanceSeconds: Int64
    }

    /// `POST /dev/clock` `{"advanceSeconds": n}` moves the service's time forward (SPEC §2.14):
    /// the issuer, the Task API's validator in this process, sessions, codes and MFA
    /// "remember this browser" all read it. `GET` tells the time; `DELETE` goes back to the wall
    /// clock. A move backwards is refused and changes nothing.
    @Sendable func advanceClock(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let control = try await control(request)
        _ = try control.clock()
        let move = try await Self.body(ClockMove.self, request, context: context)
        let clock = try control.advanceClock(seconds: move.advanceSeconds)
        context.logger.notice("development clock moved", metadata: ["seconds": "\(move.advanceSeconds)", "offset": "\(clock.offsetSeconds)"])
        return .json(DevelopmentControl.json(clock), noStore: true)
    }

    @Sendable func readClock(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        .json(DevelopmentControl.json(try await control(request).clock()), noStore: true)
    }

    @Sendable func resetClock(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let clock = try await control(request).clock()
        clock.reset()
        return .json(DevelopmentControl.json(clock), noStore: true)
    }

    private static func body<T: Decodable>(_ type: T.Type, _ request: Request, context: IdentityRequestContext) async throws -> T {
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
            throw ProtocolFailure.malformedRequest("The request body must be application/json.")
        }
        var request = request
        let buffer = try await request.collectBody(upTo: context.maxUploadSize)
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer: buffer))
        } catch {
            throw ProtocolFailure.malformedRequest("The request body is not the JSON this endpoint takes.")
        }
    }
}
