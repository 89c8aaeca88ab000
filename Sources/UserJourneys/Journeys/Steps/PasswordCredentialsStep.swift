import Foundation
import IdentityDirectory

/// The password grant's sign-in (B2C's `login-NonInteractive`): the `username` and `password`
/// of the token request, checked as the sign-in page checks them (lockout included). Its
/// failures are the grant's errors.
struct PasswordCredentialsStep: OrchestrationStep {
    let passwords: PasswordAuthenticator

    let id = "login-NonInteractive"

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome {
        guard let username = run.form.nonEmpty("username") else { return .fail(.missingParameter("username")) }
        guard let password = run.form["password"], !password.isEmpty else { return .fail(.missingParameter("password")) }
        switch try await passwords.authenticate(
            tenantID: run.tenant.id, email: username, password: password, source: run.clientAddress, now: run.now, logger: run.logger)
        {
        case .success(let user):
            run.claims.authenticated(user, by: .local, at: run.now)
            run.user = user
            return .next
        case .locked: return .fail(.accountLocked)
        case .invalid: return .fail(.invalidCredentials)
        case .disabled: return .fail(.accountDisabled)
        }
    }
}
