import Foundation
import TodoModels

/// Account administration shared by the admin commands and tests.
extension IdentityServer {
    public enum AdministrationError: Error, CustomStringConvertible, Equatable {
        case invalidEmail(String)
        case invalidName(String)
        case weakPassword(String)
        case duplicate(String)
        case noSuchUser(String)

        public var description: String {
            switch self {
            case .invalidEmail(let email): "'\(TextRules.printable(email))' is not a valid email address"
            case .invalidName(let reason): reason
            case .weakPassword(let reason): reason
            case .duplicate(let email): "an account with the email \(TextRules.printable(email)) already exists"
            case .noSuchUser(let key): "no account '\(TextRules.printable(key))'"
            }
        }
    }

    /// Creates a local account with the same rules as the sign-up page.
    public func createLocalUser(tenantID: UUID, email: String, displayName: String, password: String) async throws -> UserAccount {
        guard let address = EmailAddress(email) else { throw AdministrationError.invalidEmail(email) }
        let name: String
        switch UserAttribute.displayName.validate(displayName) {
        case .success(let valid): name = valid.isEmpty ? String(address.display.split(separator: "@").first ?? "") : valid
        case .failure(let problem): throw AdministrationError.invalidName(problem.message)
        }
        if let problem = PasswordPolicy.problem(with: password) { throw AdministrationError.weakPassword(problem) }
        let user = UserAccount(
            tenantID: tenantID, identityProvider: .local, signInName: address.canonical, email: address.display,
            displayName: name, passwordHash: try await hasher.hash(password), createdAt: clock.now)
        do {
            try await users.create(user)
        } catch UserDirectoryError.duplicate {
            throw AdministrationError.duplicate(email)
        }
        return user
    }

    /// Finds an account by object id or by (local) email.
    public func findUser(tenantID: UUID, emailOrID: String) async throws -> UserAccount {
        if let id = UUID(uuidString: emailOrID), let user = try await users.user(id: id), user.tenantID == tenantID { return user }
        if let name = EmailAddress.canonical(emailOrID),
            let user = try await users.user(tenantID: tenantID, provider: .local, signInName: name)
        {
            return user
        }
        throw AdministrationError.noSuchUser(emailOrID)
    }
}
