import Foundation
import IdentityClient
@testable import UserJourneys

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A headless browser for the identity service's hosted pages: a cookie jar, redirects followed
/// until they leave for the app's redirect URI, and the pages' forms filled in and posted. The
/// scripted web authenticator drives it, so interactive flows run without Chromium.
actor HostedPagesBrowser {
    struct Page {
        var status: Int
        var url: URL
        var text: String
        var location: String?
        var headers: [String: String] = [:]

        func field(_ name: String) -> String? {
            guard let range = text.range(of: "name=\"\(name)\" value=\"") else { return nil }
            let rest = text[range.upperBound...]
            return rest.firstIndex(of: "\"").map { HostedPagesBrowser.unescape(String(rest[..<$0])) }
        }

        /// The first form's action, or the form with `id`.
        func formAction(id: String? = nil) -> String? {
            let marker = id.map { "id=\"\($0)\"" }
            for form in text.components(separatedBy: "<form").dropFirst() {
                let head = form.prefix { $0 != ">" }
                if let marker, !head.contains(marker) { continue }
                guard let range = head.range(of: "action=\"") else { continue }
                let rest = head[range.upperBound...]
                return rest.firstIndex(of: "\"").map { HostedPagesBrowser.unescape(String(rest[..<$0])) }
            }
            return nil
        }

        func link(id: String) -> String? {
            let pattern = "href=\"([^\"]+)\" id=\"\(id)\""
            guard let range = text.range(of: pattern, options: .regularExpression) else { return nil }
            let match = String(text[range])
            let start = match.index(match.startIndex, offsetBy: 6)
            return HostedPagesBrowser.unescape(String(match[start..<match.dropFirst(6).firstIndex(of: "\"")!]))
        }

        /// The hidden fields of a form_post response page.
        var hiddenFields: [String: String] {
            var fields: [String: String] = [:]
            let pattern = #"<input type="hidden" name="([^"]+)" value="([^"]*)""#
            guard let regex = try? NSRegularExpression(pattern: pattern) else { return [:] }
            for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                if let name = Range(match.range(at: 1), in: text), let value = Range(match.range(at: 2), in: text) {
                    fields[String(text[name])] = HostedPagesBrowser.unescape(String(text[value]))
                }
            }
            return fields
        }
    }

    enum Failure: Error { case unexpected(String) }

    private let transport = URLSessionTransport()
    private var cookies: [String: String] = [:]
    /// Redirects to URLs with this prefix are the app's: returned, not followed.
    var appPrefix = "http://127.0.0.1:"
    private let identityBase: String

    init(identityBase: String) { self.identityBase = identityBase }

    /// Loads `url`, following the identity service's redirects.
    func open(_ url: URL) async throws -> Page {
        try await follow(try await request("GET", url, body: nil))
    }

    func submit(_ page: Page, _ fields: [(String, String)], formID: String? = nil) async throws -> Page {
        guard let action = page.formAction(id: formID) else { throw Failure.unexpected("no form on \(page.url): \(page.text.prefix(400))") }
        let target = URL(string: action, relativeTo: page.url)!.absoluteURL
        let csrf = page.field("csrf_token").map { [("csrf_token", $0)] } ?? []
        return try await follow(try await request("POST", target, body: FormBody.encode(csrf + fields)))
    }

    /// One request, no redirect followed.
    func fetch(_ url: URL) async throws -> Page { try await request("GET", url, body: nil) }

    func cookie(_ name: String) -> String? { cookies[name] }

    func setCookie(_ name: String, _ value: String) { cookies[name] = value }

    /// Loads `url` and follows every redirect, on any host (a whole browser round trip).
    func navigate(_ url: URL) async throws -> Page {
        var page = try await request("GET", url, body: nil)
        var hops = 0
        while [301, 302, 303].contains(page.status), let location = page.location, hops < 20 {
            page = try await request("GET", URL(string: location, relativeTo: page.url)!.absoluteURL, body: nil)
            hops += 1
        }
        return page
    }

    /// Posts a form and follows every redirect.
    func post(_ url: URL, _ fields: [(String, String)], follow: Bool = true) async throws -> Page {
        var page = try await request("POST", url, body: FormBody.encode(fields))
        if follow, [301, 302, 303].contains(page.status), let location = page.location {
            page = try await navigate(URL(string: location, relativeTo: page.url)!.absoluteURL)
        }
        return page
    }

    /// Submits a form on any page (by id, or the first) and follows every redirect.
    func submitFollowingAll(_ page: Page, _ fields: [(String, String)], formID: String? = nil) async throws -> Page {
        guard let action = page.formAction(id: formID) else { throw Failure.unexpected("no form on \(page.url): \(page.text.prefix(400))") }
        let csrf = page.field("csrf_token").map { [("csrf_token", $0)] } ?? []
        return try await post(URL(string: action, relativeTo: page.url)!.absoluteURL, csrf + fields)
    }

    func get(_ href: String, from page: Page) async throws -> Page {
        try await open(URL(string: href, relativeTo: page.url)!.absoluteURL)
    }

    private func follow(_ first: Page) async throws -> Page {
        var page = first
        var hops = 0
        while [301, 302, 303].contains(page.status), let location = page.location, hops < 20 {
            let target = URL(string: location, relativeTo: page.url)!.absoluteURL
            if !target.absoluteString.hasPrefix(identityBase) { return page }
            page = try await request("GET", target, body: nil)
            hops += 1
        }
        return page
    }

    private func request(_ method: String, _ url: URL, body: String?) async throws -> Page {
        var headers = ["Accept": "text/html"]
        if !cookies.isEmpty { headers["Cookie"] = cookies.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: "; ") }
        if body != nil { headers["Content-Type"] = "application/x-www-form-urlencoded" }
        let response = try await transport.send(
            TransportRequest(method: method, url: url, headers: headers, body: body.map { Data($0.utf8) }))
        if let setCookie = response.headers["set-cookie"] {
            for cookie in HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": setCookie], for: url) {
                if cookie.value.isEmpty || (cookie.expiresDate.map { $0 < Date() } ?? false) {
                    cookies[cookie.name] = nil
                } else {
                    cookies[cookie.name] = cookie.value
                }
            }
        }
        return Page(
            status: response.status, url: url, text: String(decoding: response.body, as: UTF8.self), location: response.headers["location"],
            headers: response.headers)
    }

    /// The redirect's parameters once a page sends the browser to the app.
    static func appParameters(_ page: Page) throws -> [String: String] {
        guard let location = page.location, let url = URL(string: location) else {
            throw Failure.unexpected("expected a redirect to the app, got HTTP \(page.status): \(page.text.prefix(600))")
        }
        return ScriptedWebAuthenticator.parameters(fromRedirect: url)
    }

    nonisolated static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&amp;", with: "&").replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(
                of: "&gt;", with: ">"
            )
            .replacingOccurrences(of: "&#x2F;", with: "/").replacingOccurrences(of: "&#x3D;", with: "=")
    }

    // MARK: Scripts

    func signIn(_ url: URL, email: String, password: String) async throws -> [String: String] {
        let page = try await open(url)
        return try Self.appParameters(try await submit(page, [("email", email), ("password", password)]))
    }

    func signUp(_ url: URL, email: String, password: String, name: String) async throws -> [String: String] {
        var page = try await open(url)
        if let link = page.link(id: "createAccount") { page = try await get(link, from: page) }
        return try Self.appParameters(try await completeSignUp(page, email: email, password: password, name: name, submit: submit))
    }

    /// The sign-up page's three steps from its first: send a code to `email`, enter the code
    /// from the dev outbox, then the password and name. `submit` posts a page's form.
    func completeSignUp(
        _ first: Page, email: String, password: String, name: String,
        submit: (Page, [(String, String)], String?) async throws -> Page
    ) async throws -> Page {
        var page = try await submit(first, [("step", "send"), ("email", email)], nil)
        guard page.text.contains("email_ver_input") else { throw Failure.unexpected("no code step: \(page.text.prefix(600))") }
        page = try await submit(page, [("step", "verify"), ("code", try await outboxCode(for: email))], nil)
        guard page.text.contains("email_success") else { throw Failure.unexpected("code refused: \(page.text.prefix(600))") }
        return try await submit(
            page,
            [("step", "create"), ("email", email), ("newPassword", password), ("reenterPassword", password), ("displayName", name)],
            nil)
    }

    /// The code in the newest message to `email` in the development outbox.
    func outboxCode(for email: String) async throws -> String {
        let outbox = try await request("GET", URL(string: "\(identityBase)/dev/outbox")!, body: nil).text
        for item in outbox.components(separatedBy: "<li>").dropFirst() where item.contains(Self.escape(email)) {
            if let range = item.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression) { return String(item[range]) }
        }
        throw Failure.unexpected("no code for \(email) in the outbox")
    }

    nonisolated static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    func cancel(_ url: URL) async throws -> [String: String] {
        let page = try await open(url)
        guard let action = page.text.range(of: #"<form method="post" action="[^"]+" class="cancel""#, options: .regularExpression) else {
            throw Failure.unexpected("no cancel form")
        }
        let snippet = String(page.text[action])
        let href = Self.unescape(String(snippet.split(separator: "\"")[3]))
        let target = URL(string: href, relativeTo: page.url)!.absoluteURL
        let csrf = page.field("csrf_token").map { [("csrf_token", $0)] } ?? []
        return try Self.appParameters(try await follow(try await request("POST", target, body: FormBody.encode(csrf))))
    }

    func forgotPassword(_ url: URL) async throws -> [String: String] {
        let page = try await open(url)
        guard let link = page.link(id: "forgotPassword") else { throw Failure.unexpected("no forgot-password link") }
        return try Self.appParameters(try await get(link, from: page))
    }

    /// A page that the script expects to end at the app without a form (SSO, prompt=none, logout).
    func straightThrough(_ url: URL) async throws -> [String: String] {
        try Self.appParameters(try await open(url))
    }
}

enum FormBody {
    static func encode(_ fields: [(String, String)]) -> String {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        return fields.map {
            "\($0.0.addingPercentEncoding(withAllowedCharacters: allowed)!)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)"
        }
        .joined(separator: "&")
    }
}
