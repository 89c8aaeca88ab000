import Foundation
import Hummingbird
import IdentityDirectory

/// Which `Host` the service trusts to write URLs and issuers with: B2C's issuer and endpoints
/// follow the host that served the request (https://github.com/MicrosoftDocs/azure-docs/issues/17708), but only a plain
/// host[:port] naming an allowed host (and this service's port) is taken, so nothing odd
/// reaches a URL, a page or a token, and DNS rebinding gets nowhere.
package struct HostPolicy: Sendable {
    let scheme: String
    let defaultAuthority: String
    package let allowedHosts: Set<String>
    let listenPort: Int?
    let publicOrigin: String?

    package init(configuration: IdentityServerConfiguration) {
        publicOrigin = configuration.publicOrigin
        scheme = configuration.scheme
        defaultAuthority = configuration.defaultAuthority
        allowedHosts = configuration.allowedHosts
        listenPort = configuration.listenPort
    }

    /// `scheme://host[:port]` of the request. The host comes from the request (B2C's issuer and
    /// endpoints follow the host that served the request; https://github.com/MicrosoftDocs/azure-docs/issues/17708) but
    /// only if it is a plain host[:port], so nothing odd reaches a URL, a page or a token.
    package func origin(of request: Request) -> String {
        if let publicOrigin { return publicOrigin }
        let authority = request.head.authority ?? ""
        return "\(scheme)://\(isAllowedHost(request) ? Self.normalized(authority) : defaultAuthority.lowercased())"
    }

    /// An allowed authority as one spelling: the host in lower case, the port without leading
    /// zeros (`LocalHost:05080` is `localhost:5080`), so a URL, an issuer or a registered
    /// redirect URI is the same however a client wrote the `Host`.
    static func normalized(_ authority: String) -> String {
        var host = authority.lowercased()
        var port: Int?
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            let rest = host[host.index(after: end)...]
            if rest.hasPrefix(":") { port = Int(rest.dropFirst()) }
            host = String(host[...end])
        } else if let colon = host.lastIndex(of: ":") {
            port = Int(host[host.index(after: colon)...])
            host = String(host[..<colon])
        }
        return port.map { "\(host):\($0)" } ?? host
    }

    /// Every origin this service answers on as itself: the public origin, or each allowed host on
    /// its port (the admin console registers exactly these as its redirect URIs).
    package var knownOrigins: [String] {
        if let publicOrigin { return [publicOrigin] }
        var origins = ["\(scheme)://\(Self.normalized(defaultAuthority))"]
        for host in allowedHosts.sorted() {
            let name = host.contains(":") ? "[\(host)]" : host
            let origin = "\(scheme)://\(name)\(listenPort.map { ":\($0)" } ?? "")"
            if !origins.contains(origin) { origins.append(origin) }
        }
        return origins
    }

    /// Whether the request's `Host` is a plain host[:port] naming one of the allowed hosts on
    /// this service's port, or is exactly the public origin's (a balancer's port, issue 14).
    package func isAllowedHost(_ request: Request) -> Bool { isAllowedHost(authority: request.head.authority ?? "") }

    func isAllowedHost(authority: String) -> Bool {
        if let publicOrigin, let url = URLComponents(string: publicOrigin), let host = url.percentEncodedHost,
            authority.lowercased() == (url.port.map { "\(host):\($0)" } ?? host).lowercased()
        {
            return true
        }
        return Self.isAllowed(authority: authority, in: allowedHosts, port: listenPort)
    }

    /// Whether `authority` names an allowed host and, when it carries a port, the port this
    /// service listens on: `localhost:6666` must not make the service write URLs and issuers for
    /// a port something else may own (the security issue's L-11).
    static func isAllowed(authority: String, in allowed: Set<String>, port: Int? = nil) -> Bool {
        guard isPlainAuthority(authority) else { return false }
        var host = authority
        var given: Substring?
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            let rest = host[host.index(after: end)...]
            given = rest.hasPrefix(":") ? rest.dropFirst() : nil
            if !rest.isEmpty, given == nil { return false }
            host = String(host[host.index(after: host.startIndex)..<end])
        } else if let colon = host.lastIndex(of: ":") {
            given = host[host.index(after: colon)...]
            host = String(host[..<colon])
        }
        if let given {
            guard let number = Int(given), (1...65535).contains(number) else { return false }
            if let port, number != port { return false }
        }
        return allowed.contains(host.lowercased())
    }

    static func isPlainAuthority(_ authority: String) -> Bool {
        guard !authority.isEmpty, authority.count <= 255 else { return false }
        if authority.hasPrefix("[") {
            return authority.allSatisfy { $0.isHexDigit || ":[].".contains($0) || $0.isNumber }
        }
        return authority.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || ".-:".contains($0)) }
            && authority.filter { $0 == ":" }.count <= 1
    }

    /// Whether `issuer` names this service: its scheme and an allowed host on its port.
    package func isOwnIssuer(_ issuer: String) -> Bool {
        if let publicOrigin { return issuer.hasPrefix(publicOrigin + "/") }
        guard let url = URLComponents(string: issuer), url.scheme == scheme, let host = url.percentEncodedHost else { return false }
        let authority = url.port.map { "\(host):\($0)" } ?? host
        return Self.isAllowed(authority: authority, in: allowedHosts, port: listenPort)
    }

    /// B2C's default issuer: `{origin}/{tenant GUID}/v2.0/` (https://learn.microsoft.com/azure/active-directory-b2c/tokens-overview#compatibility);
    /// Entra's v2 issuer has no trailing slash: `{origin}/{tenant GUID}/v2.0` (SPEC §2.9).
    package static func issuer(origin: String, tenant: Tenant, face: ProtocolFace = .b2c) -> String {
        face.dialect.issuer(origin: origin, tenant: tenant)
    }
}
