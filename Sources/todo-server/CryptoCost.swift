import ArgumentParser
import Foundation
import IdentityDirectory
import IdentityServer

/// Measures this machine's crypto: how long one bcrypt hash takes (to choose
/// `--password-hash-cost`; OWASP suggests the highest cost that keeps sign-in responsive) and how
/// many RS256 signatures per second one core makes (every token is one). The benchmarks use both
/// as baselines.
struct CryptoCost: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crypto-cost", abstract: "Measure bcrypt hashing time and RS256 signing rate on this machine.")

    @Option(help: "bcrypt cost (4–31).") var cost: UInt8 = 10
    @Option(help: "Hashes to time.") var count: Int = 10

    func run() async throws {
        guard (4...31).contains(cost), count > 0 else { throw ValidationError("--cost must be 4–31 and --count positive") }
        let hasher = PasswordHasher(cost: cost, threads: 1)
        _ = try await hasher.hash("warm-up")
        let clock = ContinuousClock()
        let elapsed = try await clock.measure {
            for index in 0..<count { _ = try await hasher.hash("Bench-\(index)") }
        }
        try await hasher.shutdown()
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        print(String(format: "%.1f ms per hash (bcrypt cost %d, %d hashes, one thread)", milliseconds / Double(count), cost, count))

        let (rate, library) = try IdentityServer.measureSigningRate()
        print(String(format: "%.0f", rate) + " RS256 signatures per second with \(library) (RSA-2048, one thread)")
    }
}
