import Foundation
import Storage

extension TodoSystem {
    /// What `serve` prints once it accepts connections: every address a developer needs.
    public var banner: String {
        guard let seed else {
            return "TodoB2C Task API on \(apiBaseURL)/api/tasks trusting \(configuration.authorities.joined(separator: ", "))"
        }
        let tenant = seed.tenant
        let client = seed.publicApp.clientIDString
        let base = identityBaseURL
        var lines = [
            "TodoB2C is running.",
            "  identity service  \(base)",
            "  web app           \(configuration.scheme)://\(configuration.displayHost.replacingOccurrences(of: "127.0.0.1", with: "localhost")):\(configuration.apiPort)/",
            "  task API          \(apiBaseURL)/api/tasks",
            "  tenant            \(tenant.name) (\(tenant.guid))",
            "  client id         \(client)",
            "  discovery         \(base)/\(tenant.name)/\(tenant.defaultPolicy)/v2.0/.well-known/openid-configuration",
            "  sign up / sign in \(base)/\(tenant.name)/\(tenant.defaultPolicy)/oauth2/v2.0/authorize?client_id=\(client)&response_type=code&redirect_uri=urn:ietf:wg:oauth:2.0:oob&scope=openid%20offline_access%20\(client)&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256",
            "  settings          \(settingsPath ?? "")",
            "  data              \(configuration.store.dataDirectory) (\(DatabaseFactory.redacted(configuration.store.databaseURL)))",
        ]
        // Only where the test-control surface is served (a machine-local server, or --dev-endpoints).
        if configuration.identityServer.developmentMailbox { lines.insert("  dev outbox        \(base)/dev/outbox", at: 8) }
        if let caCertificatePath { lines.append("  CA certificate    \(caCertificatePath)") }
        return lines.joined(separator: "\n")
    }
}
