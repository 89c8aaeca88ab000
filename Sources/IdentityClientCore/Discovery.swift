import Foundation

/// The fields of an OpenID Provider's configuration the SDK uses (OpenID Connect Discovery 1.0 §3).
public struct OpenIDConfiguration: Sendable, Hashable, Codable {
    public var issuer: String
    public var authorizationEndpoint: URL
    public var tokenEndpoint: URL
    public var endSessionEndpoint: URL?
    public var jwksURI: URL?

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case endSessionEndpoint = "end_session_endpoint"
        case jwksURI = "jwks_uri"
    }

    public init(issuer: String, authorizationEndpoint: URL, tokenEndpoint: URL, endSessionEndpoint: URL? = nil, jwksURI: URL? = nil) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.endSessionEndpoint = endSessionEndpoint
        self.jwksURI = jwksURI
    }
}

/// Discovery documents by URL, fetched once per process (and again after a day); concurrent
/// callers for the same document share one request.
actor DiscoveryCache {
    private var documents: [URL: (configuration: OpenIDConfiguration, fetched: Date)] = [:]
    private var inFlight: [URL: Task<OpenIDConfiguration, any Error>] = [:]
    private let transport: any HTTPTransport
    private let lifetime: TimeInterval = 86_400

    init(transport: any HTTPTransport) { self.transport = transport }

    func configuration(for authority: Authority, now: Date) async throws -> OpenIDConfiguration {
        let url = try authority.discoveryURL()
        if let cached = documents[url], now.timeIntervalSince(cached.fetched) < lifetime { return cached.configuration }
        if let task = inFlight[url] { return try await task.value }
        let transport = self.transport
        let task = Task { try await Self.fetch(url, transport: transport) }
        inFlight[url] = task
        defer { inFlight[url] = nil }
        let configuration = try await task.value
        documents[url] = (configuration, now)
        return configuration
    }

    static func fetch(_ url: URL, transport: any HTTPTransport) async throws -> OpenIDConfiguration {
        let response = try await transport.send(TransportRequest(method: "GET", url: url, headers: ["Accept": "application/json"]))
        guard response.status == 200 else {
            if let error = try? JSONDecoder().decode(OAuthErrorBody.self, from: response.body) {
                throw IdentityError.fromOAuth(error: error.error, description: error.errorDescription)
            }
            throw IdentityError.invalidConfiguration("no OpenID configuration at \(url.absoluteString) (HTTP \(response.status))")
        }
        do {
            return try JSONDecoder().decode(OpenIDConfiguration.self, from: response.body)
        } catch {
            throw IdentityError.invalidConfiguration("the OpenID configuration at \(url.absoluteString) is not valid JSON")
        }
    }
}

/// RFC 6749 §5.2.
struct OAuthErrorBody: Decodable {
    var error: String
    var errorDescription: String?
    var correlationID: String?

    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
        case correlationID = "correlation_id"
    }
}
