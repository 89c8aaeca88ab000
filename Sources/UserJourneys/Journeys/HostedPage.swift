import Foundation

/// The hosted pages of a sign-in, `…/{tenant}/{policy}/pages/{page}?tx=…` (SPEC §2.3): one
/// enum both registers the routes (``HostedPages``) and writes the links (``PageLinks``), as
/// SwiftPackageIndex-Server's `SiteURL` does, so a page cannot be linked that is not routed.
package enum HostedPage: String, CaseIterable, Sendable, Codable {
    case signIn = "signin"
    case signUp = "signup"
    /// "Forgot your password?": hands the reset back to the app (AADB2C90118).
    case forgotPassword = "forgot"
    /// Cancel on any page: `access_denied` to the app (AADB2C90091).
    case cancel
    /// A provider button: `?provider=` names the provider.
    case social
    case reset
    case profile
    case changePassword = "changepassword"
    case consent
    case accounts
    /// The attribute page of a first federated sign-in.
    case federated
    case secondFactor = "mfa"
    /// A custom policy's combined sign-in and sign-up page (content definition `unifiedssp`).
    case unified
    /// A custom policy's self-asserted page (content definition `selfasserted`).
    case selfAsserted = "selfasserted"

    /// Whether the page answers GET (shows) and POST (acts).
    var methods: (get: Bool, post: Bool) {
        switch self {
        case .forgotPassword, .social: (true, false)
        case .cancel: (false, true)
        default: (true, true)
        }
    }
}

/// The Mustache templates of the identity service (`Resources/templates/{name}.mustache`); a
/// tenant's custom page content overrides them by the same names.
package enum PageTemplate: String, CaseIterable, Sendable {
    case signIn = "signin"
    case signUp = "signup"
    case reset
    case profile
    case changePassword = "changepassword"
    case consent
    case accounts
    case federated
    case secondFactor = "mfa"
    /// A custom policy's pages, with B2C's element ids.
    case unified
    case selfAsserted = "selfasserted"
    /// An API connector's block page.
    case blocked
    /// The code shown to a person when the app's redirect URI is `urn:ietf:wg:oauth:2.0:oob`.
    case outOfBand = "oob"
    case error
    case facebook
    case outbox
    /// The developer trace of a sign-in (`/dev/journeys/{correlationId}`).
    case journeyTrace = "journeytrace"
    case signOut = "signout"
    case signedOut = "signedout"
}
