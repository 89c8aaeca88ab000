import Foundation
import TodoModels

extension TenantDeclaration {
    public struct FlowPart: Codable, Sendable {
        var name: String
        var type: UserFlowType
        var identityProviders: [IdentityProviderKind]?
        var signUpAttributes: [FlowAttribute]?
        var applicationClaims: [String]?
        /// B2C's token lifetime settings (SPEC §2.14: ranges checked, ``TokenLifetimesPart``).
        var tokenLifetimes: TokenLifetimesPart?
        /// The older spelling, values clamped into range; a file gives one of the two.
        var lifetimes: Lifetimes?
        /// Sign-up verifies the email with a code (default true, as in B2C).
        var emailVerification: Bool?
        /// `{methods: [totp, email], enforcement: off | always | conditional}`.
        var mfa: MFAPolicy?
        /// `{afterFederatingIdentityProvider, beforeCreatingUser, beforeSendingToken}`: connector names.
        var apiConnectors: FlowConnectors?
        /// `{onTokenIssuanceStart, onAttributeCollectionStart, onAttributeCollectionSubmit, onOtpSend}`:
        /// names of the tenant's authenticationExtensions (External ID, SPEC §2.15).
        var authenticationExtensions: FlowExtensions?
        /// `password` (the default) or `oneTimePasscode`: how native authentication's local
        /// accounts of this flow sign in (External ID's "Email one-time passcode").
        var emailSignIn: EmailSignInMethod?
    }
}
