import Foundation
import IdentityClient
import TaskClient
import TestSupport
import Testing

/// The SDK's native-authentication client against the live system (SPEC §2.15): typed states
/// from sign-up to tokens, codes read from the outbox as a person reads their mail, the tokens
/// in the same cache the browser client refreshes from, and typed errors that leave a state
/// usable.
@Suite("Native authentication in the SDK")
struct NativeAuthClientTests {
    static func client(_ live: LiveSystem, store: any TokenStore) throws -> NativeAuthClient {
        NativeAuthClient(
            configuration: ClientConfiguration(
                clientID: live.clientID, authority: try Authority(live.authorityURL + "B2C_1_susi"), tokenStore: store,
                transport: URLSessionTransport(), logger: TestDatabase.logger))
    }

    /// The newest mailed code.
    static func code(_ live: LiveSystem) async throws -> String {
        let body = try await live.identity.outbox(tenantID: live.seed.tenant.id).first?.body ?? ""
        return String(body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 } ?? "")
    }

    static func signedIn(_ state: NativeAuthState) throws -> AuthenticationResult {
        guard case .signedIn(let result) = state else { throw NativeAuthFailure.server(error: "not signed in: \(state)", code: nil, description: nil, correlationID: nil) }
        return result
    }

    @Test("sign-up: a wrong code throws and the state stays usable; the right one signs in; the browser client refreshes the tokens")
    func signUpToTasks() async throws {
        try await LiveSystem.run { live in
            let store = InMemoryTokenStore()
            let native = try Self.client(live, store: store)
            let scopes = [live.clientID]
            let state = try await native.signUp(
                username: "native@example.com", password: "Str0ng-Pass!", attributes: ["displayName": "Native Person"], scopes: scopes)
            guard case .codeRequired(let step) = state else { Issue.record("expected a code, got \(state)"); return }
            #expect(step.sent.codeLength == 8 && step.sent.channel == "email" && step.sent.to?.contains("***") == true)
            await #expect(throws: NativeAuthFailure.invalidCode) { _ = try await step.submit(code: "00000000") }
            let result = try Self.signedIn(try await step.submit(code: try await Self.code(live)))
            #expect(result.account.username == "native@example.com" && !result.accessToken.isEmpty)
            // The browser client shares the cache: it finds the account and refreshes its tokens.
            let app = try live.app(store: store)
            let account = try #require(try await app.currentAccount())
            let refreshed = try await app.acquireTokenSilently(scopes: scopes, account: account, forceRefresh: true)
            #expect(!refreshed.fromCache && refreshed.accessToken != result.accessToken)
            // The Entra face issued it (External ID's issuer, not a user flow's).
            #expect(refreshed.idToken?.claims["ver"] == .string("2.0") && refreshed.idToken?.claims["tfp"] == nil)
            // The Task API takes it, and the person's tasks are the same whichever way they sign in.
            let created = try await live.tasks(app, account: account).create(title: "from a native sign-up")
            let ropc = try live.app()
            let viaFlow = try await ropc.acquireToken(username: "native@example.com", password: "Str0ng-Pass!", scopes: scopes, policy: "B2C_1_ROPC")
            let listed = try await live.tasks(ropc, account: viaFlow.account).list()
            #expect(listed.items.map(\.id) == [created.task.id])
        }
    }

    @Test("sign-in: a wrong password is typed and the step stays usable; a sign-up asks for what it lacks; an existing address cannot sign up")
    func signIn() async throws {
        try await LiveSystem.run { live in
            try await live.addUser("ada@example.com")
            let native = try Self.client(live, store: InMemoryTokenStore())
            guard case .passwordRequired(let step) = try await native.signIn(username: "ada@example.com", scopes: []) else {
                Issue.record("expected a password step")
                return
            }
            await #expect(throws: NativeAuthFailure.invalidPassword) { _ = try await step.submit(password: "Wrong-Passw0rd") }
            _ = try Self.signedIn(try await step.submit(password: "Passw0rd!"))
            await #expect(throws: NativeAuthFailure.userNotFound) { _ = try await native.signIn(username: "nobody@example.com", scopes: []) }
            await #expect(throws: NativeAuthFailure.userAlreadyExists) { _ = try await native.signUp(username: "ada@example.com", password: "Str0ng-Pass!", scopes: []) }

            // No password and no display name given: the sign-up asks for each once the address is proven.
            guard case .codeRequired(let signUp) = try await native.signUp(username: "steps@example.com", scopes: []) else { return }
            let resent = try await signUp.resendCode()
            guard case .passwordRequired(let choose) = try await resent.submit(code: try await Self.code(live)) else {
                Issue.record("expected a password step")
                return
            }
            await #expect(throws: NativeAuthFailure.passwordRejected(reason: "password_too_short", message: "The password must be between 8 and 64 characters.")) {
                _ = try await choose.submit(password: "Ab1!")
            }
            guard case .attributesRequired(let details) = try await choose.submit(password: "Str0ng-Pass!") else {
                Issue.record("expected attributes")
                return
            }
            #expect(details.attributes.contains { $0.name == "displayName" && $0.required })
            await #expect(throws: NativeAuthFailure.attributesInvalid(["displayName"])) { _ = try await details.submit(["displayName": " "]) }
            _ = try Self.signedIn(try await details.submit(["displayName": "Steps"]))
            guard case .passwordRequired(let again) = try await native.signIn(username: "steps@example.com", scopes: []) else { return }
            _ = try Self.signedIn(try await again.submit(password: "Str0ng-Pass!"))
        }
    }

    @Test("password reset: a weak password is typed and refused, the new one set, then signed in with it")
    func passwordReset() async throws {
        try await LiveSystem.run { live in
            try await live.addUser("reset@example.com")
            let native = try Self.client(live, store: InMemoryTokenStore())
            guard case .codeRequired(let step) = try await native.resetPassword(username: "reset@example.com", scopes: []),
                case .newPasswordRequired(let password) = try await step.submit(code: try await Self.code(live))
            else {
                Issue.record("expected a code, then a new password")
                return
            }
            await #expect(throws: NativeAuthFailure.self) { _ = try await password.submit(password: "weak") }
            _ = try Self.signedIn(try await password.submit(password: "N3w-Passw0rd!"))
            guard case .passwordRequired(let signIn) = try await native.signIn(username: "reset@example.com", scopes: []) else { return }
            _ = try Self.signedIn(try await signIn.submit(password: "N3w-Passw0rd!"))
        }
    }
}
