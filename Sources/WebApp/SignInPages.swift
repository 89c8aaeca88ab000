import Foundation
import HTTPTypes
import Hummingbird
import IdentityClientCore

/// Signing in and out: the redirects to the identity service and back (B2C's "web app calls
/// web API" scenario, auth code + PKCE + client secret), kept apart from the task pages.
extension WebApp {
    func signIn(_ request: Request, clientAddress: String) async throws -> Response {
        let flow = request.uri.queryParameters["flow"].map(String.init) ?? "signin"
        let policy: String
        var domainHint: String? = nil
        switch flow {
        case "signup": policy = configuration.signUpPolicy
        case "facebook" where configuration.facebookPolicy != nil:
            policy = configuration.facebookPolicy ?? configuration.signUpSignInPolicy
            domainHint = "facebook.com"
        default: policy = configuration.signUpSignInPolicy
        }
        return try await startFlow(request, clientAddress: clientAddress, policy: policy, signedIn: false, domainHint: domainHint)
    }

    /// Sends the browser to the identity service with a fresh state, nonce and PKCE verifier
    /// kept in the session.
    func startFlow(
        _ request: Request, clientAddress: String, policy: String, signedIn required: Bool, domainHint: String? = nil
    ) async throws -> Response {
        guard let state = try await SessionState.loadOrCreate(request, app: self, clientAddress: clientAddress) else {
            return page(
                "error",
                [
                    "title": "Too many sign-ins",
                    "message": "Too many sign-ins were started from your network in the last hour. Please try again later.",
                ],
                status: .tooManyRequests, state: nil)
        }
        let account = try await state.account()
        if required && account == nil { return .seeOther("/") }
        let client = state.client(redirectURI: returnURL(request))
        let authorization = try await client.authorizationRequest(
            InteractiveParameters(
                scopes: configuration.apiScopes, policy: policy, loginHint: required ? account?.username : nil, domainHint: domainHint))
        try await state.update { $0.pending = authorization }
        return state.withCookie(
            Response(status: .found, headers: [.location: authorization.url.absoluteString, .cacheControl: "no-store"]))
    }

    func signInReturn(_ request: Request) async throws -> Response {
        let parameters = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }, uniquingKeysWith: { a, _ in a })
        guard let state = try await SessionState.load(request, app: self) else {
            // After a sign-out the identity service comes back here without a session.
            if parameters["code"] == nil && parameters["error"] == nil { return .seeOther("/?state=signedout") }
            return page(
                "error",
                ["title": "Sign-in expired", "message": "This sign-in took too long or started in another browser. Please sign in again."],
                status: .badRequest, state: nil)
        }
        if parameters["code"] == nil && parameters["error"] == nil { return .seeOther("/") }
        // The state first: a forged or stale redirect (a link from another site carries the Lax
        // cookie) must not cancel the sign-in in progress.
        guard let pending = state.session.pending, let returned = parameters["state"], pending.state == returned else {
            return page(
                "error", ["title": "Sign-in expired", "message": "This sign-in is no longer pending. Please sign in again."],
                status: .badRequest, state: state)
        }
        try await state.update { $0.pending = nil }
        let client = state.client(redirectURI: pending.redirectURI)
        do {
            _ = try await client.acquireToken(for: pending, response: parameters)
        } catch IdentityError.passwordResetRequested {
            // "Forgot your password?" on the sign-in page: B2C hands over to the reset flow.
            // The session exists already: no new one is started, so the address is not needed.
            return try await startFlow(request, clientAddress: "", policy: configuration.passwordResetPolicy, signedIn: false)
        } catch IdentityError.userCanceled {
            try await state.update { $0.notice = "Sign-in cancelled." }
            return .seeOther(state.session.tokens.entries.isEmpty ? "/" : "/todos")
        } catch IdentityError.interactionRequired(let reason, let code, _) {
            // The code was refused (expired, used): this sign-in failed; the session stays as it was.
            return page(
                "error",
                [
                    "title": "Sign-in failed", "message": "The sign-in could not be completed (\(reason)). Please try again.",
                    "code": code as Any,
                ],
                status: .badRequest, state: state)
        }
        // A new session id once signed in, so an id planted before sign-in is worthless (session fixation).
        try await state.rotate()
        return state.withCookie(.seeOther("/todos"))
    }

    func signOut(_ request: Request) async throws -> Response {
        guard let state = try await SessionState.load(request, app: self) else { return .seeOther("/") }
        let form = try await Self.form(request)
        guard state.checkCSRF(form["csrf_token"]) else { return csrfFailure(state) }
        var location = "/"
        if let account = try await state.account() {
            let returnURL = returnURL(request)
            location = try await state.client(redirectURI: returnURL).signOut(account, postLogoutRedirectURI: returnURL).absoluteString
        }
        try await sessions.delete(id: state.id)
        var response = Response.seeOther(location)
        response.setCookie(SessionState.expiredCookie(secure: configuration.secure))
        return response
    }
}
