import Mustache

/// Every HTML page of the service is rendered from templates made here, escaped by Unicode
/// scalar.
///
/// swift-mustache escapes `<`, `>`, `&`, `"` and `'` per `Character`, and a `Character` is a
/// grapheme cluster (UAX #29): a combining mark after a quote (GB9) or a Prepend character before
/// one (GB9b: U+0600, U+0D4E, U+110BD, U+111C2, …) makes a cluster that is none of them, so the
/// quote reached the page raw, where an HTML parser, which reads code points, ends the attribute.
/// No rewriting of the value fixes that (scalars put back into a `String` form the cluster
/// again); the escaping itself has to look at scalars. Each template therefore starts with the
/// `CONTENT_TYPE` pragma naming ``ScalarHTML``, which swift-mustache applies to every `{{value}}`
/// of the template, its sections and its partials.
public enum MarkupTemplates {
    /// The pragma's name for ``ScalarHTML``.
    static let contentTypeName = "HTML-BY-SCALAR"

    private static let registered: Void = MustacheContentTypes.register(ScalarHTML(), named: contentTypeName)

    /// A template from `text`, whose values are escaped by scalar.
    public static func template(_ text: String) throws -> MustacheTemplate {
        _ = registered
        return try MustacheTemplate(string: "{{% CONTENT_TYPE: \(contentTypeName) }}" + text)
    }

    /// A library of templates (name → text), each made by ``template(_:)``.
    public static func library(_ sources: [String: String]) throws -> MustacheLibrary {
        MustacheLibrary(templates: try sources.mapValues(template))
    }

    /// `text` with `<`, `>`, `&`, `"` and `'` replaced by their character references, scalar by
    /// scalar: the one HTML escaping of the service, for templates and the few strings written
    /// without one.
    public static func escape(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".unicodeScalars)
            case "<": out.append(contentsOf: "&lt;".unicodeScalars)
            case ">": out.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": out.append(contentsOf: "&quot;".unicodeScalars)
            case "'": out.append(contentsOf: "&#39;".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    /// HTML content escaped by ``escape(_:)``.
    struct ScalarHTML: MustacheContentType {
        func escapeText(_ text: String) -> String { MarkupTemplates.escape(text) }
    }
}
