import ArgumentParser
import Foundation
import IdentityClient

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sign in (in the browser, or with a password for scripts).")

    @OptionGroup var global: GlobalOptions
    @Option(help: "The user flow (default: the sign-up-or-sign-in flow).") var policy: String?
    @Flag(help: "Go to the sign-up flow.") var signUp = false
    @Flag(help: "Sign in with Facebook.") var facebook = false
    @Option(help: "Sign in with this user name and a password from standard input (ROPC).") var username: String?
    @Flag(help: "Read the password from standard input (with --username).") var passwordStdin = false
    @Flag(help: "Print the sign-in URL instead of opening a browser.") var noBrowser = false
    @Option(help: "Seconds to wait for the browser.") var timeout = 300
    @Flag(help: "Let the identity service's browser session sign you in without asking (single sign-on).") var sso = false
    @Flag(help: "Sign in in the terminal (External ID's native authentication), with --username.") var native = false
    @Flag(help: "With --native: read an emailed code from the development server's outbox.") var codeFromOutbox = false

    func validate() throws {
        if [policy != nil, signUp, facebook].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --policy, --sign-up and --facebook")
        }
        if passwordStdin && username == nil { throw ValidationError("--password-stdin needs --username") }
        if native && username == nil { throw ValidationError("--native needs --username") }
        if native && (policy != nil || signUp || facebook) { throw ValidationError("--native signs in without a user flow's pages") }
        if codeFromOutbox && !native { throw ValidationError("--code-from-outbox needs --native") }
    }

    func run() async throws {
        if native, let username {
            return try await reportingFailures {
                try await NativeSignIn.signIn(global, username: username, passwordStdin: passwordStdin, codeFromOutbox: codeFromOutbox)
            }
        }
        try await reportingFailures {
            let session = try Session(global)
            let result: AuthenticationResult
            if let username {
                guard passwordStdin else { throw CommandError("pass the password on standard input with --password-stdin") }
                guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                    throw CommandError("no password on standard input")
                }
                do {
                    result = try await session.app.acquireToken(
                        username: username, password: line, scopes: session.settings.scopes, policy: policy ?? session.settings.ropcPolicy)
                } catch IdentityError.interactionRequired(let reason, _, _) {
                    // For the password grant, invalid_grant means the credentials were refused.
                    throw CommandError("sign-in failed: \(reason)")
                }
            } else {
                let settings = session.settings
                let chosen = policy ?? (signUp ? settings.signUpPolicy : facebook ? settings.facebookPolicy : settings.signUpSignInPolicy)
                // `todo login` asks, as the tutorials' apps do (`prompt=login`): after `todo logout`
                // the browser's SSO cookie must not sign the previous user back in unasked.
                let parameters = InteractiveParameters(
                    scopes: settings.scopes, policy: chosen, prompt: sso ? nil : .login, domainHint: facebook ? "facebook.com" : nil)
                result = try await Interactive.signIn(session, parameters, noBrowser: noBrowser, timeout: timeout)
            }
            Account.report(result.account, global: global, verb: "Signed in as")
        }
    }
}

/// Browser sign-ins, with the "Forgot your password?" detour.
enum Interactive {
    static func authenticator(noBrowser: Bool, timeout: Int) -> LoopbackWebAuthenticator {
        LoopbackWebAuthenticator(
            timeout: .seconds(timeout),
            openBrowser: noBrowser
                ? { url in Terminal.note("Open this URL in a browser to continue:\n  \(url.absoluteString)") }
                : LoopbackWebAuthenticator.systemBrowser)
    }

    static func signIn(_ session: Session, _ parameters: InteractiveParameters, noBrowser: Bool, timeout: Int) async throws
        -> AuthenticationResult
    {
        let authenticator = authenticator(noBrowser: noBrowser, timeout: timeout)
        do {
            return try await Terminal.spinning("Waiting for the browser…") {
                try await session.app.acquireTokenInteractively(parameters, authenticator: authenticator)
            }
        } catch IdentityError.passwordResetRequested {
            // AADB2C90118: the user clicked "Forgot your password?" on the sign-in page; B2C
            // expects the app to start the password-reset flow (https://learn.microsoft.com/azure/active-directory-b2c/troubleshoot?pivots=b2c-user-flow#password-reset-error).
            Terminal.note("Resetting your password…")
            var reset = parameters
            reset.policy = session.settings.passwordResetPolicy
            reset.prompt = nil
            return try await Terminal.spinning("Waiting for the browser…") {
                try await session.app.acquireTokenInteractively(reset, authenticator: authenticator)
            }
        }
    }
}

extension Account {
    static func report(_ account: Account, global: GlobalOptions, verb: String) {
        if global.json {
            print((try? Terminal.json(AccountSummary(account, current: true))) ?? "{}")
        } else {
            let who = account.username ?? account.name ?? account.homeAccountID
            let name = account.name.map { " (\($0))" } ?? ""
            print("\(verb) \(Terminal.bold(who))\(name)\(account.policy.map { Terminal.dim(" with \($0)") } ?? "")")
        }
    }
}

struct AccountSummary: Encodable {
    var id: String
    var username: String?
    var name: String?
    var objectId: String?
    var policy: String?
    var environment: String
    var current: Bool

    init(_ account: Account, current: Bool) {
        id = account.homeAccountID
        username = account.username
        name = account.name
        objectId = account.objectID
        policy = account.policy
        environment = account.environment
        self.current = current
    }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sign out (this account, or all).")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Sign out every account.") var all = false
    @Flag(help: "Also end the identity service's browser session.") var browser = false

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            let accounts = all ? try await session.app.accounts() : [try await session.account()]
            for account in accounts {
                try await session.app.signOut(
                    account, browser: browser ? Interactive.authenticator(noBrowser: false, timeout: 60) : nil)
                if !global.json { print("Signed out \(account.username ?? account.homeAccountID)") }
            }
            if global.json { print(try Terminal.json(["signedOut": accounts.map(\.homeAccountID)])) }
        }
    }
}

struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Show the account and its ID-token claims.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            let account = try await session.account()
            if global.json {
                print(try Terminal.json(["account": JSONValue.string(account.homeAccountID), "claims": JSONValue.object(account.claims)]))
                return
            }
            Account.report(account, global: global, verb: "Signed in as")
            Terminal.printTable(account.claims, indent: "  ")
        }
    }
}

struct Accounts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the signed-in accounts.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            let accounts = try await session.app.accounts()
            let current = try await session.app.currentAccount()
            if global.json {
                print(try Terminal.json(accounts.map { AccountSummary($0, current: $0.homeAccountID == current?.homeAccountID) }))
                return
            }
            if accounts.isEmpty { print("No accounts: run `todo login`.") }
            for account in accounts {
                let marker = account.homeAccountID == current?.homeAccountID ? Terminal.green("*") : " "
                print(
                    "\(marker) \(account.username ?? account.homeAccountID)\(Terminal.dim("  \(account.policy ?? "")  \(account.homeAccountID)"))"
                )
            }
        }
    }
}

struct Switch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Make another signed-in account current.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "User name, object id or account id.") var account: String

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            guard let found = try await session.app.account(matching: account) else {
                throw CommandError("no signed-in account '\(account)' (see `todo accounts`)")
            }
            try await session.app.setCurrentAccount(found)
            Account.report(found, global: global, verb: "Switched to")
        }
    }
}

struct Profile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Edit your profile (the profile-edit flow).")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print the URL instead of opening a browser.") var noBrowser = false

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            let account = try await session.account()
            let result = try await Interactive.signIn(
                session,
                InteractiveParameters(
                    scopes: session.settings.scopes, policy: session.settings.profileEditPolicy, loginHint: account.username),
                noBrowser: noBrowser, timeout: 300)
            Account.report(result.account, global: global, verb: "Profile saved for")
        }
    }
}

struct PasswordReset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "password-reset", abstract: "Reset your password.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print the URL instead of opening a browser.") var noBrowser = false
    @Flag(help: "Reset in the terminal (External ID's native authentication), with --username.") var native = false
    @Option(help: "With --native: the account's email address.") var username: String?
    @Flag(help: "With --native: read the new password from standard input.") var passwordStdin = false
    @Flag(help: "With --native: read the emailed code from the development server's outbox.") var codeFromOutbox = false

    func validate() throws {
        if native != (username != nil) { throw ValidationError("--native and --username go together") }
        if (passwordStdin || codeFromOutbox) && !native { throw ValidationError("--password-stdin and --code-from-outbox need --native") }
    }

    func run() async throws {
        if native, let username {
            return try await reportingFailures {
                try await NativeSignIn.reset(global, username: username, passwordStdin: passwordStdin, codeFromOutbox: codeFromOutbox)
            }
        }
        try await reportingFailures {
            let session = try Session(global)
            let result = try await Interactive.signIn(
                session, InteractiveParameters(scopes: session.settings.scopes, policy: session.settings.passwordResetPolicy),
                noBrowser: noBrowser, timeout: 300)
            Account.report(result.account, global: global, verb: "Password changed; signed in as")
        }
    }
}

struct Me: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show your profile from the Graph-style /me endpoint (or, where the sign-in grants no Graph access, the ID token).")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            let account = try await session.account()
            guard let base = session.settings.identityBaseURL, let url = URL(string: "\(base)/v1.0/me") else {
                throw CommandError("the settings have no identityBaseURL")
            }
            let token: AuthenticationResult
            do {
                token = try await session.app.acquireTokenSilently(scopes: ["https://graph.microsoft.com/User.Read"], account: account)
            } catch let error as IdentityError where error.b2cCode == "AADB2C90205" {
                // A user flow's refresh token stays with the scopes it was signed in with (RFC
                // 6749 §6; B2C issues no Graph tokens on user flows): the same profile, from the
                // ID token's claims under Graph's names.
                FileHandle.standardError.write(Data("(from the ID token: this sign-in grants no Graph access)\n".utf8))
                print(profile: Self.graphProfile(claims: account.claims))
                return
            }
            let response = try await URLSessionTransport().send(
                TransportRequest(
                    method: "GET", url: url, headers: ["Authorization": "Bearer \(token.accessToken)", "Accept": "application/json"]))
            guard response.status == 200, let profile = try? JSONDecoder().decode([String: JSONValue].self, from: response.body) else {
                throw CommandError("the profile endpoint answered HTTP \(response.status)")
            }
            print(profile: profile)
        }
    }

    private func print(profile: [String: JSONValue]) {
        if global.json {
            Swift.print((try? Terminal.json(profile)) ?? "{}")
            return
        }
        Terminal.printTable(profile.filter { !$0.key.hasPrefix("@") })
    }

    /// Graph's `/me` properties from B2C's ID-token claims (https://learn.microsoft.com/azure/active-directory-b2c/tokens-overview#claims).
    static func graphProfile(claims: [String: JSONValue]) -> [String: JSONValue] {
        var emails: [JSONValue] = []
        if case .array(let listed)? = claims["emails"] { emails = listed }
        return [
            "id": claims["oid"] ?? .null, "displayName": claims["name"] ?? .null, "givenName": claims["given_name"] ?? .null,
            "surname": claims["family_name"] ?? .null, "mail": emails.first ?? .null, "jobTitle": claims["jobTitle"] ?? .null,
            "userPrincipalName": emails.first ?? .null,
        ]
    }
}
