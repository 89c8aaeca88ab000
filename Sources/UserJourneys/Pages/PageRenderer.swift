import Foundation
import WireCoding
import IdentityDirectory
import Mustache
import ServerSupport
import Synchronization

/// Renders the hosted pages from Mustache templates. The built-in templates live in the
/// module's `Resources/templates`; a tenant with `pageTemplatesPath` overrides any of them (and
/// `style.css`) with files of the same name, B2C's "custom page content".
package final class PageRenderer: Sendable {
    private let builtIn: [String: String]
    private let builtInStylesheet: String
    private let libraries = Mutex<[String: MustacheLibrary]>([:])

    enum RenderError: Error { case missingTemplate(String) }

    package init() throws {
        guard
            let directory = Bundle.module.url(forResource: "templates", withExtension: nil, subdirectory: "Resources")
                ?? Bundle.module.url(forResource: "templates", withExtension: nil)
        else { throw RenderError.missingTemplate("Resources/templates") }
        builtIn = try Self.templates(in: directory)
        builtInStylesheet = (try? String(contentsOf: directory.appendingPathComponent("style.css"), encoding: .utf8)) ?? ""
    }

    private static func templates(in directory: URL) throws -> [String: String] {
        var templates: [String: String] = [:]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasSuffix(".mustache") {
            templates[String(name.dropLast(".mustache".count))] = try String(
                contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
        }
        return templates
    }

    /// The library for a tenant: the built-in templates, overlaid with the tenant's own.
    private func library(for tenant: Tenant?) throws -> MustacheLibrary {
        let key = tenant?.pageTemplatesPath ?? ""
        if let cached = libraries.withLock({ $0[key] }) { return cached }
        var sources = builtIn
        if !key.isEmpty {
            for (name, text) in try Self.templates(in: URL(fileURLWithPath: key)) { sources[name] = text }
        }
        let library = try MarkupTemplates.library(sources)
        libraries.withLock { $0[key] = library }
        return library
    }

    package func render(_ template: PageTemplate, _ values: [String: Any], tenant: Tenant?) throws -> String {
        let name = template.rawValue
        var context = values
        context["tenantName"] = tenant?.displayName ?? "TodoB2C"
        context["stylesheet"] = tenant?.pageTemplatesPath != nil ? "/static/tenants/\(tenant!.guid)/style.css" : "/static/style.css"
        guard let html = try library(for: tenant).render(context, withTemplate: name) else {
            throw RenderError.missingTemplate(name)
        }
        return html
    }

    package func stylesheet(for tenant: Tenant?) -> String {
        if let path = tenant?.pageTemplatesPath,
            let css = try? String(contentsOfFile: URL(fileURLWithPath: path).appendingPathComponent("style.css").path, encoding: .utf8)
        {
            return css
        }
        return builtInStylesheet
    }
}
