import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// One element of a custom policy's XML: its local name (the IEF namespace stripped), its
/// attributes, its child elements and its text, with the line it started on for error messages.
package struct PolicyElement: Sendable, Equatable {
    var name: String
    var attributes: [String: String]
    var children: [PolicyElement]
    /// The element's own text, whitespace at both ends trimmed.
    package var text: String
    var line: Int

    init(name: String, attributes: [String: String] = [:], children: [PolicyElement] = [], text: String = "", line: Int = 0) {
        self.name = name
        self.attributes = attributes
        self.children = children
        self.text = text
        self.line = line
    }

    package subscript(attribute: String) -> String? { attributes[attribute] }

    /// The first child named `name`.
    package func child(_ name: String) -> PolicyElement? { children.first { $0.name == name } }

    /// Every child named `name`.
    func children(_ name: String) -> [PolicyElement] { children.filter { $0.name == name } }

    /// The children of the child `container` named `name` (`InputClaims/InputClaim`).
    func items(_ container: String, _ name: String) -> [PolicyElement] { child(container)?.children(name) ?? [] }
}

/// Reads a custom policy's XML into ``PolicyElement``s, with the limits a parser of outside input
/// needs: a size cap (B2C's service limits cap a policy file), no document type declaration (so
/// no entity expansion and no external entity: an IEF policy never has one), a depth cap and an
/// element-count cap. Elements outside the IEF namespace are refused.
package enum PolicyXML {
    /// The IEF schema's namespace (`TrustFrameworkPolicy_0.3.0.0.xsd`).
    static let namespace = "http://schemas.microsoft.com/online/cpim/schemas/2013/06"
    /// B2C's documented limit is 400 KB to 1 MB per file, depending on the page's date; the
    /// larger, so every policy B2C takes is taken here.
    package static let maximumBytes = 1_048_576
    static let maximumDepth = 32
    static let maximumElements = 50_000
    /// Attributes one element may have: libxml2 2.9 checks duplicates in quadratic time, so a
    /// tag with 100,000 attributes would take seconds before any limit of the delegate applies.
    static let maximumAttributes = 64

    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var message: String
        package var description: String { message }
    }

    /// The root element of `data`, or a ``Failure`` saying what is wrong and where.
    /// - Parameters:
    ///   - namespace: the namespace every element must be in; nil for any (an XML claim's).
    ///   - limit: the most bytes `data` may have.
    package static func parse(_ data: Data, namespace: String? = PolicyXML.namespace, limit: Int = maximumBytes) throws -> PolicyElement {
        guard data.count <= limit else {
            throw Failure(message: "The policy is \(data.count) bytes; a policy file may have at most \(limit).")
        }
        try requireUTF8(data)
        // A document type declaration is the door to entity expansion ("billion laughs") and
        // external entities; libxml2 would expand internal entities, so none is accepted at all.
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil || data.range(of: Data("<!doctype".utf8)) != nil
            || data.range(of: Data("<!ENTITY".utf8)) != nil
        {
            throw Failure(message: "The policy has a document type declaration (<!DOCTYPE>); policies may not declare one.")
        }
        if let tooMany = attributesOverLimit(data) {
            throw Failure(message: "An element of the policy (line \(tooMany)) has more than \(maximumAttributes) attributes.")
        }
        let reader = TreeBuilder(namespace: namespace)
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        let parsed = parser.parse()
        if let failure = reader.failure { throw failure }
        guard parsed, let root = reader.root else {
            let line = parser.lineNumber
            let reason = parser.parserError.map { ($0 as NSError).localizedDescription } ?? "not well-formed"
            throw Failure(message: "The policy is not well-formed XML (line \(line)): \(reason).")
        }
        return root
    }

    /// UTF-8 only (a byte-order mark allowed), read as such here before libxml2 sees it: the
    /// checks below read the bytes as UTF-8, and a document libxml2 would decode otherwise (UTF-16
    /// without a byte-order mark, whose ASCII is NUL-interleaved; UTF-7, declared in the XML
    /// declaration, where `+ADw-` is `<`) would get a declaration or thousands of attributes
    /// past them (issue 44's low finding).
    static func requireUTF8(_ data: Data) throws {
        var bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        guard !bytes.contains(0), String(validating: bytes, as: UTF8.self) != nil else {
            throw Failure(message: "The policy is not UTF-8 text; policies must be UTF-8.")
        }
        guard bytes.starts(with: Array("<?xml".utf8)) else { return }
        let end = (0..<bytes.count).first { bytes[$0] == UInt8(ascii: "?") && $0 + 1 < bytes.count && bytes[$0 + 1] == UInt8(ascii: ">") }
        let declaration = String(decoding: bytes[..<(end ?? min(bytes.count, 256))], as: UTF8.self)
        guard let range = declaration.range(of: #"encoding\s*=\s*["']([^"']*)["']"#, options: .regularExpression) else { return }
        let value = declaration[range].split(whereSeparator: { $0 == "\"" || $0 == "'" }).dropFirst().first.map(String.init) ?? ""
        guard ["utf-8", "utf8"].contains(value.lowercased()) else {
            throw Failure(message: "The policy declares the encoding '\(value)'; policies must be UTF-8.")
        }
    }

    /// The line of the first tag with more than ``maximumAttributes`` attributes, found in one
    /// pass over the bytes before libxml2 sees them: `=` outside quotes inside a tag, comments,
    /// CDATA sections and processing instructions skipped.
    static func attributesOverLimit(_ data: Data) -> Int? {
        let bytes = [UInt8](data)
        var index = 0
        var line = 1
        func starts(_ text: String, at position: Int) -> Bool {
            let pattern = Array(text.utf8)
            return position + pattern.count <= bytes.count && Array(bytes[position..<position + pattern.count]) == pattern
        }
        func skip(to end: String) {
            while index < bytes.count, !starts(end, at: index) {
                if bytes[index] == UInt8(ascii: "\n") { line += 1 }
                index += 1
            }
            index += end.utf8.count
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\n") { line += 1 }
            guard byte == UInt8(ascii: "<") else {
                index += 1
                continue
            }
            if starts("<!--", at: index) {
                skip(to: "-->")
            } else if starts("<![CDATA[", at: index) {
                skip(to: "]]>")
            } else if starts("<?", at: index) {
                skip(to: "?>")
            } else {
                var quote: UInt8?
                var attributes = 0
                index += 1
                while index < bytes.count {
                    let current = bytes[index]
                    if current == UInt8(ascii: "\n") { line += 1 }
                    if let open = quote {
                        if current == open { quote = nil }
                    } else if current == UInt8(ascii: "\"") || current == UInt8(ascii: "'") {
                        quote = current
                    } else if current == UInt8(ascii: "=") {
                        attributes += 1
                        if attributes > maximumAttributes { return line }
                    } else if current == UInt8(ascii: ">") {
                        break
                    }
                    index += 1
                }
                index += 1
            }
        }
        return nil
    }

    /// Builds the tree as the parser reports it; stops the parser at the first broken limit.
    private final class TreeBuilder: NSObject, XMLParserDelegate {
        var stack: [PolicyElement] = []
        var texts: [String] = []
        var root: PolicyElement?
        var failure: Failure?
        var count = 0
        let namespace: String?

        init(namespace: String?) { self.namespace = namespace }

        func fail(_ parser: XMLParser, _ message: String) {
            if failure == nil { failure = Failure(message: message) }
            parser.abortParsing()
        }

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            guard failure == nil else { return }
            count += 1
            guard count <= PolicyXML.maximumElements else {
                return fail(parser, "The policy has more than \(PolicyXML.maximumElements) elements.")
            }
            guard stack.count < PolicyXML.maximumDepth else {
                return fail(parser, "The policy nests elements deeper than \(PolicyXML.maximumDepth) levels (line \(parser.lineNumber)).")
            }
            if let namespace, namespaceURI != namespace {
                return fail(
                    parser, "The element '\(qualifiedName ?? elementName)' (line \(parser.lineNumber)) is not in the namespace \(namespace).")
            }
            // Namespace declarations are not attributes of the policy.
            let own = attributes.filter { !$0.key.hasPrefix("xmlns") }
            stack.append(PolicyElement(name: elementName, attributes: own, line: parser.lineNumber))
            texts.append("")
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard failure == nil, !texts.isEmpty else { return }
            texts[texts.count - 1] += string
        }

        func parser(_ parser: XMLParser, foundCDATA block: Data) {
            guard failure == nil, !texts.isEmpty else { return }
            texts[texts.count - 1] += String(decoding: block, as: UTF8.self)
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            guard failure == nil, var element = stack.popLast(), let text = texts.popLast() else { return }
            element.text = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if stack.isEmpty {
                root = element
            } else {
                stack[stack.count - 1].children.append(element)
            }
        }

        func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
            fail(parser, "The policy declares the entity '\(name)'; policies may not declare entities.")
        }

        func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
            fail(parser, "The policy declares the entity '\(name)'; policies may not declare entities.")
        }

        func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? { nil }
    }
}
