import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Logging
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// A dev-tenant identity service on a real database with a manual clock, driven over
/// Hummingbird's in-process router client.
struct IdentityHarness: Sendable {
    let server: IdentityServer
    let clock: ManualClock
    let seed: DevTenantSeed
    let webSecret: String
    let database: any Database

    static let origin = "http://localhost"
    static let redirect = "http://127.0.0.1:8400"

    var tenant: Tenant { seed.tenant }
    var clientID: String { seed.publicApp.clientIDString }
    var webClientID: String { seed.webApp.clientIDString }
    var issuer: String { "\(Self.origin)/\(tenant.guid)/v2.0/" }

    static func run(
        _ engine: DatabaseEngine, configuration: IdentityServerConfiguration = .init(passwordHashCost: 4, simulatedFacebook: true),
        dataKey: DataKey = .generate(), logger: Logger = TestDatabase.logger,
        journeys adapt: (@Sendable (JourneyCatalog) -> any JourneyProvider)? = nil,
        _ body: @Sendable (IdentityHarness, Driver) async throws -> Void
    ) async throws {
        // A statement of a test's request may wait long on a machine running every suite at
        // once: the deadline is for half-open connections (AvailabilityTests test it), not for load.
        var configuration = configuration
        configuration.statementDeadline = .seconds(120)
        try await TestDatabase.with(engine) { database in
            let clock = ManualClock(Date())
            let server = try await IdentityServer.make(
                configuration: configuration, database: database, dataKey: dataKey, clock: clock, logger: logger)
            let seed = try await server.seedDevelopmentTenant(apiPort: 3000)
            let harness = IdentityHarness(
                server: server, clock: clock, seed: seed, webSecret: seed.webAppSecret ?? "", database: database)
            let app = Application(router: server.buildRouter(journeys: server.service.journeyEngine(adapt: adapt)), logger: logger)
            do {
                try await app.test(.router) { client in
                    try await body(harness, Driver(client: client))
                }
                try await server.shutdown()
            } catch {
                try? await server.shutdown()
                throw error
            }
        }
    }

    func addUser(_ email: String = "alice@example.com", password: String = "Passw0rd!", name: String = "Alice") async throws -> UserAccount
    {
        try await server.administration.createLocalUser(tenantID: tenant.id, email: email, displayName: name, password: password)
    }

    /// The code in the newest outbox message (six digits on B2C's pages, eight in External ID's
    /// native authentication).
    func latestCode(digits: Int = 6) async throws -> String {
        let body = try await server.outbox(tenantID: tenant.id).first?.body ?? ""
        return String(body.split(whereSeparator: { !$0.isNumber }).first { $0.count == digits } ?? "")
    }

    func path(_ policy: String, _ endpoint: String) -> String { "/\(tenant.name)/\(policy)/\(endpoint)" }

    /// Rewrites a transaction's journey, as a bug in a step (or anyone able to write the row)
    /// might: the engine's rules must hold whatever the state says.
    func forgeJourney(_ tx: String, _ change: (inout JourneyState) -> Void) async throws {
        let record = try #require(try await server.service.interactions.interaction(id: tx))
        var state = record.journey
        change(&state)
        #expect(try await server.service.interactions.saveJourney(id: tx, state: state, revision: record.journeyRevision))
    }

    /// The journey of `flow`.
    func journey(flow name: String) async throws -> Journey {
        let flow = try #require(try await server.tenants.userFlow(tenantID: tenant.id, name: name))
        return server.service.journeyEngine().catalog.journey(for: flow)
    }

    /// Sign-in transactions stored.
    func transactionCount() async throws -> Int {
        try await database.read { sql in
            try await sql.raw("SELECT COUNT(*) AS n FROM authorization_requests").first(decodingColumn: "n", as: Int.self) ?? 0
        }
    }
}

/// A tiny browser: keeps cookies, follows redirects inside the identity service, and stops at
/// the app's redirect URI.
final class Driver: @unchecked Sendable {
    // @unchecked: a Driver is used by one test task at a time.
    let client: any TestClientProtocol
    var cookies: [String: String] = [:]

    init(client: any TestClientProtocol) { self.client = client }

    func request(
        _ method: HTTPRequest.Method, _ uri: String, form: [(String, String)]? = nil, headers: HTTPFields = [:], body: String? = nil
    ) async throws -> TestResponse {
        var headers = headers
        var target = uri
        if target.hasPrefix(IdentityHarness.origin) { target.removeFirst(IdentityHarness.origin.count) }
        if !cookies.isEmpty {
            headers[.cookie] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        }
        var buffer: ByteBuffer?
        if let form {
            headers[.contentType] = "application/x-www-form-urlencoded"
            buffer = ByteBuffer(string: Form.encode(form))
        } else if let body {
            buffer = ByteBuffer(string: body)
        }
        let response = try await client.execute(uri: target, method: method, headers: headers, body: buffer)
        for field in response.headers[values: .setCookie] {
            let pair = field.split(separator: ";")[0].split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if field.contains("Max-Age=0") { cookies[pair[0]] = nil } else { cookies[pair[0]] = pair[1] }
        }
        return response
    }

    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse { try await request(.get, uri, headers: headers) }
    func post(_ uri: String, _ form: [(String, String)], headers: HTTPFields = [:]) async throws -> TestResponse {
        try await request(.post, uri, form: form, headers: headers)
    }

    /// Follows 302/303s that stay on the identity service; returns the first other response.
    func follow(_ response: TestResponse) async throws -> TestResponse {
        var current = response
        while [.found, .seeOther].contains(current.status), let location = current.headers[.location],
            location.hasPrefix(IdentityHarness.origin) || location.hasPrefix("/")
        {
            current = try await get(location)
        }
        return current
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
    var location: String? { headers[.location] }

    /// The value of a hidden or text input named `name` in an HTML page.
    func field(_ name: String) -> String? {
        guard let range = text.range(of: "name=\"\(name)\" value=\"") else { return nil }
        let rest = text[range.upperBound...]
        return rest.firstIndex(of: "\"").map { Form.unescapeHTML(String(rest[..<$0])) }
    }

    /// The `action` of the first form.
    var formAction: String? {
        guard let range = text.range(of: "<form method=\"post\" action=\"") else { return nil }
        let rest = text[range.upperBound...]
        return rest.firstIndex(of: "\"").map { Form.unescapeHTML(String(rest[..<$0])) }
    }

    /// An `href` of the element with `id`.
    func link(id: String) -> String? {
        guard let range = text.range(of: "href=\""), text.contains("id=\"\(id)\"") else { return nil }
        _ = range
        let pattern = "href=\"([^\"]+)\" id=\"\(id)\""
        guard let regex = try? NSRegularExpression(pattern: pattern),
            let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
            let r = Range(match.range(at: 1), in: text)
        else { return nil }
        return Form.unescapeHTML(String(text[r]))
    }

    /// Query (or fragment) parameters of the redirect `Location`.
    var redirectParameters: [String: String] {
        guard let location, let components = URLComponents(string: location) else { return [:] }
        var items = components.queryItems ?? []
        if let fragment = components.fragment { items += URLComponents(string: "x:?\(fragment)")?.queryItems ?? [] }
        var result: [String: String] = [:]
        for item in items { result[item.name] = item.value ?? "" }
        return result
    }
}

enum Form {
    static func encode(_ pairs: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._*")
        return pairs.map { pair in
            let escape = { (s: String) in
                s.addingPercentEncoding(withAllowedCharacters: allowed)!.replacingOccurrences(of: "%20", with: "+")
            }
            return "\(escape(pair.0))=\(escape(pair.1))"
        }.joined(separator: "&")
    }

    /// An `application/x-www-form-urlencoded` body's pairs, in order.
    static func decode(_ body: String) -> [(String, String)] {
        body.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            return (parts[0], parts.count > 1 ? parts[1] : "")
        }
    }

    static func unescapeHTML(_ text: String) -> String {
        text.replacingOccurrences(of: "&amp;", with: "&").replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&lt;", with: "<")
            .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&#x2F;", with: "/")
            .replacingOccurrences(of: "&#x3D;", with: "=").replacingOccurrences(of: "&#x60;", with: "`")
    }
}

/// PKCE verifier and S256 challenge (RFC 7636).
struct PKCEPair {
    let verifier: String
    let challenge: String

    init() {
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        verifier = Self.base64url(Data(bytes))
        challenge = Self.base64url(Data(SHA256.hash(data: Data(verifier.utf8))))
    }

    static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Decodes a JWT's header and payload without checking anything.
struct DecodedJWT {
    let header: [String: Any]
    let claims: [String: Any]
    let headerJSON: String

    init(_ token: String) {
        let parts = token.split(separator: ".").map(String.init)
        func decode(_ part: String) -> Data {
            var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while base64.count % 4 != 0 { base64 += "=" }
            return Data(base64Encoded: base64) ?? Data()
        }
        let first = parts.first ?? ""
        headerJSON = String(decoding: decode(first), as: UTF8.self)
        header = (try? JSONSerialization.jsonObject(with: decode(first)) as? [String: Any]) ?? [:]
        claims = parts.count > 1 ? ((try? JSONSerialization.jsonObject(with: decode(parts[1])) as? [String: Any]) ?? [:]) : [:]
    }
}

/// One interactive authorization, as an app would start it.
struct AuthorizationAttempt {
    var policy = "B2C_1_susi"
    var clientID: String
    var redirectURI = IdentityHarness.redirect
    var scope: String
    var state = "st-\(UUID().uuidString.prefix(8))"
    var nonce = "n-\(UUID().uuidString.prefix(8))"
    var pkce = PKCEPair()
    var extra: [(String, String)] = []
    var responseType = "code"
    /// A policy-less (Entra) authority segment (`common`, a tenant GUID or name); nil for B2C's
    /// policy URLs.
    var authority: String?

    init(harness: IdentityHarness, policy: String = "B2C_1_susi", scope: String? = nil) {
        self.policy = policy
        self.clientID = harness.clientID
        self.scope = scope ?? "openid offline_access \(harness.clientID)"
    }

    func url(harness: IdentityHarness) -> String {
        var parameters = [
            ("client_id", clientID), ("response_type", responseType), ("redirect_uri", redirectURI), ("scope", scope),
            ("state", state), ("nonce", nonce), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"),
        ]
        parameters += extra
        return endpoint("oauth2/v2.0/authorize", harness: harness) + "?" + Form.encode(parameters)
    }

    /// `endpoint` under this attempt's authority: the policy path, or the Entra authority.
    func endpoint(_ endpoint: String, harness: IdentityHarness) -> String {
        authority.map { "/\($0)/\(endpoint)" } ?? harness.path(policy, endpoint)
    }
}

extension Driver {
    /// Starts `attempt` and returns the first page (or the redirect to the app).
    func start(_ attempt: AuthorizationAttempt, harness: IdentityHarness) async throws -> TestResponse {
        try await follow(try await get(attempt.url(harness: harness)))
    }

    /// Submits a page's main form with its CSRF token and `fields`.
    func submit(_ page: TestResponse, _ fields: [(String, String)]) async throws -> TestResponse {
        guard let action = page.formAction else { throw HarnessError.noForm(page.text) }
        return try await follow(try await post(action, [("csrf_token", page.field("csrf_token") ?? "")] + fields))
    }

    /// Signs up through the hosted page, proving the address with the code from the outbox;
    /// returns the redirect to the app, or the first page that refused a step.
    func signUp(
        _ harness: IdentityHarness, attempt: AuthorizationAttempt, email: String, password: String = "Passw0rd!", name: String = "Alice"
    ) async throws -> TestResponse {
        var page = try await start(attempt, harness: harness)
        if let signUp = page.link(id: "createAccount") { page = try await follow(try await get(signUp)) }
        page = try await submit(page, [("step", "send"), ("email", email)])
        guard page.status == .ok, page.text.contains("email_ver_input") else { return page }
        page = try await submit(page, [("step", "verify"), ("code", try await harness.latestCode())])
        guard page.status == .ok, page.text.contains("email_success") else { return page }
        return try await submit(
            page, [("step", "create"), ("email", email), ("newPassword", password), ("reenterPassword", password), ("displayName", name)])
    }

    /// Signs in through the hosted page; returns the redirect to the app.
    func signIn(_ harness: IdentityHarness, attempt: AuthorizationAttempt, email: String, password: String = "Passw0rd!") async throws
        -> TestResponse
    {
        let page = try await start(attempt, harness: harness)
        return try await submit(page, [("email", email), ("password", password)])
    }

    /// Redeems an authorization code at the token endpoint.
    func redeem(_ harness: IdentityHarness, attempt: AuthorizationAttempt, code: String, extra: [(String, String)] = []) async throws
        -> TestResponse
    {
        try await post(
            attempt.endpoint("oauth2/v2.0/token", harness: harness),
            [
                ("grant_type", "authorization_code"), ("client_id", attempt.clientID), ("code", code),
                ("redirect_uri", attempt.redirectURI), ("code_verifier", attempt.pkce.verifier), ("scope", attempt.scope),
                ("client_info", "1"),
            ] + extra)
    }

    func ropc(_ harness: IdentityHarness, username: String, password: String, scope: String? = nil, policy: String = "B2C_1_ROPC")
        async throws -> TestResponse
    {
        try await post(
            harness.path(policy, "oauth2/v2.0/token"),
            [
                ("grant_type", "password"), ("client_id", harness.clientID), ("username", username), ("password", password),
                ("scope", scope ?? "openid offline_access \(harness.clientID)"), ("client_info", "1"),
            ])
    }

    func refresh(
        _ harness: IdentityHarness, token: String, policy: String = "B2C_1_ROPC", clientID: String? = nil, extra: [(String, String)] = []
    ) async throws -> TestResponse {
        try await post(
            harness.path(policy, "oauth2/v2.0/token"),
            [("grant_type", "refresh_token"), ("client_id", clientID ?? harness.clientID), ("refresh_token", token)] + extra)
    }
}

enum HarnessError: Error { case noForm(String) }

/// The AADB2C code in an error description.
func b2cCode(_ response: TestResponse) -> String? {
    (response.json["error_description"] as? String).flatMap { $0.split(separator: ":").first.map(String.init) }
}

func b2cCode(redirect response: TestResponse) -> String? {
    response.redirectParameters["error_description"].flatMap { $0.split(separator: ":").first.map(String.init) }
}
