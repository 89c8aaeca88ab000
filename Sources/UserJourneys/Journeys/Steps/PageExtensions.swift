import Foundation
import Hummingbird
import IdentityDirectory
import WireCoding

/// A flow's custom authentication extensions on the hosted pages (SPEC §2.15), where External
/// ID's user flows call them in the browser: OnAttributeCollectionStart before the sign-up form,
/// OnAttributeCollectionSubmit before the account is made, OnTokenIssuanceStart before the app
/// gets its code or tokens, OnOtpSend for the verification codes. A failing extension ends the
/// sign-in for the app (AADSTS1100001 on the Entra face, AADB2C90075 on B2C's), its reason in
/// the log only; a block shows its page. Nothing is made before the extensions agree.
struct PageExtensions: Sendable {
    let calls: ExtensionCall
    let tenants: any TenantDirectory

    /// What OnAttributeCollectionSubmit lets a sign-up do.
    enum Submit {
        /// Make the account, with these values changed (nil: as collected).
        case proceed(SignUpAttributeValues.Read?)
        /// Show the form again with this message.
        case refused(String)
        /// The step's outcome instead: the block page, or the failure.
        case stop(StepOutcome)
    }

    /// Whether the sign-up's OnAttributeCollectionStart has yet to answer for `identity` (the
    /// address, or the provider's subject, the account would get).
    static func startPending(_ run: JourneyRun, identity: String) -> Bool {
        run.flow.extensions.onAttributeCollectionStart != nil && run.claims.attributeStart?.identity != identity
    }

    /// The start's values for `identity`, once it answered for it.
    static func prefill(_ run: JourneyRun, identity: String) -> SignUpAttributeValues.Read? {
        guard let answer = run.claims.attributeStart, answer.identity == identity else { return nil }
        return answer.prefill
    }

    /// OnAttributeCollectionStart for the sign-up of `identity`, before its form shows: once per
    /// identity, its answer kept in ``JourneyClaims/attributeStart`` (a block too, so a reload
    /// does not call again). Nil to go on; otherwise the step's outcome instead (the block page,
    /// or the failure).
    func attributeCollectionStart(_ run: inout JourneyRun, identity: String, signUp: SignUpInfo) async throws -> StepOutcome? {
        if !Self.startPending(run, identity: identity) {
            guard let message = run.claims.attributeStart?.blocked else { return nil }
            return .interact(try blocked(run, message))
        }
        let answer: (AuthenticationExtension, AttributeCollectionStart)
        do throws(AuthenticationExtensionFailure) {
            guard let ext = try ExtensionCall.bound(.onAttributeCollectionStart, flow: run.flow, tenant: run.tenant) else { return nil }
            let caller = try await caller(run, client: nil, requestType: "signUp")
            answer = (ext, try await calls.attributeCollectionStart(ext, tenant: run.tenant, flow: run.flow, caller: caller, signUp: signUp, now: run.now))
        } catch {
            return failed(error, run)
        }
        switch answer.1 {
        case .proceed: run.claims.attributeStart = AttributeStartAnswer(identity: identity, prefill: SignUpAttributeValues.Read())
        case .prefill(let values):
            guard case .success(let read) = SignUpAttributeValues.read(values, flow: run.flow, tenant: run.tenant) else {
                return failed(AuthenticationExtensionFailure(name: answer.0.name, reason: "it answered attribute values the flow's rules refuse"), run)
            }
            run.claims.attributeStart = AttributeStartAnswer(identity: identity, prefill: read)
        case .block(let message):
            run.claims.attributeStart = AttributeStartAnswer(identity: identity, prefill: SignUpAttributeValues.Read(), blocked: message)
            return .interact(try blocked(run, message))
        }
        return nil
    }

    /// OnAttributeCollectionSubmit with what the sign-up collected, before the account is made.
    func attributeCollectionSubmit(_ run: JourneyRun, signUp: SignUpInfo) async throws -> Submit {
        let answer: (AuthenticationExtension, AttributeCollectionSubmit)
        do throws(AuthenticationExtensionFailure) {
            guard let ext = try ExtensionCall.bound(.onAttributeCollectionSubmit, flow: run.flow, tenant: run.tenant) else { return .proceed(nil) }
            let caller = try await caller(run, client: nil, requestType: "signUp")
            answer = (ext, try await calls.attributeCollectionSubmit(ext, tenant: run.tenant, flow: run.flow, caller: caller, signUp: signUp, now: run.now))
        } catch {
            return .stop(failed(error, run))
        }
        switch answer.1 {
        case .proceed: return .proceed(nil)
        case .modify(let values):
            guard case .success(let read) = SignUpAttributeValues.read(values, flow: run.flow, tenant: run.tenant) else {
                return .stop(failed(AuthenticationExtensionFailure(name: answer.0.name, reason: "it answered attribute values the flow's rules refuse"), run))
            }
            return .proceed(read)
        case .block(let message): return .stop(.interact(try blocked(run, message)))
        case .invalid(let message, let attributeErrors):
            let details = attributeErrors.keys.sorted().compactMap { name in attributeErrors[name].flatMap { $0.isEmpty ? nil : "\(name): \($0)" } }
            return .refused(([message] + details).joined(separator: " "))
        }
    }

    /// OnTokenIssuanceStart for `user` signing in to `client`: the claims to add to the sign-in's
    /// tokens (none where no extension is bound), or the failure that ends it.
    func tokenClaims(_ run: JourneyRun, client: AppRegistration, user: UserAccount) async throws -> Result<ExtraClaims, ProtocolFailure> {
        do throws(AuthenticationExtensionFailure) {
            let caller = try await caller(run, client: client, requestType: nil)
            return .success(try await calls.tokenClaims(boundIn: run.flow, tenant: run.tenant, caller: caller, user: user, now: run.now))
        } catch {
            _ = failed(error, run)
            return .failure(.extensionFailed)
        }
    }

    /// The flow's OnOtpSend extension, which takes its verification codes instead of the outbox.
    /// A binding to an extension the tenant does not declare fails (the code is never mailed
    /// around it).
    func otpExtension(_ run: JourneyRun) throws -> AuthenticationExtension? {
        do throws(AuthenticationExtensionFailure) {
            return try ExtensionCall.bound(.onOtpSend, flow: run.flow, tenant: run.tenant)
        } catch {
            _ = failed(error, run)
            throw ProtocolFailure.extensionFailed
        }
    }

    /// Hands `code` for `recipient` to `ext` (OnOtpSend). Its failure throws
    /// ``ProtocolFailure/extensionFailed``, which ends the journey for the app. No account is
    /// named to it: a reset names none for an address without one, so none for one with one.
    func otpSend(_ ext: AuthenticationExtension, _ run: JourneyRun, recipient: String, code: String, requestType: String) async throws {
        do throws(AuthenticationExtensionFailure) {
            let caller = try await caller(run, client: nil, requestType: requestType)
            try await calls.otpSend(ext, tenant: run.tenant, flow: run.flow, caller: caller, user: nil, recipient: recipient, code: code, now: run.now)
        } catch {
            _ = failed(error, run)
            throw ProtocolFailure.extensionFailed
        }
    }

    /// The request as the extension hears of it: the app, the person's address, the journey's
    /// correlation id, and the tenant's Entra issuer at the request's origin for its token.
    private func caller(_ run: JourneyRun, client: AppRegistration?, requestType: String?) async throws(AuthenticationExtensionFailure) -> ExtensionCaller {
        var app = client
        if app == nil { app = try? await tenants.application(tenantID: run.tenant.id, clientID: run.authorization.clientID) }
        guard let app else { throw AuthenticationExtensionFailure(name: "", reason: "the application is no longer registered") }
        return ExtensionCaller(
            client: app, issuer: HostPolicy.issuer(origin: run.authorization.origin, tenant: run.tenant, face: .entra),
            correlationID: run.state.correlationID ?? run.record.id, clientAddress: run.clientAddress, requestType: requestType)
    }

    private func failed(_ error: AuthenticationExtensionFailure, _ run: JourneyRun) -> StepOutcome {
        error.log(to: run.logger)
        return .fail(.extensionFailed)
    }

    /// The block page with an extension's message.
    func blocked(_ run: JourneyRun, _ message: String) throws -> Response {
        try run.page(.blocked, ["title": run.text("blocked_title"), "userMessage": message], status: .forbidden)
    }
}
