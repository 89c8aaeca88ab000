import Foundation
import IdentityDirectory

/// The test-control surface's faults (`POST /dev/faults`) at the start of a journey: an error
/// armed on the flow ends the sign-in in the protocol's own form, a delay holds it, once. Only
/// journeys of a server with the development surface have this step; production journeys and
/// handlers know nothing of faults.
struct DevelopmentFaultStep: OrchestrationStep {
    let faults: FaultInjector

    let id = "DevelopmentFault"

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        do {
            try await faults.apply(policy: run.flow.name)
        } catch let failure as ProtocolFailure {
            return .fail(failure)
        }
        return .next
    }
}
