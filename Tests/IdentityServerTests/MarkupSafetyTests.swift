import Foundation
import HummingbirdTesting
import Testing
import WireCoding

@testable import IdentityServer
@testable import UserJourneys

/// swift-mustache escapes by `Character`: a quote carrying a combining mark is one `Character`
/// that is not a quote, and would reach a page raw. Every renderer passes its values through
/// ``MarkupValues`` first.
@Suite("Markup safety")
struct MarkupSafetyTests {
    static let attack = "x\"\u{301} autofocus onfocus=alert(1) y=\"\u{301}<\u{301}b>"

    @Test("a quote, angle bracket or ampersand carrying a mark loses the mark and is escaped; other text is untouched")
    func values() {
        #expect(MarkupValues.safe(Self.attack) == "x\" autofocus onfocus=alert(1) y=\"<b>")
        #expect(MarkupValues.safe("Zoë and Å") == "Zoë and Å")
        let nested = MarkupValues.safe(["rows": [["name": "\"\u{301}"]], "n": 3] as [String: Any]) as? [String: Any]
        #expect((nested?["rows"] as? [[String: Any]])?.first?["name"] as? String == "\"")
        #expect(nested?["n"] as? Int == 3)
    }

    @Test("the hosted sign-in page shows a typed email with such a quote escaped, not as an attribute of its own")
    func hostedPage() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let page = try await driver.start(AuthorizationAttempt(harness: h, policy: "B2C_1_susi"), harness: h)
            let answer = try await driver.submit(page, [("email", Self.attack), ("password", "Wrong-Pass1")])
            let raw = "\"\u{301} autofocus"
            #expect(!answer.text.contains(raw), "raw quote in the page")
            // The typed email is shown again, escaped inside its own attribute.
            #expect(answer.text.contains("value=\"x&quot; autofocus onfocus=alert(1) y=&quot;&lt;b&gt;\""), "\(answer.text.prefix(1500))")
        }
    }
}
