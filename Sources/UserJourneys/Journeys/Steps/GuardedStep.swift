import TrustFramework

/// A shared step (token issuance) at a custom policy's `SendClaims` that has preconditions of
/// its own or runs inside a sub-journey: the step as it is, entered only where those hold.
struct GuardedStep: OrchestrationStep {
    let inner: any OrchestrationStep
    /// The orchestration step it stands for, whose preconditions it keeps.
    let policyStep: PolicyOrchestrationStep
    /// The ids of the `InvokeSubJourney` steps it runs under.
    let invokers: [String]
    /// Its id where the inner step's is taken (a second forced-password-change step).
    var renamed: String? = nil

    var id: String { renamed ?? inner.id }
    var pages: Set<HostedPage> { inner.pages }
    var actsForUser: Bool { inner.actsForUser }
    var servesPolicySubject: Bool { inner.servesPolicySubject }

    func applies(to run: JourneyRun) -> Bool {
        PolicyStep.invoked(invokers, run) && !policyStep.skipped(for: run.state.policyClaims ?? PolicyClaims()) && inner.applies(to: run)
    }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome { try await inner.enter(&run) }
    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { try await inner.show(page, &run) }
    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { try await inner.act(on: page, &run) }
    func receive(_ identity: FederatedIdentity, _ run: inout JourneyRun) async throws -> StepOutcome { try await inner.receive(identity, &run) }
}

/// The end of a `Transfer` sub-journey that ran without its `SendClaims` ending the journey:
/// B2C does not return to the caller from a transfer, so the journey fails here, named.
struct TransferEndStep: OrchestrationStep {
    let id: String
    let subJourney: String
    let invokers: [String]

    func applies(to run: JourneyRun) -> Bool { PolicyStep.invoked(invokers, run) }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        .fail(.policyNotRunnable("The Transfer sub-journey '\(subJourney)' ended without a SendClaims step."))
    }
}
