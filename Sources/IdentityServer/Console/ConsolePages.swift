import Foundation
import WireCoding
import HTTPTypes
import Hummingbird
import Mustache
import ServerSupport

/// The admin console's pages: Mustache templates from the module's `Resources/console`, every
/// value escaped by scalar (`MarkupTemplates`), one stylesheet, no script (SPEC §2.13: usable without JavaScript,
/// at 375 px wide).
struct ConsolePages: Sendable {
    private let library: MustacheLibrary
    let stylesheet: String

    enum PageError: Error { case missing(String) }

    init() throws {
        guard
            let directory = Bundle.module.url(forResource: "console", withExtension: nil, subdirectory: "Resources")
                ?? Bundle.module.url(forResource: "console", withExtension: nil)
        else { throw PageError.missing("Resources/console") }
        var templates: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".mustache") {
            templates[String(name.dropLast(".mustache".count))] = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
        }
        library = try MarkupTemplates.library(templates)
        stylesheet = try String(contentsOf: directory.appendingPathComponent("console.css"), encoding: .utf8)
    }

    /// The page `template` with `values`, and the signed-in admin's name and CSRF token for the
    /// layout's sign-out form.
    func render(_ template: String, _ values: [String: Any], admin: AdminConsole.Admin?, status: HTTPResponse.Status = .ok) -> Response {
        var context = values
        if let admin {
            context["adminName"] = admin.user.displayName
            context["csrf"] = admin.session.csrf
            context["tenantName"] = admin.tenant.displayName
        }
        let html = (try? library.render(context, withTemplate: template)) ?? nil
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
        // Nothing of the console is framed, and its forms post only here.
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("Content-Security-Policy")!] =
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html ?? "")))
    }

    /// A page that says what went wrong, in words (a refusal, a missing account, a forged form).
    func message(_ title: String, _ text: String, admin: AdminConsole.Admin?, status: HTTPResponse.Status) -> Response {
        render("message", ["title": title, "text": text], admin: admin, status: status)
    }
}
