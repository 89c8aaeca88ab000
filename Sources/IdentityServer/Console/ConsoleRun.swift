import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import JOSE
import TodoModels
import UserJourneys
import WireCoding

/// The console's user flows and custom policies, and B2C's "Run user flow" with the token decoder
/// built in (no jwt.ms): the flow runs for the console app, answers with an ID token by form post
/// to `/admin/run`, and the console checks its signature, issuer, audience, lifetime and nonce and
/// shows its header and claims.
extension AdminConsole {
    static let runCookie = "todo_console_run"

    @Sendable func flows(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let flows = try await admin.administration.userFlows(tenantID: admin.tenant.id).filter { $0.type != .ropc }.map {
                ["name": $0.name, "kind": $0.type.rawValue, "providers": $0.identityProviders.map(\.rawValue).joined(separator: ", ")]
            }
            let policies = try await admin.administration.customPolicies(tenantID: admin.tenant.id).map { ["name": $0.id] }
            return pages.render("flows", ["title": "User flows and policies", "flows": flows, "policies": policies], admin: admin)
        }
    }

    /// `GET /admin/run?flow=NAME`: sends the admin through the flow for the console app.
    @Sendable func run(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let name = RequestParameters(query: request.uri.query)["flow"] ?? ""
            guard try await runnable(name, tenant: admin.tenant) else {
                return pages.message("No such flow", "This tenant has no user flow or policy of that name to run.", admin: admin, status: .notFound)
            }
            guard try await registerConsole(in: admin.tenant) else { throw HTTPError(.internalServerError) }
            let origin = server.service.hosts.origin(of: request)
            let (state, nonce) = (Secrets.randomToken(byteCount: 24), Secrets.randomToken(byteCount: 16))
            let query = FormEncoding.encode([
                ("client_id", Self.clientID(of: admin.tenant).uuidString.lowercased()), ("response_type", "id_token"),
                ("redirect_uri", "\(origin)/admin/run"), ("response_mode", "form_post"), ("scope", "openid"), ("state", state),
                ("nonce", nonce), ("prompt", "login"),
            ])
            var response = Response(
                status: .seeOther, headers: [.location: "\(origin)/\(admin.tenant.name)/\(name)/oauth2/v2.0/authorize?\(query)", .cacheControl: "no-store"])
            response.setCookie(
                Cookie(name: Self.runCookie, value: "\(state).\(nonce).\(name)", maxAge: 600, path: "/admin", secure: origin.hasPrefix("https:"),
                       httpOnly: true, sameSite: .lax))
            return response
        }
    }

    /// `POST /admin/run`: the flow's answer. Only the run this browser started (its state), from
    /// this site, for a signed-in admin.
    @Sendable func ran(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased()
            let form = (try? await FormBody.read(request, context: context)) ?? RequestParameters(pairs: [])
            let parts = (request.cookies[Self.runCookie]?.value ?? "").split(separator: ".", maxSplits: 2).map(String.init)
            guard site == nil || site == "same-origin", parts.count == 3, let state = form["state"], Self.same(state, parts[0]) else {
                return pages.message("Run not recognised", "This answer is not of a run started here.", admin: admin, status: .badRequest)
            }
            let flow = parts[2]
            if let error = form.nonEmpty("error") {
                var response = pages.render(
                    "token",
                    ["title": "Run \(flow)", "flow": flow, "error": String(TextRules.printable(error).prefix(64)),
                     "description": String(TextRules.printable(form["error_description"] ?? "").prefix(600))],
                    admin: admin)
                response.setCookie(Cookie(name: Self.runCookie, value: "", maxAge: 0, path: "/admin", httpOnly: true))
                return response
            }
            let token = form["id_token"] ?? ""
            guard token.count <= 16_384, let parsed = try? RS256.parse(token) else {
                return pages.message("No token", "The flow answered without an ID token.", admin: admin, status: .badRequest)
            }
            let keys = try await publicKeys(flow: flow, tenant: admin.tenant)
            let hosts = server.service.hosts
            let policy = ClaimPolicy(
                issuers: .matching { hosts.isOwnIssuer($0) }, audiences: [Self.clientID(of: admin.tenant).uuidString.lowercased()], leeway: 300)
            let verified = JSONWebToken.verify(token, publicKeys: keys, policy: policy, now: server.clock.now)
            let nonceMatches = verified?.string("nonce").map { Self.same($0, parts[1]) } ?? false
            let claims = (try? parsed.claims())?.values ?? [:]
            let rows = claims.keys.sorted().map { ["name": $0, "value": Self.display(claims[$0] ?? .null)] }
            var response = pages.render(
                "token",
                ["title": "Run \(flow)", "flow": flow, "verified": verified != nil && nonceMatches, "kid": parsed.keyID,
                 "claims": rows, "token": token],
                admin: admin)
            response.setCookie(Cookie(name: Self.runCookie, value: "", maxAge: 0, path: "/admin", httpOnly: true))
            return response
        }
    }

    /// Whether `name` is a flow or policy of the tenant that signs users in interactively.
    private func runnable(_ name: String, tenant: Tenant) async throws -> Bool {
        guard !name.isEmpty, name.count <= 128 else { return false }
        if let flow = try await server.tenants.userFlow(tenantID: tenant.id, name: name) { return flow.type != .ropc }
        return try await server.service.customPolicies.program(tenantID: tenant.id, id: name)?.relyingParty != nil
    }

    /// The keys the flow's tokens are signed with: a custom policy's key set, else the service's.
    private func publicKeys(flow: String, tenant: Tenant) async throws -> [(kid: String, key: _RSA.Signing.PublicKey)] {
        if let keySet = try await server.service.customPolicies.program(tenantID: tenant.id, id: flow)?.tokenSigningKeySet {
            return try await server.service.policyKeySets.publishedKeys(tenantID: tenant.id, keySet: keySet).compactMap { key in
                guard let n = key.n.flatMap(Base64URL.decode), let e = key.e.flatMap(Base64URL.decode),
                    let publicKey = try? _RSA.Signing.PublicKey(n: n, e: e)
                else { return nil }
                return (key.kid, publicKey)
            }
        }
        return try await server.keys.publishedKeys().map { ($0.kid, $0.privateKey.publicKey) }
    }

    /// A claim's value as the decoder shows it: text as is, anything else as JSON.
    static func display(_ value: ClaimValue) -> String {
        switch value {
        case .string(let text): text
        case .number(let number): number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        case .bool(let flag): String(flag)
        case .null: "null"
        case .array(let items): "[" + items.map(display).joined(separator: ", ") + "]"
        case .object(let members): "{" + members.keys.sorted().map { "\($0): \(display(members[$0] ?? .null))" }.joined(separator: ", ") + "}"
        }
    }
}
