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
        // Microsoft Graph: every route's caller proved once (``GraphBearer``) and admitted by its
        // operation's permission in the resource's route collection; errors in Graph's form.
        let graphCallers = GraphCallers(users: service.users, tenants: service.tenants, administration: administration)
        func graphGroup(_ path: RouterPath) -> RouterGroup<GraphRequestContext> {
            router.group(path, context: GraphRequestContext.self)
                .add(middleware: GraphErrorMiddleware<GraphRequestContext>(clock: service.clock))
                .add(middleware: GraphBearer(keys: service.keys, clock: service.clock, hosts: service.hosts))
        }
        let graph = graphGroup("v1.0")
        let beta = graphGroup("beta")
        graph.group().add(middleware: graphCallers.delegated(scope: GraphMe.scope)).get("me", use: GraphMe().handle)
        // The directory API B2C tenants are managed with (SPEC §2.10), for app-only tokens.
        graph.addRoutes(GraphUsers(permit: graphCallers, server: self, hosts: service.hosts).endpoints)
        graph.addRoutes(GraphSignIns(permit: graphCallers, clock: service.clock, log: service.signIns.log, hosts: service.hosts).endpoints)
        graph.addRoutes(GraphDirectoryRoles(permit: graphCallers, server: self).endpoints)
        // Graph as the management plane (SPEC §2.14): app registrations, their service
        // principals and admin consent.
        graph.addRoutes(GraphApplications(permit: graphCallers, server: self, hosts: service.hosts).endpoints)
        graph.addRoutes(GraphServicePrincipals(permit: graphCallers, server: self, hosts: service.hosts).endpoints)
        graph.addRoutes(GraphPermissionGrants(permit: graphCallers, server: self, hosts: service.hosts).endpoints)
        graph.addRoutes(GraphGroups(permit: graphCallers, server: self, hosts: service.hosts).endpoints)
        graph.addRoutes(
            GraphDirectoryAudits(
                permit: graphCallers, clock: service.clock, audits: service.directoryAudits, signIns: service.signIns.log, hosts: service.hosts
            ).endpoints)
        // The user-flow engine's resources (SPEC §2.14), on the tenant YAML's store; v1.0 and beta alike.
        for version in [graph, beta] { addIdentityResources(to: version, callers: graphCallers) }
        // Graph beta: the tenant's custom policies and their key sets (SPEC §2.12), B2C user
        // flows with their providers, attributes, languages and connectors.
        beta.addRoutes(GraphTrustFramework(permit: graphCallers, administration: administration).endpoints)
        beta.addRoutes(
            GraphB2CUserFlows(permit: graphCallers, server: self, simulatedFacebook: service.configuration.servesSimulatedFacebook).endpoints)
        beta.addRoutes(GraphUserFlowAssignments(permit: graphCallers, server: self).endpoints)
        beta.addRoutes(GraphKeySets(permit: graphCallers, keySets: service.policyKeySets, administration: administration).endpoints)
        // The admin console (SPEC §2.13): server-rendered pages for the default tenant's admins.
        AdminConsole(server: self, sessions: ConsoleSessions(database: database), pages: consolePages).addRoutes(to: router)
        // The Microsoft identity platform face (SPEC §2.9): UserInfo (served by Graph in the
        // cloud), instance discovery, and the page every AADSTS error's `error_uri` names.
        let userInfo = graphGroup("oidc").add(middleware: graphCallers.delegated(scope: nil))
        userInfo.get("userinfo", use: UserInfo().handle)
        userInfo.post("userinfo", use: UserInfo().handle)
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

    /// Graph's `identity/userFlowAttributes`, `identity/apiConnectors`,
    /// `identity/customAuthenticationExtensions` and `identity/identityProviders`.
    private func addIdentityResources(to graph: RouterGroup<GraphRequestContext>, callers: GraphCallers) {
        graph.addRoutes(GraphIdentityResources(permit: callers, server: self, hosts: service.hosts).endpoints)
        graph.addRoutes(GraphAuthenticationExtensions(permit: callers, server: self).endpoints)
        graph.addRoutes(
            GraphIdentityProviders(permit: callers, server: self, simulatedFacebook: service.configuration.servesSimulatedFacebook).endpoints)
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
