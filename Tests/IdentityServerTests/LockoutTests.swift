import Foundation
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys

@Suite("Smart lockout under parallel guessing")
struct LockoutRaceTests {
    /// The answer without what differs per request (correlation id, timestamp, trace).
    private func shape(_ response: TestResponse) -> String {
        let description = (response.json["error_description"] as? String) ?? ""
        return "\(response.status.code) \(response.json["error"] ?? "") \(description.split(whereSeparator: \.isNewline).first ?? "")"
    }

    /// Sends every password at once, each from its own client; the answers with their passwords.
    private func guessInParallel(_ h: IdentityHarness, _ driver: Driver, _ passwords: [String]) async throws -> [(String, TestResponse)] {
        try await withThrowingTaskGroup(of: (String, TestResponse).self) { group in
            for password in passwords.shuffled() {
                group.addTask {
                    (password, try await Driver(client: driver.client).ropc(h, username: "victim@example.com", password: password))
                }
            }
            return try await group.reduce(into: [(String, TestResponse)]()) { $0.append($1) }
        }
    }

    @Test(
        "a name without an account locks exactly like an account, in sequence and under 40 parallel guesses",
        arguments: TestDatabase.engines)
    func unknownNamesLockAlike(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("victim@example.com")
            var answers: [String: [String]] = [:]
            for name in ["victim@example.com", "nobody@example.com"] {
                for guess in 0..<12 {
                    let response = try await driver.ropc(h, username: name, password: "Wrong-guess-\(guess)")
                    answers[name, default: []].append(shape(response))
                }
            }
            #expect(answers["victim@example.com"] == answers["nobody@example.com"])
            #expect(answers["nobody@example.com"]?.last?.contains("AADB2C90114") == true)

            let parallel = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for guess in 0..<40 {
                    group.addTask {
                        try await Driver(client: driver.client).ropc(h, username: "ghost@example.com", password: "G-\(guess)-x1")
                    }
                }
                return try await group.reduce(into: [TestResponse]()) { $0.append($1) }
            }
            #expect(parallel.filter { b2cCode($0) == "AADB2C90225" }.count == 10)
            #expect(parallel.filter { b2cCode($0) == "AADB2C90114" }.count == 30)
        }
    }

    @Test("40 parallel wrong ROPC guesses: exactly 10 reach the hash, 30 are refused as locked", arguments: TestDatabase.engines)
    func parallelWrongGuesses(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("victim@example.com")
            let answers = try await guessInParallel(h, driver, (0..<40).map { "Wrong-guess-\($0)" })
            let checked = answers.filter { b2cCode($0.1) == "AADB2C90225" }
            let locked = answers.filter { b2cCode($0.1) == "AADB2C90114" }
            #expect(checked.count == 10, "exactly the threshold of distinct guesses is checked")
            #expect(locked.count == 30)
            #expect(Set(locked.map { shape($0.1) }).count == 1)
            // The right password now gets exactly what a wrong one gets.
            let right = try await driver.ropc(h, username: "victim@example.com", password: "Passw0rd!")
            let wrong = try await driver.ropc(h, username: "victim@example.com", password: "Wrong-guess-99")
            #expect(b2cCode(right) == "AADB2C90114")
            #expect(shape(right) == shape(wrong))
        }
    }

    @Test(
        "41 parallel ROPC guesses with the right one among them: it signs in or is refused like the crowd, never alone",
        arguments: TestDatabase.engines)
    func rightPasswordInTheCrowd(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("victim@example.com")
            let answers = try await guessInParallel(h, driver, (0..<40).map { "Wrong-guess-\($0)" } + ["Passw0rd!"])
            let other = answers.filter { $0.1.status != .ok && !["AADB2C90225", "AADB2C90114"].contains(b2cCode($0.1)) }
            #expect(other.isEmpty, "unexpected answers: \(other.map { $0.1.text })")
            let right = try #require(answers.first { $0.0 == "Passw0rd!" }?.1)
            let wrongChecked = answers.filter { b2cCode($0.1) == "AADB2C90225" }.count
            let locked = answers.filter { b2cCode($0.1) == "AADB2C90114" }
            #expect(Set(locked.map { shape($0.1) }).count <= 1, "a locked account answers alike")
            if right.status == .ok {
                // It was one of the first ten admitted; its success cleared the counters, so at
                // most ten more were charged after it.
                #expect(wrongChecked <= 19)
            } else {
                #expect(b2cCode(right) == "AADB2C90114")
                #expect(wrongChecked == 10)
                #expect(locked.count == 31, "refused with the thirty wrong guesses that came after the lock")
            }
        }
    }

    @Test("while locked, the sign-in page answers the right and a wrong password with the same page", arguments: TestDatabase.engines)
    func lockedPageIsNoOracle(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            _ = try await h.addUser("victim@example.com")
            for guess in 1...10 { _ = try await driver.ropc(h, username: "victim@example.com", password: "Bad-guess-\(guess)") }
            let right = try await driver.signIn(h, attempt: AuthorizationAttempt(harness: h), email: "victim@example.com")
            let wrong = try await driver.signIn(
                h, attempt: AuthorizationAttempt(harness: h), email: "victim@example.com", password: "Another-bad-1")
            #expect(right.status == .badRequest)
            #expect(right.location == nil)
            #expect(right.status == wrong.status)
            let message = ProtocolFailure.accountLocked.message
            #expect(Form.unescapeHTML(right.text).contains(message))
            #expect(Form.unescapeHTML(wrong.text).contains(message))
        }
    }

    @Test("a right password admitted before parallel guesses locked the account still signs in and clears the counters")
    func admittedRightPassword() {
        let policy = LockoutPolicy.default
        let now = Date()
        var state = LockoutState()
        let (afterRight, rightAdmission) = policy.admit(state, fingerprint: "right", now: now)
        #expect(rightAdmission == .charged)
        state = afterRight
        for guess in 0..<9 {
            let (next, admission) = policy.admit(state, fingerprint: "wrong-\(guess)", now: now)
            #expect(admission == .charged)
            state = next
        }
        #expect(state.isLocked(at: now), "ten charges lock, whatever their outcome will be")
        #expect(policy.admit(state, fingerprint: "wrong-10", now: now).1 == .locked)
        #expect(policy.admit(state, fingerprint: "right", now: now).1 == .locked)
        #expect(policy.afterSuccess(state) == LockoutState())
    }

    @Test("the same password twice is charged once")
    func repeatsAreNotCharged() {
        let policy = LockoutPolicy.default
        let (state, first) = policy.admit(LockoutState(), fingerprint: "same", now: Date())
        let (again, second) = policy.admit(state, fingerprint: "same", now: Date())
        #expect(first == .charged)
        #expect(second == .repeated)
        #expect(again == state)
    }
}

@Suite("Smart lockout falls on the failing source")
struct LockoutSourceTests {
    @Test("ten failures lock their source only; the account-wide counter stops at ten times the threshold")
    func perSource() {
        let policy = LockoutPolicy.default
        let now = Date()
        var attacker = LockoutState()
        var global = LockoutState()
        for guess in 0..<10 {
            let next = policy.admit(attacker, global: global, fingerprint: "guess-\(guess)", now: now)
            #expect(next.2 == .charged)
            (attacker, global) = (next.0, next.1)
        }
        #expect(policy.admit(attacker, global: global, fingerprint: "guess-10", now: now).2 == .locked)
        #expect(policy.admit(LockoutState(), global: global, fingerprint: "right", now: now).2 == .charged, "another source still gets in")
        // Spread over many sources, the account locks for everyone at 100.
        for guess in 10..<100 {
            let next = policy.admit(LockoutState(), global: global, fingerprint: "guess-\(guess)", now: now)
            global = next.1
        }
        #expect(global.isLocked(at: now))
        #expect(policy.admit(LockoutState(), global: global, fingerprint: "right", now: now).2 == .locked)
    }
}
