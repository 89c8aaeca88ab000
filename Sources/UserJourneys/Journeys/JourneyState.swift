import Foundation
import IdentityDirectory
import TrustFramework

/// Everything a sign-in has established so far, in one typed value kept with its transaction
/// (one column, `authorization_requests.journey`): where the journey is, the claims its steps
/// wrote, and the trace of the steps run. B2C keeps the same per transaction: the orchestration
/// step and the claims bag of the Identity Experience Framework.
package struct JourneyState: Sendable, Codable, Equatable {
    /// The index of the orchestration step the journey is at, and that step's id: a journey
    /// whose steps shifted since (a server restarted with another set of steps) is found by the
    /// id, never answered by whichever step now has the index.
    var step = 0
    var stepID: String?
    var claims = JourneyClaims()
    /// A custom policy's claims bag (SPEC §2.12), by claim type.
    var policyClaims: PolicyClaims?
    /// The claims exchange a custom policy's page chose (its `SignUpTarget`, a provider button).
    var policyExchange: String?
    /// The `alternativeSecurityId` values a custom policy's identity provider step produced from
    /// the ID token it verified: the only ones a directory profile may sign in or create by.
    var policyProvenAlternativeSecurityIds: [String]?
    /// The `InvokeSubJourney` steps the journey entered (their preconditions held when it
    /// reached them): a sub-journey's steps run only under an entered invocation, decided once,
    /// as B2C decides it, not again with the claims its own steps change.
    var policyInvocations: Set<String>?
    package var trace: [JourneyTraceEntry] = []
    /// The correlation id of the request that started the journey, which its trace is kept under.
    var correlationID: String?
}

extension JourneyState {
    /// Moves the journey to step `index` of `journey`.
    mutating func move(to index: Int, in journey: Journey) {
        step = index
        stepID = index < journey.steps.count ? journey.steps[index].id : nil
    }
}

/// The claims bag of a journey: what its steps read and write.
struct JourneyClaims: Sendable, Codable, Equatable {
    /// What the person chose on the first page.
    enum Selection: Sendable, Codable, Equatable {
        /// "Sign up now", or a sign-up flow.
        case signUp
        /// A provider's button, or a `domain_hint` naming it.
        case provider(String)
    }

    /// The account the journey is about (B2C's `objectId` claim), once a step has established it.
    var userID: UUID?
    /// How the account authenticated in this journey.
    var identityProvider: IdentityProviderKind?
    /// The account was made in this journey.
    var newUser = false
    /// When the person last authenticated (the `auth_time` claim).
    var authTime: Date?
    /// The SSO session (the hash of its id) this journey continues, and whether a second factor
    /// backs it.
    var sessionHash: String?
    var sessionHasSecondFactor = false
    /// The account cleared the flow's second factor (passed it, or holds a session or a browser
    /// that did), and whether it passed it in this journey.
    var secondFactorClearedFor: UUID?
    var secondFactorPassedNow = false
    var selection: Selection?
    /// The address a code was sent to, and the one a code proved (canonical forms).
    var pendingEmail: String?
    var verifiedEmail: String?
    /// What an identity provider asserted, waiting for the account step.
    var federated: FederatedSignUp?
    /// What the sign-up's OnAttributeCollectionStart extension answered, and for whom (SPEC
    /// §2.15); nil until it has (or where none is bound).
    var attributeStart: AttributeStartAnswer?

    /// Forgets what the first page chose and any session it continued: the person is back on
    /// it (the browser's back button).
    mutating func restartChoice() {
        selection = nil
        // (A custom policy's provider proof goes with the choice: ``JourneyEngine`` clears it.)
        federated = nil
        attributeStart = nil
        sessionHash = nil
        sessionHasSecondFactor = false
    }

    /// Sets who the journey is about, as authenticated by `provider` at `time`.
    mutating func authenticated(_ user: UserAccount, by provider: IdentityProviderKind, at time: Date, newUser: Bool = false) {
        userID = user.id
        identityProvider = provider
        authTime = time
        self.newUser = newUser
    }
}

/// An OnAttributeCollectionStart answer, for the one identity it was asked about (an address, or
/// a provider's subject): another identity asks again.
struct AttributeStartAnswer: Sendable, Codable, Equatable {
    var identity: String
    /// The values to show where the person gave none.
    var prefill: SignUpAttributeValues.Read
    /// The block page's message, when it blocked: the page shows it again without a new call.
    var blocked: String?
}

/// One step of a journey as it ran: the step's profile, the claims it wrote (names, never
/// values: no address, code or password is kept here), its result and how long it took.
package struct JourneyTraceEntry: Sendable, Codable, Equatable {
    package enum Result: String, Sendable, Codable {
        /// Preconditions not met: not run.
        case skipped
        /// Done; the journey went on.
        case completed
        /// Waiting on a page (or a provider).
        case interacting
        /// Went back to an earlier step.
        case returned
        /// Ended the journey with an error for the app.
        case failed
        /// Ended the journey with the app's answer.
        case finished
    }

    package var step: String
    package var result: Result
    /// Names of the claims the step changed.
    package var claims: [String]
    /// A custom policy's claims the step changed, with their values as the developer trace shows
    /// them (``PolicyClaims/traceValues(of:policy:)``: secrets hidden).
    package var values: [String: String]? = nil
    package var milliseconds: Int
    /// The error code a failure ended with.
    package var error: String?
    package var at: Date

    /// The journey keeps the last this many entries: a person going back and forth cannot grow
    /// the transaction's row without bound.
    static let limit = 64
}

extension JourneyClaims {
    /// The names of the claims that differ between `self` and `other`.
    func changedNames(from other: JourneyClaims) -> [String] {
        var names: [String] = []
        if userID != other.userID { names.append("objectId") }
        if identityProvider != other.identityProvider { names.append("identityProvider") }
        if newUser != other.newUser { names.append("newUser") }
        if authTime != other.authTime { names.append("authTime") }
        if sessionHash != other.sessionHash { names.append("session") }
        if secondFactorClearedFor != other.secondFactorClearedFor || secondFactorPassedNow != other.secondFactorPassedNow {
            names.append("secondFactor")
        }
        if selection != other.selection { names.append("selection") }
        if pendingEmail != other.pendingEmail { names.append("pendingEmail") }
        if verifiedEmail != other.verifiedEmail { names.append("verifiedEmail") }
        if federated != other.federated { names.append("federatedIdentity") }
        if attributeStart != other.attributeStart { names.append("attributeCollectionStart") }
        return names
    }
}
