import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import WireCoding

/// A user journey: the ordered orchestration steps of one user flow, B2C's own shape for both
/// its built-in user flows and custom policies (the Identity Experience Framework's
/// `UserJourney` of `OrchestrationStep`s). ``JourneyEngine`` walks it; ``JourneyCatalog`` builds
/// one per flow type from the tenant's declaration.
package struct Journey: Sendable {
    /// The journey's name in traces (B2C's journey ids: `SignUpOrSignIn`, `PasswordReset`, …).
    let name: String
    let steps: [any OrchestrationStep]

    func index(of id: String) -> Int? { steps.firstIndex { $0.id == id } }
}

/// One orchestration step: a technical profile with only the collaborators it uses, which reads
/// and writes the journey's claims. Keycloak's `Authenticator` has the same three parts: enter
/// the step (`authenticate`), act on its page (`action`), and say what it needs.
protocol OrchestrationStep: Sendable {
    /// The step's name in the trace (B2C's technical-profile ids where B2C has one).
    var id: String { get }
    /// The pages this step shows and acts on. A page of another step is not answered.
    var pages: Set<HostedPage> { get }
    /// Whether the step does something for the account (saves a profile, sets a password, asks
    /// consent, issues tokens): then the engine enters it only for a known, enabled account that
    /// has cleared the flow's second factor.
    var actsForUser: Bool { get }
    /// Whether the step may run for a custom policy's journey that signed nobody in: its token
    /// names the subject the policy's relying party sends (B2C runs the tenant's policy as
    /// written; the unit tests of the B2C community issue `sub` from an `objectId` default).
    var servesPolicySubject: Bool { get }
    /// The step's preconditions: false skips it.
    func applies(to run: JourneyRun) -> Bool
    /// Runs the step when the journey reaches it.
    func enter(_ run: inout JourneyRun) async throws -> StepOutcome
    /// GET of one of its pages.
    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome
    /// POST of one of its pages (its CSRF token already checked).
    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome
    /// An identity provider's answer, for the step that sent the browser there.
    func receive(_ identity: FederatedIdentity, _ run: inout JourneyRun) async throws -> StepOutcome
}

extension OrchestrationStep {
    var pages: Set<HostedPage> { [] }
    var actsForUser: Bool { false }
    var servesPolicySubject: Bool { false }
    func applies(to run: JourneyRun) -> Bool { true }
    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { throw JourneyEngine.notThisStep }
    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { throw JourneyEngine.notThisStep }
    func receive(_ identity: FederatedIdentity, _ run: inout JourneyRun) async throws -> StepOutcome {
        throw JourneyEngine.notThisStep
    }
}

/// What a step's work came to; the engine decides what happens next.
enum StepOutcome: Sendable {
    /// Done: on to the next step whose preconditions hold.
    case next
    /// Waiting on the person (a page, or a provider's sign-in): the journey stays at this step.
    case interact(Response)
    /// Back to an earlier step (sign-up's "sign in instead", the browser's back button after a
    /// provider was picked); the browser is sent to `url`, a page of that step.
    case back(to: String, url: String)
    /// Ends the journey with an error for the app.
    case fail(ProtocolFailure)
    /// Ends the journey with the app's answer (the code or tokens).
    case finish(Response)
}

/// What the hosted pages share: the renderer, the cookie policy, and whether the dev outbox is
/// linked from the pages.
struct PageKit: Sendable {
    let renderer: PageRenderer
    let cookies: BrowserCookies
    let developmentMailbox: Bool
}

/// One request's view of a journey: the transaction, its typed state, the tenant and flow, the
/// browser's request and form, and the account once known. Steps change ``state`` and
/// ``cookies``; the engine saves the one and sets the other on the response.
package struct JourneyRun: Sendable {
    let record: InteractionRecord
    var state: JourneyState
    let tenant: Tenant
    let flow: UserFlow
    let request: Request
    /// A POST's form (CSRF token checked); empty otherwise.
    let form: RequestParameters
    let logger: Logger
    let clientAddress: String
    let now: Date
    let kit: PageKit
    /// The account ``JourneyClaims/userID`` names, as the engine read it before this step.
    package var user: UserAccount?
    /// Cookies for whatever response the journey answers with.
    var cookies: [Cookie] = []
    /// Whether a page can be shown at all: not for a grant without a browser (the password
    /// grant), whose steps fail where they would ask the person something.
    var pagesAllowed = true

    var claims: JourneyClaims {
        get { state.claims }
        set { state.claims = newValue }
    }
    var authorization: AuthorizationRequest { record.request }

    // MARK: Pages

    /// The URL of a page of this transaction.
    func url(_ page: HostedPage, extra: [(String, String)] = []) -> String { PageLinks.url(page, record: record, extra: extra) }

    /// The browser's CSRF token, which each form posts back.
    var csrf: String { request.cookies[TransactionCookies.csrf]?.value ?? "" }

    /// The transaction's page language: `ui_locales` among the tenant's languages (SPEC §2.11).
    var language: String { PageLanguage.pick(uiLocales: authorization.uiLocales, declared: tenant.languages) }

    /// A page string in the transaction's language.
    func text(_ key: String) -> String { PageLanguage.strings(language, tenant: tenant)[key] ?? PageLanguage.english[key] ?? key }

    /// A hosted page with the transaction's language, CSRF token and cancel action.
    /// - Parameters:
    ///   - strings: a custom policy's localized page strings (its `UxElement`s), over the built-in ones.
    ///   - language: the language those strings are in, for the page's `lang`.
    func page(
        _ template: PageTemplate, _ values: [String: Any], status: HTTPResponse.Status = .ok, strings: [String: String] = [:],
        language localized: String? = nil
    ) throws -> Response {
        var values = values
        values["t"] = PageLanguage.strings(language, tenant: tenant).merging(strings) { _, policy in policy }
        values["lang"] = localized ?? language
        values["csrf"] = csrf
        values["cancelAction"] = url(.cancel)
        return .html(try kit.renderer.render(template, values, tenant: tenant), status: status, formTargets: formTargets)
    }

    /// Where this transaction's forms may end: the app's redirect URI (a finished or cancelled
    /// journey) and the identity providers a button may send the browser to.
    var formTargets: [String] {
        var targets = [authorization.redirectURI]
        for provider in tenant.identityProviders { targets += [provider.metadataUrl, provider.oauth2?.authorizationEndpoint].compactMap { $0 } }
        for profile in flow.customPolicy?.policy.identityProviderProfiles ?? [] {
            if let url = PolicyFederation.providerURL(profile) { targets.append(url) }
        }
        return targets
    }

    /// The dev outbox's URL, where the development mailbox is on.
    var outboxURL: String? { kit.developmentMailbox ? "\(authorization.origin)/dev/outbox" : nil }
}

/// Links to the hosted pages of a transaction.
enum PageLinks {
    static func url(_ page: HostedPage, record: InteractionRecord, extra: [(String, String)] = []) -> String {
        let route = PolicyRoute(tenantSegment: record.request.tenantSegment, policy: record.request.policy, placement: .path)
        return route.url(origin: record.request.origin, for: .page(page)) + "?" + FormEncoding.encode([("tx", record.id)] + extra)
    }
}
