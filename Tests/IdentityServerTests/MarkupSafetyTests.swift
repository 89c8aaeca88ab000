import Foundation
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing
import ServerSupport
import WireCoding

@testable import IdentityServer
@testable import UserJourneys

/// swift-mustache escapes by `Character`, a grapheme cluster: a quote after a Prepend character
/// (UAX #29 GB9b) or before a combining mark (GB9) is part of a cluster that is not a quote, and
/// reached pages raw. Every renderer's templates come from ``MarkupTemplates``, which escapes by
/// scalar.
@Suite("Markup safety")
struct MarkupSafetyTests {
    /// Prepend characters of four scripts (Arabic, Malayalam, Kaithi, Sharada).
    static let prepend: [Unicode.Scalar] = ["\u{0600}", "\u{0D4E}", "\u{110BD}", "\u{111C2}"]
    /// Scalars that join the character before them: a combining mark, ZWJ, a variation selector,
    /// a spacing mark.
    static let extend: [Unicode.Scalar] = ["\u{0301}", "\u{200D}", "\u{FE0F}", "\u{0903}"]
    static let special: [Unicode.Scalar] = ["<", ">", "&", "\"", "'"]

    /// Every cluster-joining case: each Prepend before each special character, each joiner
    /// after it, and both.
    static var joined: [String] {
        special.flatMap { s in
            prepend.map { String(String.UnicodeScalarView([$0, s])) } + extend.map { String(String.UnicodeScalarView([s, $0])) }
                + [String(String.UnicodeScalarView([prepend[1], s, extend[0]]))]
        }
    }

    /// The scalars of `html` outside character references: none of them may be special.
    static func rawSpecials(_ html: String) -> [Unicode.Scalar] {
        var raw: [Unicode.Scalar] = []
        var scalars = Array(html.unicodeScalars)[...]
        while let scalar = scalars.popFirst() {
            if scalar == "&", let end = scalars.prefix(8).firstIndex(of: ";"),
                scalars[scalars.startIndex..<end].allSatisfy({ $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "#" })
            {
                scalars = scalars[(end + 1)...]
                continue
            }
            if special.contains(scalar) { raw.append(scalar) }
        }
        return raw
    }

    @Test("a template escapes each special character by scalar, whatever joins it in a cluster")
    func templates() throws {
        let library = try MarkupTemplates.library(["t": "<input value=\"{{v}}\">{{#rows}}<b title='{{name}}'>{{name}}</b>{{/rows}}{{>p}}", "p": "<i>{{v}}</i>"])
        for value in Self.joined {
            let html = try #require(library.render(["v": value, "rows": [["name": value]]] as [String: Any], withTemplate: "t"))
            // The template's own markup is all that is left raw.
            let own = try #require(library.render(["v": "", "rows": [["name": ""]]] as [String: Any], withTemplate: "t"))
            #expect(Self.rawSpecials(html) == Self.rawSpecials(own), "\(value.unicodeScalars.map { String($0.value, radix: 16) })")
        }
        #expect(MarkupTemplates.escape("Zoë and Å") == "Zoë and Å")
        let quote = "\u{0D4E}\"", quoteEscaped = "\u{0D4E}&quot;"
        #expect(MarkupTemplates.escape(quote) == quoteEscaped)
    }

    @Test("the hosted pages, the console and the form_post answer escape such values")
    func renderers() async throws {
        let attack = "x\u{0D4E}\" autofocus onfocus=alert(1) y=\u{0D4E}\"\u{0D4E}<b>"
        let hosted = try PageRenderer().render(.error, ["title": attack, "message": attack], tenant: nil)
        let console = try await Self.text(ConsolePages().message(attack, attack, admin: nil, status: .ok))
        let answer = try await Self.text(
            RedirectResponder.respond(redirectURI: "https://app.example/cb", mode: .formPost, parameters: [("state", attack)]))
        let escaped = "x\u{0D4E}&quot; autofocus onfocus=alert(1) y=\u{0D4E}&quot;\u{0D4E}&lt;b&gt;"
        let raw = "\u{0D4E}\" autofocus"
        for html in [hosted, console, answer] {
            #expect(html.contains(escaped), "\(html.prefix(2000))")
            #expect(!html.contains(raw))
        }
    }

    /// A response's body as text.
    static func text(_ response: Response) async throws -> String {
        let collected = CollectedBody()
        try await response.body.write(CollectingWriter(into: collected))
        return String(buffer: collected.buffer.withLock { $0 })
    }

    @Test("login_hint with a Prepend before a quote stays inside its attribute on the sign-in page")
    func reflectedLoginHint() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            for scalar in Self.prepend {
                let hint = "a@example.com\(scalar)\" formaction=https://evil.example/ x=\(scalar)\""
                var attempt = AuthorizationAttempt(harness: h, policy: "B2C_1_susi")
                attempt.extra = [("login_hint", hint)]
                let page = try await driver.start(attempt, harness: h)
                #expect(page.status == .ok)
                let escaped = "\(scalar)&quot; formaction=https://evil.example/", raw = "\(scalar)\" formaction"
                #expect(page.text.contains(escaped), "\(page.text.prefix(1200))")
                #expect(!page.text.contains(raw))
            }
        }
    }

    @Test("a hosted page's forms post only to the service and the app; the form_post answer only to the app")
    func formAction() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let page = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_susi"), harness: h)
            let policy = try #require(page.headers[.contentSecurityPolicy])
            let origin = try #require(FormActionSources.source(IdentityHarness.redirect))
            #expect(policy.contains("form-action 'self' \(origin);"), "\(policy)")
            #expect(!policy.contains("form-action *"))
        }
        let answer = RedirectResponder.respond(redirectURI: "https://app.example:8443/cb?x=1", mode: .formPost, parameters: [("code", "c")])
        #expect(answer.headers[.contentSecurityPolicy]?.contains("form-action 'self' https://app.example:8443;") == true)
        #expect(FormActionSources.sources(["msauth.com.example.app://auth", "javascript:alert(1)", "https://a.example;script-src *", "http://[::1]:9/x"]) == ["msauth.com.example.app:", "http://[::1]:9"])
    }
}

/// Collects a response body written in the test's process.
final class CollectedBody: Sendable { let buffer = Mutex(ByteBuffer()) }

struct CollectingWriter: ResponseBodyWriter {
    let into: CollectedBody
    mutating func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        into.buffer.withLock { $0.writeBuffer(&buffer) }
    }
    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
