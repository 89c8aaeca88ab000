import Foundation
import Hummingbird
import IdentityDirectory
import ServerSupport
import Storage
import UserJourneys

extension IdentityServer {
    /// Every route of the identity service (SPEC §2.2): this function is the table of contents.
    ///
    /// Paths match case-insensitively, as B2C's do (MSAL lower-cases authorities). Each protocol
    /// endpoint is registered once per URL shape B2C accepts (https://learn.microsoft.com/azure/active-directory-b2c/b2clogin);
    /// a ``PolicyResolver`` per shape resolves tenant and flow into a ``PolicyRequestContext``,
    /// and each group's error middleware writes failures in its callers' wire format.
    public func buildRouter() -> Router<IdentityRequestContext> { buildRouter(journeys: service.journeyEngine()) }

    /// The router with `journeys` as the journey engine (a test's, with journeys of its own).
    func buildRouter(journeys: JourneyEngine) -> Router<IdentityRequestContext> {
        let service = self.service
        let router = Router(context: IdentityRequestContext.self, options: .caseInsensitive)
        router.add(middleware: SecurityHeadersMiddleware(https: service.configuration.secureCookies))
        router.add(middleware: StatementDeadlineMiddleware(deadline: service.configuration.statementDeadline))
        router.add(middleware: RequestLogMiddleware(.identityService))
        router.add(middleware: RequestTelemetryMiddleware(part: "identity"))
        router.add(middleware: UnhandledErrorMiddleware())
        if !service.configuration.trustedProxies.isEmpty {
            router.add(middleware: ForwardedClientMiddleware(proxies: TrustedProxies(service.configuration.trustedProxies)))
        }

        let assets = AssetController(tenants: service.tenants, pages: service.pages)
        router.get("healthz") { _, _ -> Response in .json(.object([("status", .string("ok"))])) }
        let database = self.database
        // For a balancer's health check: within a second, 503 while the database cannot be used.
        router.get("readyz") { _, context -> Response in
            do {
                try await database.checkReady()
                return .json(.object([("status", .string("ready"))]))
            } catch {
                context.logger.warning("not ready", metadata: ["error": "\(error)"])
                return Response.json(.object([("status", .string("unavailable"))]), status: .serviceUnavailable).retryingAfter()
            }
        }
        router.get("static/style.css", use: assets.defaultStylesheet)
        router.get("static/tenants/:tenant/style.css", use: assets.tenantStylesheet)
        let graph = router.group("v1.0").add(middleware: GraphErrorMiddleware<IdentityRequestContext>(clock: service.clock))
        let graphCallers = GraphCaller.Authenticator(
            keys: service.keys, users: service.users, tenants: service.tenants, clock: service.clock, hosts: service.hosts)
        graph.get("me", use: GraphMe(authenticator: graphCallers).handle)
        // The directory API B2C tenants are managed with (SPEC §2.10), for app-only tokens.
        let users = GraphUsers(authenticator: graphCallers, server: self, hosts: service.hosts)
        graph.get("users", use: users.list)
        graph.post("users", use: users.create)
        graph.get("users/:id", use: users.get)
        graph.patch("users/:id", use: users.update)
        graph.delete("users/:id", use: users.delete)
        graph.post("users/:id/revokeSignInSessions", use: users.revokeSignInSessions)
        // The sign-in log (SPEC §2.13).
        let signIns = GraphSignIns(authenticator: graphCallers, log: service.signIns.log, hosts: service.hosts)
        graph.get("auditLogs/signIns", use: signIns.list)
        graph.get("auditLogs/signIns/:id", use: signIns.get)
        // The admin console (SPEC §2.13): server-rendered pages for the default tenant's admins.
        AdminConsole(server: self, sessions: ConsoleSessions(database: database), pages: consolePages).addRoutes(to: router)
        let roles = GraphDirectoryRoles(authenticator: graphCallers, server: self)
        graph.get("directoryRoles", use: roles.list)
        graph.get("directoryRoles/:id", use: roles.get)
        graph.get("directoryRoles/:id/members", use: roles.members)
        graph.post("directoryRoles/:id/members/$ref", use: roles.addMember)
        graph.delete("directoryRoles/:id/members/:member/$ref", use: roles.removeMember)
        // Graph as the management plane (SPEC §2.14): app registrations, their service
        // principals and admin consent. `{id}` is an object id or Graph's alternate key
        // (`applications(appId='…')`, a segment the `{key}` capture takes whole).
        let applications = GraphApplications(authenticator: graphCallers, server: self, hosts: service.hosts)
        graph.get("applications", use: applications.list)
        graph.post("applications", use: applications.create)
        for path in ["applications/:id", "applications{id}"] {
            graph.get(RouterPath(path), use: applications.get)
            graph.patch(RouterPath(path), use: applications.update)
            graph.delete(RouterPath(path), use: applications.delete)
            graph.post(RouterPath(path + "/addPassword"), use: applications.addPassword)
            graph.post(RouterPath(path + "/removePassword"), use: applications.removePassword)
        }
        let principals = GraphServicePrincipals(authenticator: graphCallers, server: self, hosts: service.hosts)
        graph.get("servicePrincipals", use: principals.list)
        graph.post("servicePrincipals", use: principals.create)
        for path in ["servicePrincipals/:id", "servicePrincipals{id}"] {
            graph.get(RouterPath(path), use: principals.get)
            graph.get(RouterPath(path + "/appRoleAssignments"), use: principals.listAssignments)
            graph.post(RouterPath(path + "/appRoleAssignments"), use: principals.assign)
            graph.delete(RouterPath(path + "/appRoleAssignments/:assignment"), use: principals.unassign)
            graph.get(RouterPath(path + "/appRoleAssignedTo"), use: principals.listAssignedTo)
        }
        let grants = GraphPermissionGrants(authenticator: graphCallers, server: self, hosts: service.hosts)
        graph.get("oauth2PermissionGrants", use: grants.list)
        graph.post("oauth2PermissionGrants", use: grants.create)
        graph.get("oauth2PermissionGrants/:id", use: grants.get)
        graph.patch("oauth2PermissionGrants/:id", use: grants.update)
        graph.delete("oauth2PermissionGrants/:id", use: grants.delete)
        // Security groups and memberships (SPEC §2.14).
        let groups = GraphGroups(authenticator: graphCallers, server: self, hosts: service.hosts)
        graph.get("groups", use: groups.list)
        graph.post("groups", use: groups.create)
        graph.get("groups/:id", use: groups.get)
        graph.patch("groups/:id", use: groups.update)
        graph.delete("groups/:id", use: groups.delete)
        graph.get("groups/:id/members", use: groups.listMembers)
        graph.post("groups/:id/members/$ref", use: groups.addMember)
        graph.delete("groups/:id/members/:member/$ref", use: groups.removeMember)
        graph.get("groups/:id/memberOf", use: groups.memberships(transitive: false, ofGroup: true))
        graph.get("groups/:id/transitiveMemberOf", use: groups.memberships(transitive: true, ofGroup: true))
        graph.post("groups/:id/checkMemberGroups", use: groups.checkMemberGroups(ofGroup: true))
        graph.get("users/:id/memberOf", use: groups.memberships(transitive: false, ofGroup: false))
        graph.get("users/:id/transitiveMemberOf", use: groups.memberships(transitive: true, ofGroup: false))
        graph.post("users/:id/checkMemberGroups", use: groups.checkMemberGroups(ofGroup: false))
        graph.post("users/:id/getMemberObjects", use: groups.memberObjects(ofGroup: false))
        graph.post("groups/:id/getMemberObjects", use: groups.memberObjects(ofGroup: true))
        // The user-flow engine's resources (SPEC §2.14), on the tenant YAML's store.
        let directoryAudits = GraphDirectoryAudits(
            authenticator: graphCallers, audits: service.directoryAudits, signIns: service.signIns.log, hosts: service.hosts)
        graph.get("auditLogs/directoryAudits", use: directoryAudits.list)
        graph.get("auditLogs/directoryAudits/:id", use: directoryAudits.get)
        // Graph beta: the tenant's custom policies (SPEC §2.12).
        let beta = router.group("beta").add(middleware: GraphErrorMiddleware<IdentityRequestContext>(clock: service.clock))
        // The user-flow engine's resources (SPEC §2.14), on the tenant YAML's store; v1.0 and beta alike.
        for version in [graph, beta] { addIdentityResources(to: version, callers: graphCallers) }
        let policies = GraphTrustFramework(authenticator: graphCallers, administration: administration)
        beta.get("trustFramework/policies", use: policies.list)
        beta.post("trustFramework/policies", use: policies.create)
        beta.get("trustFramework/policies/:id", use: policies.get)
        beta.delete("trustFramework/policies/:id", use: policies.delete)
        beta.get("trustFramework/policies/:id/$value", use: policies.value)
        beta.put("trustFramework/policies/:id/$value", use: policies.put)
        // B2C user flows (Graph beta), with their providers, attributes, languages and connectors.
        let flows = GraphB2CUserFlows(authenticator: graphCallers, server: self, simulatedFacebook: service.configuration.servesSimulatedFacebook)
        let assignments = GraphUserFlowAssignments(authenticator: graphCallers, server: self)
        beta.get("identity/b2cUserFlows", use: flows.list)
        beta.post("identity/b2cUserFlows", use: flows.create)
        beta.get("identity/b2cUserFlows/:id", use: flows.get)
        beta.patch("identity/b2cUserFlows/:id", use: flows.update)
        beta.delete("identity/b2cUserFlows/:id", use: flows.delete)
        for list in ["identityProviders", "userFlowIdentityProviders"] {
            beta.get(RouterPath("identity/b2cUserFlows/:id/\(list)"), use: flows.providers)
            beta.post(RouterPath("identity/b2cUserFlows/:id/\(list)/$ref"), use: flows.addProvider)
            beta.patch(RouterPath("identity/b2cUserFlows/:id/\(list)/$ref"), use: flows.addProvider)
            beta.delete(RouterPath("identity/b2cUserFlows/:id/\(list)/:provider/$ref"), use: flows.removeProvider)
        }
        beta.get("identity/b2cUserFlows/:id/apiConnectorConfiguration", use: flows.connectorConfiguration)
        beta.put("identity/b2cUserFlows/:id/apiConnectorConfiguration/:step/$ref", use: flows.putConnector)
        beta.get("identity/b2cUserFlows/:id/userAttributeAssignments", use: assignments.list)
        beta.post("identity/b2cUserFlows/:id/userAttributeAssignments", use: assignments.create)
        beta.get("identity/b2cUserFlows/:id/userAttributeAssignments/getOrder", use: assignments.getOrder)
        beta.get("identity/b2cUserFlows/:id/userAttributeAssignments/getOrder()", use: assignments.getOrder)
        beta.post("identity/b2cUserFlows/:id/userAttributeAssignments/setOrder", use: assignments.setOrder)
        beta.get("identity/b2cUserFlows/:id/userAttributeAssignments/:assignment", use: assignments.get)
        beta.patch("identity/b2cUserFlows/:id/userAttributeAssignments/:assignment", use: assignments.update)
        beta.delete("identity/b2cUserFlows/:id/userAttributeAssignments/:assignment", use: assignments.delete)
        beta.get("identity/b2cUserFlows/:id/languages", use: assignments.languages)
        let keySets = GraphKeySets(authenticator: graphCallers, keySets: service.policyKeySets, administration: administration)
        beta.get("trustFramework/keySets", use: keySets.list)
        beta.post("trustFramework/keySets", use: keySets.create)
        beta.get("trustFramework/keySets/:id", use: keySets.get)
        beta.delete("trustFramework/keySets/:id", use: keySets.delete)
        beta.post("trustFramework/keySets/:id/generateKey", use: keySets.generateKey)
        beta.post("trustFramework/keySets/:id/uploadSecret", use: keySets.uploadSecret)
        beta.post("trustFramework/keySets/:id/uploadPkcs12", use: keySets.uploadPkcs12)
        // An OData function: Microsoft's SDKs call it with its parentheses.
        beta.get("trustFramework/keySets/:id/getActiveKey()", use: keySets.activeKey)
        beta.get("trustFramework/keySets/:id/getActiveKey", use: keySets.activeKey)
        // The Microsoft identity platform face (SPEC §2.9): UserInfo (served by Graph in the
        // cloud), instance discovery, and the page every AADSTS error's `error_uri` names.
        let userInfo = router.group("oidc").add(middleware: GraphErrorMiddleware<IdentityRequestContext>(clock: service.clock))
        userInfo.get("userinfo", use: UserInfo(authenticator: graphCallers).handle)
        userInfo.post("userinfo", use: UserInfo(authenticator: graphCallers).handle)
        router.get(":tenant/discovery/instance", use: InstanceDiscovery(hosts: service.hosts, clock: service.clock).handle)
        router.get("error", use: EntraErrorPage(pages: service.pages).handle)
        // MSAL Python asks for the user realm before ROPC and accepts a 404 (https://github.com/AzureAD/microsoft-authentication-library-for-python/blob/dev/msal/authority.py).
        // Under `:tenant`, not `common`: the trie does not backtrack out of a first segment, so a
        // `common` constant would hide `/common/v2.0/…`.
        router.get(":tenant/userrealm/**") { _, _ -> Response in .json(.object([("error", .string("not_found"))]), status: .notFound) }

        let browser = router.group().add(
            middleware: PageErrorMiddleware<IdentityRequestContext>(pages: service.pages, clock: service.clock))
        let facebook = SimulatedFacebook(service: service, journeys: journeys)
        // Federation callbacks: B2C's one (the simulated Facebook's) and one per upstream provider.
        let federation = UpstreamFederation(service: service, simulatedFacebook: facebook, journeys: journeys)
        browser.get(":tenant/oauth2/authresp", use: federation.callback)
        browser.get(":tenant/oauth2/authresp/:provider", use: federation.callback)
        // A custom policy's OpenID Connect profile with B2C's default `response_mode` `form_post`.
        browser.post(":tenant/oauth2/authresp/:provider", use: federation.callback)
        if service.configuration.servesSimulatedFacebook {
            browser.get("facebook.com/dialog/oauth", use: facebook.dialog)
            browser.post("facebook.com/dialog/oauth", use: facebook.dialog)
        }
        // The test-control surface, where development is on (a loopback server or --dev-endpoints).
        if service.configuration.developmentMailbox {
            let development = DevelopmentEndpoints(server: self)
            let dev = router.group("dev").add(middleware: SameOriginOnly(hosts: service.hosts))
                .add(middleware: OAuthErrorMiddleware<IdentityRequestContext>(clock: service.clock))
            dev.get("outbox", use: development.outbox)
            dev.get("journeys/:correlationId", use: development.journeyTrace)
            dev.post("tokens", use: development.tokens)
            dev.post("reset", use: development.reset)
            dev.post("faults", use: development.arm)
            dev.delete("faults", use: development.disarm)
            dev.get("clock", use: development.readClock)
            dev.post("clock", use: development.advanceClock)
            dev.delete("clock", use: development.resetClock)
        }

        // `/te/` is the legacy "trust framework edge" prefix of the 2017 iOS quickstart.
        let shapes: [(RouterPath, PolicyPlacement)] = [
            (":tenant/:policy", .path), ("tfp/:tenant/:policy", .tfp), ("te/:tenant/:policy", .tfp), (":tenant", .query),
        ]
        for (prefix, placement) in shapes {
            addProtocolRoutes(to: router.group(prefix), placement: placement, journeys: journeys)
        }
        return router
    }

    /// Graph's `identity/userFlowAttributes`, `identity/apiConnectors` and `identity/identityProviders`.
    private func addIdentityResources(to graph: RouterGroup<IdentityRequestContext>, callers graphCallers: GraphCaller.Authenticator) {
        let service = self.service
        let identity = GraphIdentityResources(authenticator: graphCallers, server: self, hosts: service.hosts)
        graph.get("identity/userFlowAttributes", use: identity.listAttributes)
        graph.post("identity/userFlowAttributes", use: identity.createAttribute)
        graph.get("identity/userFlowAttributes/:id", use: identity.getAttribute)
        graph.patch("identity/userFlowAttributes/:id", use: identity.updateAttribute)
        graph.delete("identity/userFlowAttributes/:id", use: identity.deleteAttribute)
        graph.get("identity/apiConnectors", use: identity.listConnectors)
        graph.post("identity/apiConnectors", use: identity.createConnector)
        graph.get("identity/apiConnectors/:id", use: identity.getConnector)
        graph.patch("identity/apiConnectors/:id", use: identity.updateConnector)
        graph.delete("identity/apiConnectors/:id", use: identity.deleteConnector)
        let extensions = GraphAuthenticationExtensions(authenticator: graphCallers, server: self)
        graph.get("identity/customAuthenticationExtensions", use: extensions.list)
        graph.post("identity/customAuthenticationExtensions", use: extensions.create)
        graph.get("identity/customAuthenticationExtensions/:id", use: extensions.get)
        graph.patch("identity/customAuthenticationExtensions/:id", use: extensions.update)
        graph.delete("identity/customAuthenticationExtensions/:id", use: extensions.delete)
        let providers = GraphIdentityProviders(
            authenticator: graphCallers, server: self, simulatedFacebook: service.configuration.servesSimulatedFacebook)
        graph.get("identity/identityProviders", use: providers.list)
        graph.post("identity/identityProviders", use: providers.create)
        graph.get("identity/identityProviders/availableProviderTypes", use: providers.availableTypes)
        graph.get("identity/identityProviders/:id", use: providers.get)
        graph.patch("identity/identityProviders/:id", use: providers.update)
        graph.delete("identity/identityProviders/:id", use: providers.delete)
    }

    /// External ID's native authentication API (SPEC §2.15): sign-in, sign-up and password
    /// reset without a browser; the token endpoint ends each.
    private func addNativeAuthRoutes(to machine: RouterGroup<PolicyRequestContext>, api: NativeAuthAPI) {
        let signIn = NativeAuthSignIn(api: api)
        machine.post("oauth2/v2.0/initiate", use: signIn.initiate)
        machine.post("oauth2/v2.0/challenge", use: signIn.challenge)
        machine.post("oauth2/v2.0/introspect", use: signIn.introspect)
        let signUp = NativeAuthSignUp(api: api)
        machine.post("signup/v1.0/start", use: signUp.start)
        machine.post("signup/v1.0/challenge", use: signUp.challenge)
        machine.post("signup/v1.0/continue", use: signUp.continue)
        let reset = NativeAuthPasswordReset(api: api)
        machine.post("resetpassword/v1.0/start", use: reset.start)
        machine.post("resetpassword/v1.0/challenge", use: reset.challenge)
        machine.post("resetpassword/v1.0/continue", use: reset.continue)
        machine.post("resetpassword/v1.0/submit", use: reset.submit)
        machine.post("resetpassword/v1.0/poll_completion", use: reset.pollCompletion)
        let registration = NativeAuthRegistration(api: api)
        machine.post("register/v1.0/introspect", use: registration.introspect)
        machine.post("register/v1.0/challenge", use: registration.challenge)
        machine.post("register/v1.0/continue", use: registration.continue)
    }

    /// The protocol endpoints under one URL shape. Old (v1-style) paths without `v2.0` are
    /// served too: B2C answers both (https://learn.microsoft.com/azure/active-directory-b2c/b2clogin).
    private func addProtocolRoutes(to shape: RouterGroup<IdentityRequestContext>, placement: PolicyPlacement, journeys: JourneyEngine) {
        let service = self.service
        let resolver = PolicyResolver(
            tenants: service.tenants, customPolicies: service.customPolicies, offered: { service.offered($0) }, placement: placement)

        // Machine-facing: errors as B2C's JSON.
        let machine = shape.group()
            .add(middleware: OAuthErrorMiddleware<IdentityRequestContext>(clock: service.clock, placement: placement, hosts: service.hosts))
            .add(middleware: resolver)
            .group(context: PolicyRequestContext.self)
        let metadata = MetadataEndpoints(signingKeys: service.keys, policyKeys: service.policyKeySets, hosts: service.hosts)
        // Native authentication (SPEC §2.15) on the Entra face's policy-less URLs only.
        let native = placement == .query ? NativeAuthAPI(service: service, flows: NativeAuthFlows(database: database)) : nil
        var token = TokenEndpoint(
            tenants: service.tenants, users: service.users, grants: service.grants, consents: service.consents, tokens: service.issuer,
            clock: service.clock, hosts: service.hosts,
            connectors: service.connectors,
            journeys: journeys, refreshReuseInterval: service.configuration.refreshTokenReuseInterval,
            signIns: service.signIns)
        token.nativeAuth = native
        if let native { addNativeAuthRoutes(to: machine, api: native) }
        for path in ["v2.0/.well-known/openid-configuration", ".well-known/openid-configuration"] {
            machine.get(RouterPath(path), use: metadata.discovery)
        }
        for path in ["discovery/v2.0/keys", "discovery/keys"] { machine.get(RouterPath(path), use: metadata.jwks) }
        // The test-control surface's faults answer the token endpoint where it is on; production
        // routes have no such middleware.
        let tokenRoutes =
            service.configuration.developmentMailbox
            ? machine.group().add(middleware: FaultMiddleware(faults: service.faults)) : machine.group()
        for path in ["oauth2/v2.0/token", "oauth2/token"] { tokenRoutes.post(RouterPath(path), use: token.handle) }

        // Browser-facing: errors as a page, branded once the tenant is known.
        let pages = PageErrorMiddleware<IdentityRequestContext>(pages: service.pages, clock: service.clock, placement: placement)
        let browser = shape.group()
            .add(middleware: pages)
            .add(middleware: resolver)
            .group(context: PolicyRequestContext.self)
            .add(middleware: PageErrorMiddleware<PolicyRequestContext>(pages: service.pages, clock: service.clock, placement: placement))
        let authorize = AuthorizeEndpoint(service: service, journeys: journeys)
        let logout = LogoutEndpoint(
            tenants: service.tenants, sessions: service.interactions, keys: service.keys, policyKeys: service.policyKeySets,
            pages: service.pages,
            cookies: BrowserCookies(secure: service.configuration.secureCookies), clock: service.clock)
        let hosted = HostedPages(journeys: journeys)
        for path in ["oauth2/v2.0/authorize", "oauth2/authorize"] {
            browser.get(RouterPath(path), use: authorize.handle)
            browser.post(RouterPath(path), use: authorize.handle)
        }
        for path in ["oauth2/v2.0/logout", "oauth2/logout"] {
            browser.get(RouterPath(path), use: logout.handle)
            browser.post(RouterPath(path), use: logout.handle)
        }
        hosted.addRoutes(to: browser)
    }
}

/// The stylesheets of the hosted pages: the built-in one and each tenant's own.
struct AssetController: Sendable {
    let tenants: any TenantDirectory
    let pages: PageRenderer

    @Sendable func defaultStylesheet(_ request: Request, context: some RequestContext) async throws -> Response {
        Self.css(pages.stylesheet(for: nil))
    }

    @Sendable func tenantStylesheet(_ request: Request, context: some RequestContext) async throws -> Response {
        let tenant = try await tenants.tenant(matching: context.parameters.get("tenant") ?? "")
        return Self.css(pages.stylesheet(for: tenant))
    }

    private static func css(_ text: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "public, max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
