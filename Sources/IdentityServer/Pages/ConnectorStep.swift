import Foundation
import Hummingbird

/// A flow's API connector at one step of a hosted page (SPEC §2.11): the page goes on with the
/// connector's overrides, shows its block page, shows the form again with its message, or ends
/// the sign-in with AADB2C90075 when the connector fails. Nothing is created before it answers.
extension PageStep {
    enum ConnectorStepResult {
        /// Go on, with these account values set (account keys, `displayName` included).
        case proceed(overrides: [String: String])
        /// Answer with this instead.
        case respond(Response)
    }

    /// Calls the connector named `name` (none: go on unchanged). `form` renders the page that
    /// was posted, with the connector's validation message.
    func runConnector(
        _ name: String?, step: ConnectorStep, subject: ConnectorSubject,
        form: (String) async throws -> Response
    ) async throws -> ConnectorStepResult {
        guard let name else { return .proceed(overrides: [:]) }
        guard let connector = tenant.apiConnectors.first(where: { $0.name == name }) else {
            let failure = ConnectorFailure(connector: name, step: step, code: "Configuration", reason: "no API connector of that name")
            return .respond(try await flow.fail(record, with: failure.b2cError, context: context))
        }
        let outcome: ConnectorOutcome
        do {
            outcome = try await service.connectors.call(
                connector, step: step, subject: subject, tenant: tenant, clientID: record.request.clientID,
                uiLocales: record.request.uiLocales)
        } catch {
            context.logger.warning(
                "API connector failed", metadata: ["connector": "\(name)", "step": "\(step.rawValue)", "reason": "\(error.reason)"])
            return .respond(try await flow.fail(record, with: error.b2cError, context: context))
        }
        context.logger.info("API connector answered", metadata: ["connector": "\(name)", "step": "\(step.rawValue)"])
        switch outcome {
        case .proceed(let overrides): return .proceed(overrides: overrides)
        case .validationError(let message): return .respond(try await form(message))
        case .block(let message):
            return .respond(try page("blocked", ["title": text("blocked_title"), "userMessage": message], status: .forbidden))
        }
    }
}

extension InteractionFlow {
    /// The flow's "before sending the token" connector at the end of every interactive sign-in
    /// and sign-up (``ConnectorCaller/tokenClaimOverrides(flow:user:tenant:clientID:uiLocales:logger:)``).
    func tokenClaimOverrides(
        _ record: InteractionRecord, user: UserAccount, tenant: Tenant, userFlow: UserFlow, context: some IdentityContext
    ) async throws -> Result<[String: String], ConnectorFailure> {
        await service.connectors.tokenClaimOverrides(
            flow: userFlow, user: user, tenant: tenant, clientID: record.request.clientID, uiLocales: record.request.uiLocales,
            logger: context.logger)
    }
}
