import Foundation
import Hummingbird
import IdentityDirectory

/// A flow's API connector at one step of a journey (SPEC §2.11): the step goes on with the
/// connector's overrides, shows its block page, shows the form again with its message, or ends
/// the sign-in with AADB2C90075 when the connector fails. Nothing is created before it answers.
struct ConnectorCall: Sendable {
    let connectors: ConnectorCaller

    enum Result {
        /// Go on, with these account values set (account keys, `displayName` included).
        case proceed(overrides: [String: String])
        /// The step's outcome instead.
        case stop(StepOutcome)
    }

    /// Calls the connector named `name` (none: go on unchanged). `form` renders the page that
    /// was posted, with the connector's validation message.
    func run(
        _ name: String?, step: ConnectorStep, subject: ConnectorSubject, _ run: JourneyRun,
        form: (String) async throws -> StepOutcome
    ) async throws -> Result {
        guard let name else { return .proceed(overrides: [:]) }
        guard let connector = run.tenant.apiConnectors.first(where: { $0.name == name }) else {
            let failure = ConnectorFailure(connector: name, step: step, code: "Configuration", reason: "no API connector of that name")
            return .stop(.fail(failure.b2cError))
        }
        let outcome: ConnectorOutcome
        do {
            outcome = try await connectors.call(
                connector, step: step, subject: subject, tenant: run.tenant, clientID: run.authorization.clientID,
                uiLocales: run.authorization.uiLocales)
        } catch {
            run.logger.warning(
                "API connector failed", metadata: ["connector": "\(name)", "step": "\(step.rawValue)", "reason": "\(error.reason)"])
            return .stop(.fail(error.b2cError))
        }
        run.logger.info("API connector answered", metadata: ["connector": "\(name)", "step": "\(step.rawValue)"])
        switch outcome {
        case .proceed(let overrides): return .proceed(overrides: overrides)
        case .validationError(let message): return .stop(try await form(message))
        case .block(let message):
            return .stop(
                .interact(try run.page(.blocked, ["title": run.text("blocked_title"), "userMessage": message], status: .forbidden)))
        }
    }
}
