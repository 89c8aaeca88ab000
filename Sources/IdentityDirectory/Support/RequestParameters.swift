import Foundation
import WireCoding

/// The parameters of a request: query or form, first value wins, names case-sensitive.
package struct RequestParameters: Sendable {
    public private(set) var pairs: [(String, String)]

    package init(pairs: [(String, String)]) { self.pairs = pairs }
    package init(query: String?) { self.pairs = FormEncoding.decode(query ?? "") }

    package subscript(_ name: String) -> String? {
        pairs.first { $0.0 == name }?.1
    }

    /// A parameter that must not be repeated (RFC 6749 §3.1: "Request and response parameters
    /// MUST NOT be included more than once").
    package func count(of name: String) -> Int { pairs.filter { $0.0 == name }.count }

    /// Every value of `name`, in order (a form's checkboxes that share a name).
    package func values(_ name: String) -> [String] { pairs.filter { $0.0 == name }.map(\.1) }

    /// The value if present and not empty.
    package func nonEmpty(_ name: String) -> String? {
        guard let value = self[name], !value.isEmpty else { return nil }
        return value
    }

    package func merging(_ other: RequestParameters) -> RequestParameters {
        RequestParameters(pairs: pairs + other.pairs)
    }
}
