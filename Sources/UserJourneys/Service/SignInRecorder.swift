import Foundation
import IdentityDirectory
import Logging
import Metrics
import TodoModels

/// Writes the sign-in log's record of a journey's or a token grant's end (SPEC §2.13). A log
/// that cannot be written is a warning, never the sign-in's failure.
package struct SignInRecorder: Sendable {
    package let log: SignInLog
    let tenants: any TenantDirectory
    let users: any UserDirectory

    /// The end of an interactive journey: its flow's type (looked up when not given) says what
    /// kind of event it was.
    func journeyEnded(
        _ record: InteractionRecord, state: JourneyState, flowType: UserFlowType?, user: UserAccount?, failure: ProtocolFailure?,
        clientAddress: String, correlationID: String, at time: Date, logger: Logger
    ) async {
        let request = record.request
        var type = flowType
        if type == nil { type = try? await tenants.userFlow(tenantID: request.tenantID, name: request.policy)?.type }
        let kind: SignInEvent.Kind =
            switch type {
            case .passwordReset: .passwordReset
            case .profileEdit: .profileEdit
            case .signUp: .signUp
            default: state.claims.newUser ? .signUp : .signIn
            }
        let steps = state.trace.map { "\($0.step): \($0.result.rawValue)" + ($0.error.map { " (\($0.prefix(120)))" } ?? "") }
        await write(
            tenantID: request.tenantID, kind: kind, appID: request.clientID, policy: request.policy,
            userID: user?.id ?? state.claims.userID, user: user, failure: failure, face: request.protocolFace,
            grantType: nil, interactive: true, steps: steps, clientAddress: clientAddress, correlationID: correlationID, at: time,
            logger: logger)
    }

    /// A token request's end (`grant_type` as sent), with the user it was for where known: the
    /// one tokens were issued for, or for a refused password grant the local account whose
    /// sign-in name was sent (a name no account has is not kept).
    package func granted(
        tenantID: UUID, grantType: String, appID: String?, policy: String?, user: UserAccount?, attemptedName: String?,
        failure: ProtocolFailure?, face: ProtocolFace, clientAddress: String, correlationID: String, at time: Date, logger: Logger
    ) async {
        // A request that names no app of the tenant is no sign-in to it: not kept, so nobody can
        // fill the log (and push real records out of it) without at least a real client id.
        switch failure {
        case .missingClientID?, .clientNotRegistered?: return
        default: break
        }
        var user = user
        // Only a refusal of the password itself is the account's record: anyone can send a name.
        let refusedPassword = failure == .invalidCredentials || failure == .accountLocked || failure == .accountDisabled
        if user == nil, refusedPassword, grantType == "password", let name = attemptedName, !name.isEmpty, name.count <= 256 {
            user = try? await users.user(tenantID: tenantID, provider: .local, signInName: name)
        }
        let knownGrant = GrantType(rawValue: grantType)?.rawValue ?? "unsupported"
        await write(
            tenantID: tenantID, kind: .tokenGrant, appID: appID, policy: policy, userID: user?.id, user: user, failure: failure, face: face,
            grantType: knownGrant, interactive: knownGrant == "password", steps: [], clientAddress: clientAddress,
            correlationID: correlationID, at: time, logger: logger)
    }

    /// The grants that end a native-authentication sign-in (SPEC §2.15), as the log names them.
    package static let nativeGrants: Set<String> = ["password", "oob", "continuation_token", "mfa_oob"]

    /// A native-authentication sign-in's end at the token endpoint (SPEC §2.15): tokens, or the
    /// API's error (its `AADSTS` number; a second factor asked for is Entra's 50076 or 50079,
    /// an interrupted sign-in as in Entra's log). Kept only for an app of the tenant, and with
    /// the account only once the flow has established it. Its grant is `native_{grant_type}`.
    package func nativeAuthentication(
        tenantID: UUID, grant: String, appID: String?, policy: String?, user: UserAccount?, newUser: Bool, errorCode: Int, reason: String?,
        clientAddress: String, correlationID: String, at time: Date, logger: Logger
    ) async {
        let known = Self.nativeGrants.contains(grant) ? grant : "unsupported"
        await write(
            tenantID: tenantID, kind: newUser ? .signUp : .signIn, appID: appID, policy: policy, userID: user?.id, user: user, failure: nil,
            face: .entra, grantType: "native_" + known, interactive: true, steps: [], clientAddress: clientAddress,
            correlationID: correlationID, at: time, logger: logger, outcome: (errorCode, reason), requireApp: true)
    }

    private func write(
        tenantID: UUID, kind: SignInEvent.Kind, appID: String?, policy: String?, userID: UUID?, user: UserAccount?,
        failure: ProtocolFailure?, face: ProtocolFace, grantType: String?, interactive: Bool, steps: [String], clientAddress: String,
        correlationID: String, at time: Date, logger: Logger, outcome: (code: Int, reason: String?)? = nil, requireApp: Bool = false
    ) async {
        do {
            var account = user
            if account == nil, let userID { account = try await users.user(id: userID) }
            if account?.tenantID != tenantID { account = nil }
            // Only an app of the tenant is named: text a client sent is not kept.
            var app: AppRegistration?
            if let appID, UUID(uuidString: appID) != nil { app = try await tenants.application(tenantID: tenantID, clientID: appID) }
            guard app != nil || ((appID == nil || interactive) && !requireApp) else { return }
            let code = outcome?.code ?? failure.map { face == .entra ? $0.entra.code : $0.signInLogNumber } ?? 0
            let event = SignInEvent(
                tenantID: tenantID, at: time, correlationID: correlationID.lowercased(), kind: kind,
                appID: app?.clientIDString, appName: app?.displayName,
                policy: policy, userID: account?.id ?? userID, userPrincipalName: account?.presentableEmail,
                userDisplayName: account?.displayName, ipAddress: clientAddress, errorCode: code,
                failureReason: outcome.map(\.reason) ?? failure.map { Self.reason($0, face: face) }, grantType: grantType,
                interactive: interactive, steps: steps)
            Self.count(event)
            log.record(event)
        } catch {
            logger.warning("the sign-in log could not be written", metadata: ["error": "\(error)"])
        }
    }

    /// OpenTelemetry's view of the same record (SPEC §2.13): sign-ins by tenant, app, policy and
    /// result, token grants by type and result. Every dimension is bounded: the tenant's id, an
    /// app of the tenant (never a client id as sent), the resolved policy, a known grant type,
    /// an error code's number. No user, address or text a client sent.
    static func count(_ event: SignInEvent) {
        let result = event.errorCode == 0 ? "success" : String(event.errorCode)
        var dimensions = [
            ("tenant", event.tenantID.uuidString.lowercased()), ("app", event.appID ?? "none"), ("policy", event.policy ?? "none"),
            ("result", result),
        ]
        if event.kind == .tokenGrant {
            dimensions.append(("grant_type", event.grantType ?? "unsupported"))
            Counter(label: "todo.token_grants", dimensions: dimensions).increment()
        } else {
            dimensions.append(("kind", event.kind.rawValue))
            Counter(label: "todo.sign_ins", dimensions: dimensions).increment()
        }
    }

    /// The error's message, printable and at most 256 characters: some messages quote what the
    /// client sent (a client id, a grant type), which may be anything.
    static func reason(_ failure: ProtocolFailure, face: ProtocolFace) -> String {
        String(TextRules.printable(face == .entra ? failure.entra.message : failure.message).prefix(256))
    }
}
