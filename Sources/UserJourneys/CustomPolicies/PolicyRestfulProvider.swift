import AsyncHTTPClient
import Foundation
import NIOSSL
import ServerSupport
import IdentityDirectory
import NIOCore
import TrustFramework
import WireCoding

/// B2C's `RestfulProvider` technical profile (SPEC §2.12) over the service's outbound HTTP client:
/// `ServiceUrl`, `AuthenticationType` `None`/`Basic`/`Bearer`/`ClientCertificate` with the
/// credentials in policy key sets (`BasicAuthenticationUsername`, `BasicAuthenticationPassword`,
/// `BearerAuthenticationToken` or the claim `UseClaimAsBearerToken` names, a certificate uploaded
/// with `uploadPkcs12`), `SendClaimsIn` `Body` (JSON), `Form`, `QueryString`, `Url` (claims in the
/// path and query's placeholders) or `Header`. A 200
/// answer's members fill the output claims (by partner claim type; dotted paths with
/// `ResolveJsonPathsInJsonTokens`); a 4xx answer's `userMessage` (B2C's error contract
/// `version`/`status`/`userMessage`) is shown on the page; anything else, or no answer within
/// the timeout, ends the journey with AADB2C90075.
struct PolicyRestfulProvider: Sendable {
    let keySets: PolicyKeySetLibrary
    let certificateClients: ClientCertificateClients

    static let timeoutSeconds = 20
    static let maximumResponseBytes = 64 * 1024

    func call(_ profile: PolicyTechnicalProfile, claims: inout PolicyClaims, policy: CompiledPolicy, tenant: Tenant, step: String)
        async throws -> Void
    {
        func failure(_ code: String, _ reason: String) -> PolicyProfileFailure {
            .protocolFailure(.restfulFailed(profile: profile.id, step: step, code: code, reason: reason))
        }
        guard let url = profile.metadata["ServiceUrl"], OutboundURL.isAllowed(url) else { throw failure("Configuration", "ServiceUrl") }
        // `UseClaimAsBearerToken`: that claim is the bearer token, not one of the claims sent.
        let bearerClaim = profile.metadata["UseClaimAsBearerToken"]?.lowercased()
        var values: [(String, PolicyClaimValue)] = []
        for reference in profile.inputClaims where reference.claimType.lowercased() != bearerClaim {
            if let value = claims[reference.claimType] { values.append((reference.partnerClaimType ?? reference.claimType, value)) }
        }
        var target = url
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Accept", value: "application/json")
        // One call per step of a sign-in: no idle connection is kept to a service that may go away.
        request.headers.add(name: "Connection", value: "close")
        switch profile.metadata["SendClaimsIn"]?.lowercased() ?? "body" {
        case "form":
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: FormEncoding.encode(values.map { ($0.0, $0.1.text) })))
        case "querystring":
            request.method = .GET
            target += (url.contains("?") ? "&" : "?") + FormEncoding.encode(values.map { ($0.0, $0.1.text) })
            request.url = target
        case "url":
            // Each value percent-encoded into its placeholder; the host has none (checked at upload,
            // and again here: a profile may take its URL from one it includes).
            guard !RestfulURL.placeholderBeforePath(url) else { throw failure("Configuration", "a claim in the ServiceUrl's host") }
            request.method = .GET
            target = RestfulURL.filled(url, values: Dictionary(values.map { ($0.0, $0.1.text) }, uniquingKeysWith: { first, _ in first }))
            guard OutboundURL.isAllowed(target) else { throw failure("Configuration", "ServiceUrl") }
            request.url = target
        case "header":
            request.method = .GET
            for (name, value) in values {
                guard PolicyCheck.isClaimHeaderName(name) else { throw failure("Configuration", "the header name '\(name)'") }
                // A value that would end the header line (or any control character) is no header.
                guard !value.text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                    throw failure("InvalidRequest", "the claim sent in the header '\(name)' has a control character")
                }
                request.headers.add(name: name, value: value.text)
            }
        default:
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: JSONText.object(values.map { ($0.0, Self.json($0.1)) }).serialized))
        }
        var tls: TLSConfiguration?
        switch profile.metadata["AuthenticationType"]?.lowercased() ?? "none" {
        case "none": break
        case "clientcertificate":
            // TLS client authentication with the key set's active certificate (https only).
            guard url.lowercased().hasPrefix("https://"), let keySet = profile.keys["ClientCertificate"],
                let identity = try await keySets.clientIdentity(tenantID: tenant.id, keySet: keySet)
            else { throw failure("Configuration", "the client certificate's key set has no valid certificate, or the ServiceUrl is not https") }
            tls = certificateClients.configuration(for: identity, tenantID: tenant.id)
        case "basic":
            let user = try await secret(profile, "BasicAuthenticationUsername", tenant)
            let password = try await secret(profile, "BasicAuthenticationPassword", tenant)
            guard let user, let password else { throw failure("Configuration", "the basic credentials' key sets have no active secret") }
            request.headers.add(name: "Authorization", value: "Basic \(Data("\(user):\(password)".utf8).base64EncodedString())")
        case "bearer":
            let token: String?
            if let bearerClaim {
                token = claims.text(bearerClaim).flatMap { $0.isEmpty || $0.unicodeScalars.contains { $0.value < 0x21 || $0.value == 0x7F } ? nil : $0 }
            } else {
                token = try await secret(profile, "BearerAuthenticationToken", tenant)
            }
            guard let token else {
                throw failure("Configuration", bearerClaim == nil ? "the bearer token's key set has no active secret" : "the claim UseClaimAsBearerToken names has no token")
            }
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
        default: throw failure("Configuration", "AuthenticationType")
        }
        let answer: (status: Int, body: ByteBuffer)
        do {
            let tls = tls
            answer = try await OutboundTrace.call("\(request.method.rawValue) rest-profile", host: URL(string: request.url)?.host) { trace in
                var outgoing = request
                outgoing.headers.add(contentsOf: trace)
                return try await OutboundURL.withDeadline(seconds: Self.timeoutSeconds) { [outgoing] in
                    try await OutboundURL.execute(
                        outgoing, timeout: .seconds(Int64(Self.timeoutSeconds)), maximumBytes: Self.maximumResponseBytes, tls: tls)
                }
            }
        } catch {
            throw failure("RequestTimeout", "no answer within \(Self.timeoutSeconds) seconds")
        }
        let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(buffer: answer.body))
        switch answer.status {
        case 200..<300:
            guard let object else { throw failure("InvalidResponse", "the answer is not a JSON object") }
            let paths = profile.flag("ResolveJsonPathsInJsonTokens", default: false)
            for reference in profile.outputClaims {
                let name = reference.partnerClaimType ?? reference.claimType
                guard let value = paths ? Self.value(at: name, in: object) : object[name] else { continue }
                if let claim = Self.claimValue(value, as: policy.claimType(reference.claimType)?.dataType ?? .string) {
                    claims[reference.claimType] = claim
                }
            }
        case 400..<500:
            // B2C's error contract: the message is the person's to read, on the page.
            if case .string(let message)? = object?["userMessage"] { throw PolicyProfileFailure.userMessage(message) }
            throw failure("\(answer.status)", "the answer has no userMessage")
        default:
            throw failure("\(answer.status)", "the service answered \(answer.status)")
        }
    }

    private func secret(_ profile: PolicyTechnicalProfile, _ key: String, _ tenant: Tenant) async throws -> String? {
        guard let keySet = profile.keys[key] else { return nil }
        return try await keySets.activeSecret(tenantID: tenant.id, keySet: keySet)
    }

    static func json(_ value: PolicyClaimValue) -> JSONText {
        switch value {
        case .string(let text): .string(text)
        case .boolean(let flag): .bool(flag)
        case .integer(let number): .int(number)
        case .collection(let items): .array(items.map(JSONText.string))
        }
    }

    /// The value at a dotted path (`address.city`), a member with an index reading that item of
    /// its array (`elements[0].handle~.emailAddress`, as the LinkedIn scenario writes it).
    static func value(at path: String, in object: [String: JSONValue]) -> JSONValue? {
        var current: JSONValue = .object(object)
        for part in path.split(separator: ".") {
            var name = Substring(part)
            var indexes: [Int] = []
            while name.hasSuffix("]"), let open = name.lastIndex(of: "["), let index = Int(name[name.index(after: open)..<name.index(before: name.endIndex)]) {
                indexes.insert(index, at: 0)
                name = name[..<open]
            }
            guard case .object(let members) = current, let next = members[String(name)] else { return nil }
            current = next
            for index in indexes {
                guard case .array(let items) = current, items.indices.contains(index) else { return nil }
                current = items[index]
            }
        }
        return current
    }

    static func claimValue(_ value: JSONValue, as type: PolicyClaimType.DataType) -> PolicyClaimValue? {
        switch (value, type) {
        case (.array(let items), _):
            return .collection(items.compactMap { if case .string(let text) = $0 { text } else { nil } })
        case (.bool(let flag), _): return .boolean(flag)
        case (.number(let number), .int), (.number(let number), .long): return Int64(exactly: number).map(PolicyClaimValue.integer)
        case (.number(let number), _): return .string(Int64(exactly: number).map(String.init) ?? String(number))
        case (.string(let text), _): return PolicyClaimValue.parse(text, as: type)
        default: return nil
        }
    }
}
