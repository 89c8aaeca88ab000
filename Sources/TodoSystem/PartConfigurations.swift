import Foundation
import IdentityServer
import TaskService
import UserJourneys
import WebApp

/// Each part's own configuration, made from the settings in one place per part: what a setting
/// means to the identity service, the Task API or the web app is decided here and nowhere else.
/// The defaults live with the part (`IdentityServerConfiguration.defaultPasswordHashCost`,
/// `WebAppConfiguration.defaultPageSize`) and ``Setting`` shows them.
extension SystemConfiguration {
    /// The identity service's configuration.
    public var identityServer: IdentityServerConfiguration {
        // The public origins' hosts too: a balancer forwards the name clients used.
        let publicHosts = [publicURL, publicAPIURL].compactMap { $0.flatMap { URL(string: $0)?.host } }
        // Behind a TLS-terminating proxy the browser's scheme is https: Secure cookies and HSTS.
        var identity = IdentityServerConfiguration(
            scheme: servedOverHTTPS ? "https" : "http", defaultAuthority: "\(displayHost):\(identityPort)",
            passwordHashCost: UInt8(passwordHashCost),
            // The outbox shows password-reset codes: only on a machine-local server that no
            // balancer publishes (a trusted proxy or a public URL elsewhere), unless asked for.
            developmentMailbox: devEndpoints || isMachineLocal,
            allowedHosts: Set(
                ["localhost", "127.0.0.1", "::1", host.lowercased(), displayHostName.lowercased()]
                    + publicHosts.map { $0.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]")) }),
            simulatedFacebook: simulatedFacebook, listenPort: identityPort)
        identity.refreshTokenReuseInterval = TimeInterval(refreshReuseSeconds)
        identity.logRetention = TimeInterval(logRetentionDays) * 86_400
        identity.publicOrigin = publicURL
        identity.trustedProxies = trustedProxies
        return identity
    }

    /// The Task API's configuration, trusting `policy` (the configured authorities, or the
    /// built-in service's user flows).
    func taskService(policy: BearerPolicy) -> TaskServiceConfiguration {
        var tasks = TaskServiceConfiguration(policy: policy, corsAllowedOrigins: corsOrigins, https: servedOverHTTPS)
        tasks.trustedProxies = trustedProxies
        return tasks
    }

    /// The web app's configuration, as the default tenant's confidential client.
    func webApp(
        clientID: String, clientSecret: String, authority: String, apiBaseURL: URL, apiScopes: [String], replyURLs: [String]
    ) -> WebAppConfiguration {
        var web = WebAppConfiguration(
            clientID: clientID, clientSecret: clientSecret, authority: authority, apiBaseURL: apiBaseURL, apiScopes: apiScopes)
        web.secure = servedOverHTTPS
        web.pageSize = webPageSize
        web.anonymousSessionsPerAddressPerHour = webAnonymousSessionsPerHour
        web.replyURLs = replyURLs
        if simulatedFacebook { web.facebookPolicy = "B2C_1_facebook" }
        return web
    }
}
