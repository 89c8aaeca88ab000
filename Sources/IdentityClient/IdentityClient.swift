import Foundation
@_exported import IdentityClientCore
import Logging

// The SDK as apps import it: everything in IdentityClientCore, plus `URLSessionTransport` as the
// transport wherever one is left out. The core has no URLSession so that a server embedding the
// SDK (the web app) does not load FoundationNetworking and the libcurl stack under it on Linux:
// 11 MB of the identity service's idle RSS (issue 13).

extension ClientConfiguration {
    /// A configuration that sends requests with a new ``URLSessionTransport``.
    public init(
        clientID: String, authority: Authority, redirectURI: String = "http://127.0.0.1", tokenStore: any TokenStore = InMemoryTokenStore(),
        logger: Logger = Logger(label: "IdentityClient"), clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            clientID: clientID, authority: authority, redirectURI: redirectURI, tokenStore: tokenStore, transport: URLSessionTransport(),
            logger: logger, clock: clock)
    }
}
