import Foundation
import HTTPTypes
import Hummingbird
import IdentityClientCore
import Logging
import Storage
import TaskClientCore
import TodoModels
import WireCoding

/// How the web app reaches the identity service and the Task API.
public struct WebAppConfiguration: Sendable {
    /// The confidential app's client id ("TodoB2C Web" in the dev tenant).
    public var clientID: String
    public var clientSecret: String
    /// The tenant's authority without a policy: `http://127.0.0.1:5080/todob2c.onmicrosoft.com/`.
    public var authority: String
    /// The Task API's origin. The web app calls it over HTTP like any third-party client.
    public var apiBaseURL: URL
    /// The API's scopes (`https://todob2c.onmicrosoft.com/tasks/tasks.read` …).
    public var apiScopes: [String]
    public var signUpSignInPolicy = "B2C_1_susi"
    public var signUpPolicy = "B2C_1_sign_up"
    /// The Facebook flow's policy, or nil when the identity service offers no Facebook sign-in
    /// (then the landing page shows no such button).
    public var facebookPolicy: String? = nil
    public var profileEditPolicy = "B2C_1_edit_profile"
    public var passwordResetPolicy = "B2C_1_reset"
    /// `Secure` cookies and `https` reply URLs (under `--tls`).
    public var secure = false
    /// The app's registered reply URLs; the browser's `Host` is used only when it names one.
    public var replyURLs: [String] = []
    public var sessionLifetime: TimeInterval = 8 * 3600
    /// A session started before sign-in lives as long as a sign-in may take at the identity
    /// service (an hour), and one client address starts at most this many an hour (L-4).
    public var anonymousSessionLifetime: TimeInterval = 3600
    public var anonymousSessionsPerAddressPerHour = Self.defaultAnonymousSessionsPerHour
    public var pageSize = Self.defaultPageSize
    /// The defaults, which `serve`'s settings show and use.
    public static let defaultAnonymousSessionsPerHour = 600
    public static let defaultPageSize = 20

    public init(clientID: String, clientSecret: String, authority: String, apiBaseURL: URL, apiScopes: [String]) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.authority = authority
        self.apiBaseURL = apiBaseURL
        self.apiScopes = apiScopes
    }
}

/// The to-do list in a browser (SPEC §5): B2C's "web app calls web API" scenario. A confidential
/// client signs users in with auth code + PKCE + secret, keeps their tokens in a server-side
/// session, and calls the Task API with them. Pages work without JavaScript.
public struct WebApp: Sendable {
    let configuration: WebAppConfiguration
    let sessions: SessionRepository
    let client: ConfidentialClientApplication
    let transport: any HTTPTransport
    let pages: WebPages
    let logger: Logger
    let identityOrigin: String

    static let cookieName = "todo_session"

    /// Brings `database` to this build's web-session schema (for tools that restore a backup).
    public static func migrate(_ database: any Database, logger: Logger) async throws {
        try await SessionRepository.migrations.run(on: database, logger: logger)
    }

    /// - Parameter dataKey: seals the sessions' tokens in the database (shared by every instance).
    public static func make(
        configuration: WebAppConfiguration, database: any Database, dataKey: DataKey,
        transport: any HTTPTransport, logger: Logger
    ) async throws -> WebApp {
        try await SessionRepository.migrations.run(on: database, logger: logger)
        let authority = try Authority(configuration.authority)
        let client = ConfidentialClientApplication(
            configuration: ClientConfiguration(
                clientID: configuration.clientID, authority: authority, tokenStore: InMemoryTokenStore(), transport: transport,
                logger: logger),
            clientSecret: configuration.clientSecret)
        return WebApp(
            configuration: configuration, sessions: SessionRepository(database: database, dataKey: dataKey), client: client,
            transport: transport,
            pages: try WebPages(), logger: logger, identityOrigin: authority.origin)
    }

    /// Removes expired sessions.
    public func sweep(now: Date = Date()) async throws { try await sessions.sweep(now: now) }

    /// Adds the pages to a router (the Task API's, on the API port). Every handler renders its
    /// own failures as pages, so the API's problem+json mapping never sees them.
    public func addRoutes<Context: RemoteAddressRequestContext>(to router: Router<Context>) {
        let pages = router.group()
        @Sendable func address(_ context: Context) -> String { context.remoteAddress?.ipAddress ?? "unknown" }
        pages.get("/") { request, _ in await self.respond(request) { try await self.home(request) } }
        pages.get("static/app.css") { _, _ in self.pages.stylesheetResponse() }
        pages.get("auth/signin") { request, context in
            await self.respond(request) { try await self.signIn(request, clientAddress: address(context)) }
        }
        pages.get("auth/openid/return") { request, _ in await self.respond(request) { try await self.signInReturn(request) } }
        pages.post("auth/signout") { request, _ in await self.respond(request) { try await self.signOut(request) } }
        pages.get("auth/profile") { request, context in
            await self.respond(request) {
                try await self.startFlow(
                    request, clientAddress: address(context), policy: self.configuration.profileEditPolicy, signedIn: true)
            }
        }
        pages.get("auth/reset") { request, context in
            await self.respond(request) {
                try await self.startFlow(
                    request, clientAddress: address(context), policy: self.configuration.passwordResetPolicy, signedIn: false)
            }
        }
        pages.get("claims") { request, _ in await self.respond(request) { try await self.claims(request) } }
        pages.get("todos") { request, _ in await self.respond(request) { try await self.todos(request) } }
        pages.post("todos") { request, _ in await self.respond(request) { try await self.add(request) } }
        pages.post("todos/:id/:action") { request, context in
            let id = context.parameters.get("id") ?? ""
            let action = context.parameters.get("action") ?? ""
            return await self.respond(request) { try await self.change(request, id: id, action: action) }
        }
    }

    // MARK: Pages

    func home(_ request: Request) async throws -> Response {
        let state = try await SessionState.load(request, app: self)
        if state?.signedIn == true { return .seeOther("/todos") }
        let notice = try await state?.takeNotice()
        return page(
            "landing",
            [
                "title": "Your to-do list", "notice": notice as Any, "signedOutParam": request.uri.queryParameters["state"] == "signedout",
                "facebook": configuration.facebookPolicy != nil,
            ],
            state: state)
    }

    func claims(_ request: Request) async throws -> Response {
        guard let state = try await SessionState.load(request, app: self), let account = try await state.account() else {
            return .seeOther("/")
        }
        let rows = account.claims.sorted { $0.key < $1.key }.map { ["name": $0.key, "value": $0.value.description] }
        return page("claims", ["title": "Your claims", "claims": rows, "account": Self.accountValues(account)], state: state)
    }

    // MARK: Tasks

    enum Filter: String {
        case all, open, done

        var completed: Bool? {
            switch self {
            case .all: nil
            case .open: false
            case .done: true
            }
        }
    }

    func todos(
        _ request: Request, error: String? = nil, draft: String? = nil, renaming: (id: String, title: String)? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        guard let state = try await SessionState.load(request, app: self), let account = try await state.account() else {
            return .seeOther("/")
        }
        let filter = request.uri.queryParameters["filter"].flatMap { Filter(rawValue: String($0)) } ?? .all
        let cursor = request.uri.queryParameters["cursor"].map(String.init)
        let tasks = state.tasks(account: account)
        // Every task, for the counts; the page itself from the API's cursor pagination, unless the
        // first page already holds every match (then the list above is the page: no second call).
        let everything = try await tasks.all()
        let open = everything.filter { !$0.completed }.count
        let matching = everything.filter { task in filter.completed.map { task.completed == $0 } ?? true }
        let page: TaskPage
        if cursor == nil && matching.count <= configuration.pageSize {
            page = TaskPage(items: matching, nextCursor: nil)
        } else {
            page = try await tasks.list(completed: filter.completed, limit: configuration.pageSize, cursor: cursor)
        }
        let notice = try await state.takeNotice()
        let items: [[String: Any]] = page.items.map { task in
            let id = task.id.uuidString.lowercased()
            let editing = renaming?.id == id
            return [
                "id": id, "title": task.title, "completed": task.completed, "draftTitle": editing ? renaming!.title : task.title,
                "renameError": editing, "csrf": state.session.csrfToken, "filter": filter.rawValue,
            ]
        }
        return self.page(
            "tasks",
            [
                "title": "My tasks", "items": items, "empty": everything.isEmpty, "emptyFilter": !everything.isEmpty && page.items.isEmpty,
                "openCount": open, "doneCount": everything.count - open, "totalCount": everything.count,
                "filterAll": filter == .all, "filterOpen": filter == .open, "filterDone": filter == .done, "filter": filter.rawValue,
                "next": page.nextCursor.map { "/todos?filter=\(filter.rawValue)&cursor=\(FormEncoding.escape($0))" } as Any,
                "first": cursor != nil, "error": error as Any, "notice": notice as Any, "draft": draft ?? "",
                "account": Self.accountValues(account),
            ], status: status, state: state)
    }

    func add(_ request: Request) async throws -> Response {
        guard let state = try await SessionState.load(request, app: self), let account = try await state.account() else {
            return .seeOther("/")
        }
        let form = try await Self.form(request)
        guard state.checkCSRF(form["csrf_token"]) else { return csrfFailure(state) }
        let title = form["title"] ?? ""
        do {
            _ = try await state.tasks(account: account).create(title: title)
        } catch TaskClientError.invalid(let problem) {
            return try await todos(request, error: problem.detail ?? problem.title, draft: title, status: .unprocessableContent)
        }
        return .seeOther("/todos" + Self.filterQuery(form))
    }

    func change(_ request: Request, id text: String, action: String) async throws -> Response {
        guard let state = try await SessionState.load(request, app: self), let account = try await state.account() else {
            return .seeOther("/")
        }
        let form = try await Self.form(request)
        guard state.checkCSRF(form["csrf_token"]) else { return csrfFailure(state) }
        guard let id = UUIDText.parse(text) else { return try await todos(request, error: "No such task.", status: .notFound) }
        let tasks = state.tasks(account: account)
        do {
            switch action {
            case "complete": _ = try await tasks.update(id, TaskPatch(completed: true))
            case "reopen": _ = try await tasks.update(id, TaskPatch(completed: false))
            case "rename":
                let title = form["title"] ?? ""
                do {
                    _ = try await tasks.update(id, TaskPatch(title: title))
                } catch TaskClientError.invalid(let problem) {
                    return try await todos(
                        request, error: problem.detail ?? problem.title, renaming: (text.lowercased(), title), status: .unprocessableContent
                    )
                }
            case "delete": try await tasks.delete(id)
            default: return try await todos(request, error: "Unknown action.", status: .notFound)
            }
        } catch TaskClientError.notFound {
            return try await todos(request, error: "That task no longer exists.", status: .notFound)
        }
        return .seeOther("/todos" + Self.filterQuery(form))
    }

    static func filterQuery(_ form: [String: String]) -> String {
        guard let filter = form["filter"].flatMap(Filter.init(rawValue:)), filter != .all else { return "" }
        return "?filter=\(filter.rawValue)"
    }

    // MARK: Plumbing

    /// Runs a handler; any failure becomes a readable page, and a session that can no longer
    /// get tokens sends the user to sign in again with a notice.
    func respond(_ request: Request, _ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as IdentityError {
            if case .interactionRequired = error, let state = try? await SessionState.load(request, app: self) {
                try? await state.update { session in
                    session.tokens = TokenCache()
                    session.notice = "Your session has expired. Please sign in again."
                }
                return .seeOther("/")
            }
            logger.info("identity error in a page", metadata: ["error": "\(error)"])
            return page(
                "error", ["title": "Sign-in problem", "message": error.description, "code": error.b2cCode as Any], status: .badGateway,
                state: nil)
        } catch StorageError.unavailable(let reason) {
            logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
            var response = page(
                "error",
                ["title": "Temporarily unavailable", "message": "The service cannot be used right now. Please try again in a moment."],
                status: .serviceUnavailable, state: nil)
            response.headers[.retryAfter] = "5"
            return response
        } catch let error as TaskClientError {
            logger.info("task API error in a page", metadata: ["error": "\(error)"])
            return page("error", ["title": "The task list is unavailable", "message": error.description], status: .badGateway, state: nil)
        } catch {
            logger.error("page failed", metadata: ["error": "\(error)"])
            return page(
                "error", ["title": "Something went wrong", "message": "Please try again in a moment."], status: .internalServerError,
                state: nil)
        }
    }

    func page(_ name: String, _ values: [String: Any], status: HTTPResponse.Status = .ok, state: SessionState?) -> Response {
        var context = values
        if let state {
            context["csrf"] = state.session.csrfToken
            context["signedIn"] = state.signedIn
        }
        let response = pages.page(name, context, status: status, formTargets: identityOrigin)
        return state?.withCookie(response) ?? response
    }

    func csrfFailure(_ state: SessionState) -> Response {
        page(
            "error",
            [
                "title": "This form has expired",
                "message": "For your safety the form was not sent. Go back, reload the page and try again.",
            ],
            status: .forbidden, state: state)
    }

    /// The reply URL on the host the browser used (the dev app registers `localhost` and
    /// `127.0.0.1`), so the session cookie comes back with the redirect; a `Host` that is not one
    /// of the registered reply URLs' gets the first registered one, never a URL it made up.
    func returnURL(_ request: Request) -> String {
        let scheme = configuration.secure ? "https" : "http"
        let candidate = "\(scheme)://\(request.head.authority ?? "localhost")/auth/openid/return"
        guard !configuration.replyURLs.isEmpty, !configuration.replyURLs.contains(candidate) else { return candidate }
        return configuration.replyURLs.first { $0.hasPrefix("\(scheme)://") } ?? configuration.replyURLs[0]
    }

    static func form(_ request: Request) async throws -> [String: String] {
        var request = request
        let buffer = try await request.collectBody(upTo: 65_536)
        return FormEncoding.fields(String(buffer: buffer))
    }

    static func accountValues(_ account: Account) -> [String: Any] {
        [
            "username": account.username ?? account.name ?? "", "name": account.name ?? account.username ?? "",
            "policy": account.policy ?? "",
        ]
    }
}
