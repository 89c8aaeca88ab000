import Foundation
import IdentityDirectory
import WireCoding

/// How one face of the identity service speaks OpenID Connect (SPEC §2.9): B2C's
/// (``B2CDialect``) or the Microsoft identity platform's (``EntraDialect``). Each writes its own
/// discovery document, issuer, token claims, token response, `client_info` and errors; the
/// resolver puts the request's dialect on its context, and a grant or transaction keeps the
/// ``ProtocolFace`` it was made on, whose dialect answers for it later.
package protocol ProtocolDialect: Sendable {
    var face: ProtocolFace { get }

    /// How an error names this face's endpoints.
    var endpointName: String { get }

    // What the product does differently, beyond the wire.

    /// A policy-less request runs the app's own user flow when it names one (External ID).
    var runsAppBoundFlow: Bool { get }
    /// `prompt=select_account` shows the browser's accounts (Entra); B2C uses the current session.
    var offersAccountPicker: Bool { get }
    /// SSO picks the session of the `login_hint`'s account rather than the current one (Entra).
    var singleSignOnFollowsLoginHint: Bool { get }
    /// "Forgot your password?" hands the reset back to the app (B2C's AADB2C90118); an Entra app
    /// has no reset flow to start, so the link is not offered.
    var handsPasswordResetToApp: Bool { get }
    /// Whether the password grant may run in `flow` (B2C: its ROPC flows only; Entra: local
    /// sign-in flows too).
    func admitsPasswordGrant(in flow: UserFlow) -> Bool

    /// The `iss` of this face's tokens for `tenant`, at `origin`.
    func issuer(origin: String, tenant: Tenant) -> String

    /// The OpenID Provider configuration of `route`.
    func discovery(origin: String, tenant: Tenant, flow: UserFlow, route: PolicyRoute) -> JSONText

    /// An ID token's claims, in the order this face writes them. `code` and `accessToken` add
    /// `c_hash`/`at_hash` (OIDC Core §3.3.2.11).
    func idTokenClaims(_ context: IssuanceContext, now: Date, lifetime: Int, code: String?, accessToken: String?) -> JSONText

    /// A delegated access token's claims.
    func accessTokenClaims(_ context: IssuanceContext, resource: TokenResource, now: Date, lifetime: Int) -> JSONText

    /// What an app-only token (client credentials) carries besides the claims both faces write.
    func appTokenClaims(client: AppRegistration, tenant: Tenant?, into claims: inout JSONObjectBuilder)

    /// The token endpoint's answer.
    func tokenResponse(_ issuance: IssuanceContext, tokens: IssuedTokens, refreshToken: String?, clientInfo: Bool, now: Date) -> JSONText

    /// The token endpoint's answer to client credentials.
    func appTokenResponse(token: String, resource: TokenResource, scopes: GrantedScopes, lifetime: Int, now: Date) -> JSONText

    /// The `client_info` the authorize response carries with a code, if this face sends one.
    func authorizeClientInfo(user: UserAccount, tenant: Tenant) -> String?

    /// An error's parameters at the app's redirect URI (without `state`).
    func redirectParameters(_ failure: ProtocolFailure, correlationID: String, now: Date, origin: String) -> [(String, String)]

    /// An error's JSON body at the token endpoint.
    func errorBody(_ failure: ProtocolFailure, correlationID: String, now: Date, origin: String) -> JSONText

    /// An error's code and message on a page.
    func pageText(_ failure: ProtocolFailure) -> (code: String, message: String)
}

extension ProtocolFace {
    /// The dialect this face speaks.
    package var dialect: any ProtocolDialect {
        switch self {
        case .b2c: B2CDialect()
        case .entra: EntraDialect()
        }
    }
}
