import Foundation
import TodoModels

extension TenantDeclaration.ApplicationPart {
    /// The redirect URIs by platform: `redirectUris` on the kind's own, the others on theirs.
    var redirectsByPlatform: [RedirectPlatform: [String]] {
        let own: RedirectPlatform = kind == .confidential ? .web : .publicClient
        var platforms: [RedirectPlatform: [String]] = [
            .web: webRedirectUris ?? [], .spa: spaRedirectUris ?? [], .publicClient: publicClientRedirectUris ?? [],
        ]
        platforms[own, default: []].insert(contentsOf: redirectUris ?? [], at: 0)
        return platforms
    }

    /// What B2C's redirect-URI rules and Graph's `groupMembershipClaims` values refuse of it.
    func platformProblems() -> [String] {
        var problems: [String] = []
        for (platform, uris) in redirectsByPlatform {
            // Only a native app's redirect may be a custom scheme.
            let kind: ClientKind = platform == .publicClient ? .public : .confidential
            for uri in uris {
                if let problem = RedirectURIRule.problem(with: uri, kind: kind) { problems.append("application '\(name)': \(problem)") }
            }
        }
        if let claims = groupMembershipClaims,
            !claims.split(separator: ",").allSatisfy({
                ["none", "securitygroup", "all", "directoryrole", "applicationgroup"].contains($0.trimmingCharacters(in: .whitespaces).lowercased())
            })
        {
            problems.append("application '\(name)': groupMembershipClaims is None, SecurityGroup, All, DirectoryRole or ApplicationGroup")
        }
        return problems
    }
}

extension TenantDeclaration {
    /// The authentication extensions' own problems, and each flow's bindings: a declared
    /// extension of the event it is bound to.
    func extensionProblems() -> [String] {
        let extensions = authenticationExtensions ?? []
        var problems = extensions.flatMap { $0.problems() }
        let names = extensions.map(\.name)
        if Set(names).count != names.count { problems.append("authentication extension names must be unique") }
        if names.count > AuthenticationExtension.maximumPerTenant {
            problems.append("at most \(AuthenticationExtension.maximumPerTenant) authentication extensions")
        }
        for flow in userFlows {
            for (event, name) in flow.authenticationExtensions?.bindings ?? [] {
                guard let declared = extensions.first(where: { $0.name == name }) else {
                    problems.append("user flow \(flow.name): authentication extension '\(TextRules.printable(name))' is not one of the authenticationExtensions")
                    continue
                }
                if declared.event != event {
                    problems.append("user flow \(flow.name): '\(name)' is an \(declared.event.rawValue) extension, not \(event.rawValue)")
                }
            }
        }
        return problems
    }
}
