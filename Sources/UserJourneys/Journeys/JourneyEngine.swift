import Foundation
import Hummingbird
import IdentityDirectory
import Logging
import TrustFramework

/// Runs the journeys of interactive sign-ins: it owns the order of the steps, keeps the
/// journey's state with its transaction, and holds the rules no step may forget:
/// - a step that does something for the account (``OrchestrationStep/actsForUser``) is entered,
///   and its pages answered, only for a known, enabled account that has cleared the flow's
///   second factor: "nothing is done for the user before the second factor" (SPEC §2.11);
/// - an account disabled at any point ends the journey (AADB2C90111 on B2C's face);
/// - a journey that continues an SSO session acts for the account only while that session
///   lives (in the browser and in the store): one ended meanwhile continues nothing;
/// - under `prompt=none` a step that would ask the person anything fails with AADB2C90077;
/// - a page is answered only by the step the journey is at (a `?tx=` link to a later page
///   shows nothing), and two requests racing on one journey cannot both move it.
package struct JourneyEngine: Sendable {
    package let catalog: any JourneyProvider
    let interactions: any InteractionStore
    let users: any UserDirectory
    let clock: any IdentityClock
    let kit: PageKit
    let sessions: SingleSignOnSessions
    /// Each journey's end goes to the sign-in log.
    let signIns: SignInRecorder
    /// Whether a completed sign-in's code is still unredeemed (``answerAgain(_:)``).
    let grants: any GrantStore

    var now: Date { clock.now }

    static let alreadyCompleted = PageError(
        status: .badRequest, title: "Already completed", message: "This sign-in has already been completed. Return to the application.")

    /// A page of a step the journey is not at.
    static let notThisStep = PageError(
        status: .forbidden, title: "Not available",
        message: "This page is not the current step of your sign-in. Return to the application and start again.")

    // MARK: Transactions

    /// The live transaction `id`, or an error page.
    package func transaction(_ id: String?) async throws -> InteractionRecord {
        let record = try await transaction(id, completed: true)
        if record.completedAt != nil { throw Self.alreadyCompleted }
        return record
    }

    /// The transaction `id` while it lasts, completed or not: a page reloaded after the
    /// completion is answered with what the app was sent (``answerAgain(_:)``).
    func transaction(_ id: String?, completed: Bool) async throws -> InteractionRecord {
        guard let id, !id.isEmpty, id.count <= 64, let record = try await interactions.interaction(id: id), record.expiresAt > now
        else {
            throw PageError(
                status: .badRequest, title: "Session expired",
                message: "This sign-in page has expired or is not valid. Return to the application and start again.")
        }
        return record
    }

    /// A completed transaction's answer sent again, to the browser that started it (the caller
    /// checked): a crash after the completion was stored lost the response, and the reload
    /// goes on to the app with the same code rather than stopping at "Already completed". Only
    /// while that code is unredeemed and unexpired, so the app never got it: a redeemed code
    /// presented again would revoke the sign-in it bought (a Back button after signing in).
    func answerAgain(_ record: InteractionRecord) async throws -> Response {
        guard let parameters = try await interactions.answer(id: record.id), record.request.redirectURI != TokenIssuanceStep.outOfBand,
            let code = parameters.first(where: { $0.0 == "code" })?.1, try await grants.isPending(code, now: now)
        else { throw Self.alreadyCompleted }
        return RedirectResponder.respond(redirectURI: record.request.redirectURI, mode: record.request.responseMode, parameters: parameters)
    }

    // MARK: Entry points

    /// Starts the journey of a new transaction: its first steps run until one asks the person.
    package func start(
        _ record: InteractionRecord, tenant: Tenant, flow: UserFlow, request: Request, context: some IdentityContext
    ) async throws -> Response {
        var run = makeRun(record, tenant: tenant, flow: flow, request: request, form: RequestParameters(pairs: []), context: context)
        run.state.correlationID = context.correlationID
        let journey = catalog.journey(for: flow)
        run.state.move(to: 0, in: journey)
        let outcome = try await enterCurrent(&run, journey)
        return try await conclude(outcome, &run, journey, context: context)
    }

    /// A hosted page's GET or POST, answered by the step the journey is at.
    func page(
        _ page: HostedPage, record: InteractionRecord, tenant: Tenant, flow: UserFlow, request: Request, form: RequestParameters,
        context: some IdentityContext
    ) async throws -> Response {
        let run = makeRun(record, tenant: tenant, flow: flow, request: request, form: form, context: context)
        return try await answer(run, owning: page, context: context) { step, run in
            request.method == .post ? try await step.act(on: page, &run) : try await step.show(page, &run)
        }
    }

    /// An identity provider's answer for the step that sent the browser there.
    func receive(
        _ identity: FederatedIdentity, record: InteractionRecord, tenant: Tenant, flow: UserFlow, request: Request,
        context: some IdentityContext
    ) async throws -> Response {
        let run = makeRun(record, tenant: tenant, flow: flow, request: request, form: RequestParameters(pairs: []), context: context)
        return try await answer(run, owning: nil, context: context) { step, run in try await step.receive(identity, &run) }
    }

    /// Lets the step the journey is at (the owner of `page`, if one is named) act on a request,
    /// under the engine's rules, and carries the journey on from its outcome.
    private func answer(
        _ run: JourneyRun, owning page: HostedPage?, context: some IdentityContext,
        _ act: (any OrchestrationStep, inout JourneyRun) async throws -> StepOutcome
    ) async throws -> Response {
        var run = run
        let journey = catalog.journey(for: run.flow)
        run.state.move(to: try position(of: run.state, in: journey), in: journey)
        let step = try currentStep(of: journey, &run, owning: page)
        try await loadUser(&run)
        // Checked on every request of a step, not only on entering it: an account disabled
        // while a page is open gets nothing from posting it.
        if let refusal = try await admission(of: step, run) { return try await conclude(.fail(refusal), &run, journey, context: context) }
        let before = run.snapshot
        let started = ContinuousClock.now
        let outcome: StepOutcome
        do {
            outcome = try await Self.span(of: step, journey: journey.name) { try await act(step, &run) }
        } catch ProtocolFailure.extensionFailed {
            // A custom authentication extension failed within the step (OnOtpSend): the sign-in
            // ends for the app, as at every other event.
            outcome = .fail(.extensionFailed)
        }
        // A page shown again is not a step's result; anything else is.
        if case .interact = outcome {} else { trace(step, outcome, &run, before: before, since: started) }
        return try await conclude(outcome, &run, journey, context: context)
    }

    /// Ends the transaction with an error sent to the app (cancel, a provider's refusal, …), in
    /// the form of the transaction's face.
    func fail(_ record: InteractionRecord, with error: ProtocolFailure, context: some IdentityContext) async throws -> Response {
        guard try await interactions.completeInteraction(id: record.id, now: now) else { throw Self.alreadyCompleted }
        var state = record.journey
        state.trace.append(
            JourneyTraceEntry(step: "Journey", result: .failed, claims: [], milliseconds: 0, error: error.code, at: now))
        try await interactions.saveFinalJourney(id: record.id, state: state)
        await signIns.journeyEnded(
            record, state: state, flowType: nil, user: nil, failure: error, clientAddress: context.clientAddress,
            correlationID: state.correlationID ?? context.correlationID, at: now, logger: context.logger)
        return redirect(error, record: record, context: context)
    }

    /// Runs `journey` for a grant without a browser (the password grant): no page can be shown,
    /// so a step that would ask the person something fails in the protocol's form instead; the
    /// engine's rules hold as for a sign-in with pages. The run, its account established, or
    /// the failure thrown.
    /// `proven`: an account the caller has already authenticated (native authentication's
    /// code, or the continuation token of a sign-up or reset), and whether its second factor was
    /// passed too; the journey's own steps decide the rest.
    package func runWithoutPages(
        _ journey: Journey, record: InteractionRecord, tenant: Tenant, flow: UserFlow, request: Request, form: RequestParameters,
        context: some IdentityContext, proven: ProvenAccount? = nil
    ) async throws -> JourneyRun {
        var run = makeRun(record, tenant: tenant, flow: flow, request: request, form: form, context: context)
        run.pagesAllowed = false
        if let proven {
            run.claims.authenticated(proven.user, by: .local, at: now, newUser: proven.newUser)
            run.user = proven.user
            if proven.secondFactorPassed {
                run.claims.secondFactorClearedFor = proven.user.id
                run.claims.secondFactorPassedNow = true
            }
        }
        run.state.move(to: 0, in: journey)
        var outcome = try await nextOutcome(&run, journey)
        for _ in 0...journey.steps.count {
            switch outcome {
            case nil:
                context.logger.debug("journey without pages done", metadata: ["trace": "\(run.state.trace.map(\.step))"])
                // Whatever steps applied: a disabled account gets nothing (its admission is checked
                // only by steps that run, and a journey's steps may all be skipped).
                if let user = run.user, !user.accountEnabled { throw ProtocolFailure.accountDisabled }
                return run
            case .next:
                run.state.move(to: run.state.step + 1, in: journey)
                outcome = try await nextOutcome(&run, journey)
            case .fail(let failure): throw failure
            case .interact, .back, .finish:
                // A step that asked for a page here is a bug: fail closed.
                context.logger.error("a journey without pages asked for one", metadata: ["journey": "\(journey.name)"])
                throw ProtocolFailure.internalError
            }
        }
        throw ProtocolFailure.internalError
    }

    // MARK: The walk

    private func makeRun(
        _ record: InteractionRecord, tenant: Tenant, flow: UserFlow, request: Request, form: RequestParameters,
        context: some IdentityContext
    ) -> JourneyRun {
        JourneyRun(
            record: record, state: record.journey, tenant: tenant, flow: flow, request: request, form: form, logger: context.logger,
            clientAddress: context.clientAddress, now: now, kit: kit)
    }

    /// Where the journey is: the step its state names, found by id when the index no longer
    /// points at it.
    private func position(of state: JourneyState, in journey: Journey) throws -> Int {
        guard let id = state.stepID else { return state.step }
        if state.step < journey.steps.count, journey.steps[state.step].id == id { return state.step }
        guard let index = journey.index(of: id) else { throw Self.notThisStep }
        return index
    }

    /// The step that answers `page`: the step the journey is at, when it owns the page. A page no
    /// step of the journey has is not found; a page of a later step is refused. A page of an
    /// earlier step, before anyone has signed in (the browser's back button after a provider
    /// or "Sign up now" was picked), takes the journey back to that step, which answers it.
    private func currentStep(of journey: Journey, _ run: inout JourneyRun, owning page: HostedPage?) throws -> any OrchestrationStep {
        if let page, !journey.steps.contains(where: { $0.pages.contains(page) }) {
            throw PageError(status: .notFound, title: "Not found", message: "This sign-in has no such page.")
        }
        guard run.state.step < journey.steps.count else { throw Self.notThisStep }
        let step = journey.steps[run.state.step]
        guard let page, !step.pages.contains(page) else { return step }
        guard run.claims.userID == nil,
            let earlier = journey.steps[..<run.state.step].lastIndex(where: { $0.pages.contains(page) })
        else { throw Self.notThisStep }
        run.claims.restartChoice()
        // Going back to choose again: what a provider proved before belongs to the old choice.
        run.state.policyProvenAlternativeSecurityIds = nil
        run.state.policyExchange = nil
        run.state.move(to: earlier, in: journey)
        return journey.steps[earlier]
    }

    /// Enters the step the journey is at, skipping those whose preconditions do not hold; nil
    /// when no step is left.
    private func nextOutcome(_ run: inout JourneyRun, _ journey: Journey) async throws -> StepOutcome? {
        while run.state.step < journey.steps.count {
            let step = journey.steps[run.state.step]
            try await loadUser(&run)
            guard step.applies(to: run) else {
                trace(step, nil, &run, before: run.snapshot, since: .now)
                run.state.move(to: run.state.step + 1, in: journey)
                continue
            }
            if let refusal = try await admission(of: step, run) {
                trace(step, .fail(refusal), &run, before: run.snapshot, since: .now)
                return .fail(refusal)
            }
            let before = run.snapshot
            let started = ContinuousClock.now
            var outcome = try await Self.span(of: step, journey: journey.name) { try await step.enter(&run) }
            // `prompt=none`: nothing may be asked of the person (OIDC Core §3.1.2.1).
            if case .interact = outcome, run.authorization.prompt == .silent { outcome = .fail(.noSession) }
            trace(step, outcome, &run, before: before, since: started)
            return outcome
        }
        return nil
    }

    /// ``nextOutcome(_:_:)`` for a journey with pages, which always ends in a step that answers
    /// the app: falling off its end is a bug, and fails closed.
    private func enterCurrent(_ run: inout JourneyRun, _ journey: Journey) async throws -> StepOutcome {
        if let outcome = try await nextOutcome(&run, journey) { return outcome }
        run.logger.error("journey ended without answering the app", metadata: ["journey": "\(journey.name)"])
        throw PageError(status: .internalServerError, title: "Sign-in failed", message: "The sign-in could not be completed.")
    }

    /// Why `step` may not run for the journey's account, or nil.
    private func admission(of step: any OrchestrationStep, _ run: JourneyRun) async throws -> ProtocolFailure? {
        if let user = run.user, !user.accountEnabled { return .accountDisabled }
        guard step.actsForUser else { return nil }
        guard let user = run.user else {
            // The tenant's own policy may issue for a subject that is no account; a built-in
            // flow never does (the stricter rule, named in the README).
            // Only a journey that never named an account: one whose account went away meanwhile
            // (deleted mid-journey) is no subject of the policy's making.
            if step.servesPolicySubject, run.flow.customPolicy != nil, run.claims.userID == nil { return nil }
            if !run.pagesAllowed { return .invalidCredentials }
            throw PageError(
                status: .badRequest, title: "Sign in first",
                message: "The account this sign-in was for is not available. Return to the application and start again.")
        }
        if run.flow.mfa.isOn, run.claims.secondFactorClearedFor != user.id {
            if !run.pagesAllowed { return .multiFactorRequired }
            run.logger.warning("a step for the account was reached before its second factor", metadata: ["step": "\(step.id)"])
            throw Self.notThisStep
        }
        // A session this journey continues (single sign-on, or the one consent started) must
        // still be the browser's and the store's: a password reset or a revocation meanwhile
        // ends it, and nothing more is done on its strength.
        if let hash = run.claims.sessionHash, try await sessions.live(hash, for: user, in: run.request, tenant: run.tenant) == nil {
            throw PageError(
                status: .forbidden, title: "Sign in again",
                message: "Your session ended while you were signing in. Return to the application and start again.")
        }
        return nil
    }

    /// Reads the account the claims name, when it is not the one read already.
    private func loadUser(_ run: inout JourneyRun) async throws {
        guard let id = run.claims.userID else {
            run.user = nil
            return
        }
        if run.user?.id != id { run.user = try await users.user(id: id) }
    }

    /// Acts on a step's outcome until the journey waits on the person or ends.
    private func conclude(
        _ first: StepOutcome, _ run: inout JourneyRun, _ journey: Journey, context: some IdentityContext
    ) async throws -> Response {
        var outcome = first
        // Each step is entered at most once per request, so this bounds a journey's walk.
        for _ in 0...journey.steps.count {
            switch outcome {
            case .next:
                run.state.move(to: run.state.step + 1, in: journey)
                outcome = try await enterCurrent(&run, journey)
            case .interact(let response):
                try await save(run)
                return applyingCookies(run, to: response)
            case .back(let id, let url):
                guard let index = journey.index(of: id), index < run.state.step else { throw Self.notThisStep }
                run.state.move(to: index, in: journey)
                try await save(run)
                return applyingCookies(run, to: .redirecting(to: url, status: .seeOther))
            case .fail(let error):
                // Each transaction yields one answer: a journey another request finished first
                // gets no second one.
                guard try await interactions.completeInteraction(id: run.record.id, now: now) else { throw Self.alreadyCompleted }
                try await interactions.saveFinalJourney(id: run.record.id, state: run.state)
                await logEnd(run, failure: error, context: context)
                context.logger.info("journey ended with error", metadata: ["code": "\(error.code)", "journey": "\(journey.name)"])
                return applyingCookies(run, to: redirect(error, record: run.record, context: context))
            case .finish(let response):
                // The step completed the transaction itself, before it issued anything.
                try await interactions.saveFinalJourney(id: run.record.id, state: run.state)
                await logEnd(run, failure: nil, context: context)
                return applyingCookies(run, to: response)
            }
        }
        throw PageError(status: .internalServerError, title: "Sign-in failed", message: "The sign-in could not be completed.")
    }

    private func logEnd(_ run: JourneyRun, failure: ProtocolFailure?, context: some IdentityContext) async {
        await signIns.journeyEnded(
            run.record, state: run.state, flowType: run.flow.type, user: run.user, failure: failure, clientAddress: run.clientAddress,
            correlationID: run.state.correlationID ?? context.correlationID, at: now, logger: context.logger)
    }

    private func save(_ run: JourneyRun) async throws {
        // A page shown again changes nothing: no write, and no race with the request that does.
        guard run.state != run.record.journey else { return }
        guard try await interactions.saveJourney(id: run.record.id, state: run.state, revision: run.record.journeyRevision) else {
            throw PageError(
                status: .conflict, title: "Already moved on",
                message: "This sign-in moved on in another window or tab. Continue there, or return to the application and start again.")
        }
    }

    private func applyingCookies(_ run: JourneyRun, to response: Response) -> Response {
        var response = response
        for cookie in run.cookies { response.setCookie(cookie) }
        return response
    }

    private func redirect(_ error: ProtocolFailure, record: InteractionRecord, context: some IdentityContext) -> Response {
        RedirectResponder.error(
            error, redirectURI: record.request.redirectURI, mode: record.request.responseMode, state: record.request.state,
            correlationID: context.correlationID, now: now, face: record.request.protocolFace, origin: record.request.origin)
    }

    /// Adds `step`'s entry to the trace (`outcome` nil: skipped), and logs it.
    private func trace(
        _ step: any OrchestrationStep, _ outcome: StepOutcome?, _ run: inout JourneyRun, before: JourneyRun.ClaimsSnapshot,
        since started: ContinuousClock.Instant
    ) {
        let result: JourneyTraceEntry.Result
        var error: String?
        switch outcome {
        case nil: result = .skipped
        case .next: result = .completed
        case .interact: result = .interacting
        case .back: result = .returned
        case .fail(let failure):
            result = .failed
            error = failure.code
        case .finish: result = .finished
        }
        let elapsed = ContinuousClock.now - started
        let milliseconds = Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        let policyClaims = run.state.policyClaims ?? PolicyClaims()
        let policyChanged = policyClaims.changedNames(from: before.policyClaims ?? PolicyClaims())
        var entry = JourneyTraceEntry(
            step: step.id, result: result, claims: run.claims.changedNames(from: before.claims) + policyChanged,
            milliseconds: milliseconds, error: error, at: now)
        if let program = run.flow.customPolicy, !policyChanged.isEmpty {
            // What this request typed as a password, wherever the policy copied it.
            let secrets = Set(run.form.pairs.filter { PolicyClaims.isSecret($0.0, program.policy) }.map(\.1))
            entry.values = policyClaims.traceValues(of: policyChanged, policy: program.policy, hiding: secrets)
        }
        run.state.trace.append(entry)
        if run.state.trace.count > JourneyTraceEntry.limit { run.state.trace.removeFirst(run.state.trace.count - JourneyTraceEntry.limit) }
        if result != .skipped {
            run.logger.debug(
                "journey step", metadata: ["step": "\(step.id)", "result": "\(result.rawValue)", "claims": "\(entry.claims)"])
        }
    }
}

extension JourneyRun {
    /// The claims before a step, to name in the trace what it changed.
    struct ClaimsSnapshot {
        let claims: JourneyClaims
        let policyClaims: PolicyClaims?
    }

    var snapshot: ClaimsSnapshot { ClaimsSnapshot(claims: claims, policyClaims: state.policyClaims) }
}
