import ArgumentParser
import Foundation
import IdentityClient
import WireCoding

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a native-authentication command answers the states the SDK hands it (SPEC §2.15): codes
/// from the prompt or, against a development server, from its outbox; passwords from standard
/// input or a prompt that does not echo; the sign-up's details from options or the prompt.
struct NativeAnswers {
    let session: Session
    let username: String
    let codeFromOutbox: Bool
    /// Read once, in order: the password (sign-in, sign-up) or the new password (reset).
    let passwordFromStdin: Bool
    var attributes: [String: String]

    /// Answers states until signed in.
    func drive(_ first: NativeAuthState) async throws -> AuthenticationResult {
        var state = first
        // Each answer moves the flow on; a wrong code or password is asked for again a few times.
        for _ in 0..<12 {
            switch state {
            case .signedIn(let result): return result
            case .codeRequired(let step): state = try await retrying { try await step.submit(code: try await code(step.sent)) }
            case .passwordRequired(let step): state = try await step.submit(password: try password("Password: "))
            case .newPasswordRequired(let step): state = try await step.submit(password: try password("New password: "))
            case .attributesRequired(let step):
                var values: [String: String] = [:]
                for attribute in step.attributes where attribute.required {
                    values[attribute.name] = try attributes[attribute.name] ?? prompt("\(attribute.name): ")
                }
                state = try await step.submit(values)
            case .secondFactorRequired(let step):
                let (methods, send) = try await step.methods()
                guard let method = methods.first else { throw CommandError("the account has no second-factor method this app can use") }
                Terminal.note("A second factor is needed: a code goes to \(method.hint ?? method.channel).")
                state = .codeRequired(try await send(method))
            case .registrationRequired(let step):
                Terminal.note("Your email address must be verified for the second factor.")
                state = .codeRequired(try await step.register(email: username))
            }
        }
        throw CommandError("the sign-in did not finish")
    }

    /// A wrong code typed at the prompt is asked for again (three tries); one from the outbox is not.
    private func retrying(_ body: () async throws -> NativeAuthState) async throws -> NativeAuthState {
        for attempt in 1...3 {
            do {
                return try await body()
            } catch NativeAuthFailure.invalidCode where !codeFromOutbox && attempt < 3 {
                Terminal.error("that code is not valid; try again")
            }
        }
        throw NativeAuthFailure.invalidCode
    }

    private func code(_ sent: CodeRequired.Delivery) async throws -> String {
        if codeFromOutbox { return try await outboxCode() }
        return try prompt("Enter the code sent to \(sent.to ?? "your email"): ")
    }

    /// The newest code the development server's outbox holds for the user (`/dev/outbox`).
    private func outboxCode() async throws -> String {
        guard let base = session.settings.identityBaseURL, let url = URL(string: "\(base)/dev/outbox?format=json") else {
            throw CommandError("the settings have no identityBaseURL to read the outbox from")
        }
        let response = try await session.transport.send(TransportRequest(method: "GET", url: url, headers: ["Accept": "application/json"]))
        struct Outbox: Decodable {
            struct Message: Decodable {
                var recipient: String
                var code: String?
            }
            var messages: [Message]
        }
        guard response.status == 200, let outbox = try? JSONDecoder().decode(Outbox.self, from: response.body) else {
            throw CommandError("the outbox answered HTTP \(response.status): --code-from-outbox needs a development server")
        }
        guard let code = outbox.messages.first(where: { $0.recipient.lowercased() == username.lowercased() })?.code else {
            throw CommandError("no code for \(username) in the outbox")
        }
        return code
    }

    private func password(_ label: String) throws -> String {
        if passwordFromStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else { throw CommandError("no password on standard input") }
            return line
        }
        guard isatty(STDIN_FILENO) == 1, let typed = getpass(label) else { throw CommandError("pass the password on standard input with --password-stdin") }
        return String(cString: typed)
    }

    private func prompt(_ label: String) throws -> String {
        FileHandle.standardError.write(Data(label.utf8))
        guard let line = readLine(strippingNewline: true), !line.isEmpty else { throw CommandError("no answer for '\(label.trimmingCharacters(in: .whitespaces))'") }
        return line
    }
}

extension Session {
    /// The native-authentication client over this session's settings and token cache.
    var native: NativeAuthClient { NativeAuthClient(configuration: app.configuration) }
}

struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup", abstract: "Create an account in the terminal (External ID's native authentication; no browser).")

    @OptionGroup var global: GlobalOptions
    @Option(help: "Your email address.") var username: String
    @Option(help: "Your display name.") var name: String?
    @Option(help: "Another detail the sign-up collects, as name=value (repeatable).") var attribute: [String] = []
    @Flag(help: "Read the new password from standard input (otherwise it is asked for).") var passwordStdin = false
    @Flag(help: "An account without a password: sign in with emailed codes.") var noPassword = false
    @Flag(help: "Read the emailed code from the development server's outbox.") var codeFromOutbox = false

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            var details: [String: String] = [:]
            for pair in attribute {
                guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                    throw CommandError("--attribute takes name=value, not '\(pair)'")
                }
                details[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
            }
            if let name { details["displayName"] = name }
            let answers = NativeAnswers(
                session: session, username: username, codeFromOutbox: codeFromOutbox, passwordFromStdin: passwordStdin, attributes: details)
            let password = noPassword ? nil : try answers.initialPassword()
            let first = try await session.native.signUp(username: username, password: password, attributes: details, scopes: session.settings.scopes)
            Account.report(try await answers.drive(first).account, global: global, verb: "Signed up and signed in as")
        }
    }
}

extension NativeAnswers {
    /// The password a sign-up starts with.
    func initialPassword() throws -> String {
        if passwordFromStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else { throw CommandError("no password on standard input") }
            return line
        }
        guard isatty(STDIN_FILENO) == 1, let typed = getpass("Choose a password: ") else {
            throw CommandError("pass the password on standard input with --password-stdin, or use --no-password")
        }
        return String(cString: typed)
    }
}

/// `todo login --native` and `todo password-reset --native`.
enum NativeSignIn {
    static func signIn(_ global: GlobalOptions, username: String, passwordStdin: Bool, codeFromOutbox: Bool) async throws {
        try await run(global, username: username, passwordStdin: passwordStdin, codeFromOutbox: codeFromOutbox, verb: "Signed in as") {
            try await $0.native.signIn(username: username, scopes: $0.settings.scopes)
        }
    }

    static func reset(_ global: GlobalOptions, username: String, passwordStdin: Bool, codeFromOutbox: Bool) async throws {
        try await run(global, username: username, passwordStdin: passwordStdin, codeFromOutbox: codeFromOutbox, verb: "Password changed; signed in as") {
            try await $0.native.resetPassword(username: username, scopes: $0.settings.scopes)
        }
    }

    private static func run(
        _ global: GlobalOptions, username: String, passwordStdin: Bool, codeFromOutbox: Bool, verb: String,
        _ start: (Session) async throws -> NativeAuthState
    ) async throws {
        let session = try Session(global)
        let answers = NativeAnswers(
            session: session, username: username, codeFromOutbox: codeFromOutbox, passwordFromStdin: passwordStdin, attributes: [:])
        Account.report(try await answers.drive(try await start(session)).account, global: global, verb: verb)
    }
}
