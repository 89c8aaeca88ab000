import Foundation
import Hummingbird
import IdentityDirectory
import Logging

/// The hosted pages of a transaction: `…/{tenant}/{policy}/pages/{page}?tx=…` (SPEC §2.3).
/// GET shows a page; POST (with the CSRF token) acts on it; either way the journey's current
/// step answers (``JourneyEngine``). ``TransactionLoader`` loads the transaction first, so a
/// handler starts from a ``PageRequestContext``. Errors are pages, written by the group's
/// ``PageErrorMiddleware``.
package struct HostedPages: Sendable {
    let journeys: JourneyEngine

    package func addRoutes(to group: RouterGroup<PolicyRequestContext>) {
        let pages = group.group("pages").add(middleware: TransactionLoader(journeys: journeys)).group(context: PageRequestContext.self)
        let journeys = self.journeys
        for page in HostedPage.allCases {
            let path = RouterPath(page.rawValue)
            if page == .cancel {
                pages.post(path) { _, context in try await journeys.fail(context.record, with: .userCancelled, context: context) }
                continue
            }
            let handler: @Sendable (Request, PageRequestContext) async throws -> Response = { request, context in
                try await journeys.page(
                    page, record: context.record, tenant: context.tenant, flow: context.userFlow, request: request, form: context.form,
                    context: context)
            }
            if page.methods.get { pages.get(path, use: handler) }
            if page.methods.post { pages.post(path, use: handler) }
        }
    }

    package init(journeys: JourneyEngine) {
        self.journeys = journeys
    }
}

/// A hosted page's transaction, loaded and checked by ``TransactionLoader``.
struct LoadedTransaction: Sendable {
    let record: InteractionRecord
    /// A POST's form, its CSRF token checked; empty for a GET.
    let form: RequestParameters
}

/// Loads the transaction named by `?tx=`, checks that the page URL names the transaction's own
/// tenant and flow and that the browser is the one that started it (its CSRF cookie, as B2C
/// binds its pages to `x-ms-cpim-trans`: a `?tx=` link alone showed the profile being edited
/// and the address being reset, the second outside attack's F-9), and for a POST reads the form
/// and checks its CSRF token (double submit). A completed transaction's page answers with what
/// the app was sent, to its own browser only.
struct TransactionLoader: RouterMiddleware {
    typealias Context = PolicyRequestContext
    let journeys: JourneyEngine

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let record = try await journeys.transaction(RequestParameters(query: request.uri.query)["tx"], completed: true)
        // The URL's tenant and flow, already resolved, must be the transaction's own: then they
        // are its tenant and flow, with no second lookup.
        guard context.route.policy != nil, context.tenant.id == record.request.tenantID,
            context.flow.name.lowercased() == record.request.policy.lowercased()
        else {
            throw PageError(status: .badRequest, title: "Not found", message: "This page does not belong to this sign-in.")
        }
        try TransactionCookies.requireStartingBrowser(request, record: record)
        var form = RequestParameters(pairs: [])
        if request.method == .post {
            form = try await FormBody.read(request, context: context)
            guard TransactionCookies.checkCSRF(request: request, form: form, record: record) else {
                context.logger.warning("CSRF check failed", metadata: ["path": "\(request.uri.path)"])
                throw PageError(
                    status: .forbidden, title: "Request blocked",
                    message:
                        "The form could not be verified (its security token is missing or wrong). Return to the application and start again."
                )
            }
        }
        // A page of a completed sign-in, reloaded by its own browser (after a crash lost the
        // answer): sent on to the app with what it was sent.
        if record.completedAt != nil { return try await journeys.answerAgain(record) }
        var context = context
        context.transaction = LoadedTransaction(record: record, form: form)
        return try await next(request, context)
    }
}

/// The context of a hosted page: the policy context plus its loaded transaction.
struct PageRequestContext: ChildRequestContext, IdentityContext {
    var coreContext: CoreRequestContextStorage
    let correlationID: String
    let clientAddress: String
    let tenant: Tenant
    let record: InteractionRecord
    let userFlow: UserFlow
    let form: RequestParameters

    init(context: PolicyRequestContext) throws {
        guard let transaction = context.transaction else { throw HTTPError(.internalServerError) }
        coreContext = context.coreContext
        correlationID = context.correlationID
        clientAddress = context.clientAddress
        tenant = context.tenant
        record = transaction.record
        userFlow = context.flow
        form = transaction.form
    }

    var maxUploadSize: Int { 64 * 1024 }
    var brandingTenant: Tenant? { tenant }
}

extension IdentityService {
    /// The journey engine over this service's stores: the steps of every built-in flow, each
    /// given only what it uses.
    /// `adapt` lets a test change the journeys (a step added or left out).
    package func journeyEngine(adapt: (@Sendable (JourneyCatalog) -> any JourneyProvider)? = nil) -> JourneyEngine {
        let cookies = BrowserCookies(secure: configuration.secureCookies)
        let sessions = SingleSignOnSessions(
            interactions: interactions, users: users, cookies: cookies, lifetime: configuration.sessionLifetime, clock: clock)
        let catalog = JourneyCatalog(service: self, sessions: sessions)
        return JourneyEngine(
            catalog: adapt?(catalog) ?? catalog, interactions: interactions, users: users, clock: clock,
            kit: PageKit(renderer: pages, cookies: cookies, developmentMailbox: configuration.developmentMailbox), sessions: sessions,
            signIns: signIns, grants: grants)
    }
}
