import Foundation
import WireCoding
import HTTPTypes
import Hummingbird
import Mustache
import ServerSupport

/// The web app's pages: Mustache templates from `Resources/templates`, one stylesheet of our
/// own, nothing loaded from anywhere else.
struct WebPages: Sendable {
    let library: MustacheLibrary
    let stylesheet: String

    enum LoadError: Error { case missing(String) }

    init() throws {
        guard
            let directory = Bundle.module.url(forResource: "templates", withExtension: nil, subdirectory: "Resources")
                ?? Bundle.module.url(forResource: "templates", withExtension: nil)
        else { throw LoadError.missing("Resources/templates") }
        var templates: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".mustache") {
            templates[String(name.dropLast(".mustache".count))] = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
        }
        library = try MarkupTemplates.library(templates)
        stylesheet = try String(contentsOf: directory.appendingPathComponent("app.css"), encoding: .utf8)
    }

    /// A page: never cached, never framed, scripts off, forms only to this app and the identity
    /// service (Chromium applies `form-action` to the redirect after a POST, e.g. sign-out).
    func page(_ name: String, _ values: [String: Any], status: HTTPResponse.Status = .ok, formTargets: String) -> Response {
        // Optionals put in `[String: Any]` would render as "nil": absent values are left out.
        var context = values.compactMapValues(Self.present)
        context["appName"] = "TodoB2C"
        let html = (try? library.render(context, withTemplate: name)) ?? nil
        var headers: HTTPFields = [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            .contentSecurityPolicy:
                "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self' \(formTargets); frame-ancestors 'none'; base-uri 'none'",
            HTTPField.Name("X-Frame-Options")!: "DENY",
            HTTPField.Name("Referrer-Policy")!: "same-origin",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        guard let html else {
            headers[.contentType] = "text/plain; charset=utf-8"
            return Response(
                status: .internalServerError, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "page \(name) failed")))
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func present(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first.map { present($0.value) } ?? nil
    }

    func stylesheetResponse() -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "public, max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(string: stylesheet)))
    }
}

extension Response {
    /// 303 after a form post (RFC 9110 §15.4.4): the browser GETs the next page.
    static func seeOther(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }
}
