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
    /// The flow's "before sending the token" connector (step `PreTokenIssuance`), at the end of
    /// every interactive sign-in and sign-up: its `Continue` values, or the failure that ends
    /// the sign-in (a block page or a validation error is no answer at this step).
    func tokenClaimOverrides(
        _ record: InteractionRecord, user: UserAccount, tenant: Tenant, userFlow: UserFlow, context: some IdentityContext
    ) async throws -> Result<[String: String], ConnectorFailure> {
        guard let name = userFlow.connectors.beforeSendingToken else { return .success([:]) }
        guard let connector = tenant.apiConnectors.first(where: { $0.name == name }) else {
            return .failure(
                ConnectorFailure(connector: name, step: .preTokenIssuance, code: "Configuration", reason: "no API connector of that name"))
        }
        var identities = [(signInType: String, issuer: String, issuerAssignedId: String)]()
        if user.identityProvider == .local {
            identities.append(("emailAddress", tenant.name, user.email ?? user.signInName))
        } else {
            identities.append(("federated", user.identityProvider.rawValue, user.signInName))
        }
        let subject = ConnectorSubject(
            email: user.email, identities: identities, displayName: user.displayName, objectID: user.objectID, attributes: user.attributes)
        do {
            switch try await service.connectors.call(
                connector, step: .preTokenIssuance, subject: subject, tenant: tenant, clientID: record.request.clientID,
                uiLocales: record.request.uiLocales)
            {
            case .proceed(let overrides):
                context.logger.info("API connector answered", metadata: ["connector": "\(name)", "step": "PreTokenIssuance"])
                return .success(overrides)
            case .block, .validationError:
                return .failure(
                    ConnectorFailure(
                        connector: name, step: .preTokenIssuance, code: "200", reason: "only Continue is an answer at this step"))
            }
        } catch {
            context.logger.warning("API connector failed", metadata: ["connector": "\(name)", "reason": "\(error.reason)"])
            return .failure(error)
        }
    }
}
