import Foundation

extension PolicyFixtures {
    /// This project's local-accounts custom policies (`Tests/interop/policies/local`, shared
    /// with the interop tests): a base with the sign-up-or-sign-in and password-reset journeys,
    /// and their two relying parties, for `tenant`.
    static func localAccounts(tenant: String = tenant) throws -> [Data] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("interop/policies/local")
        return try ["B2C_1A_LocalBase", "B2C_1A_test_susi", "B2C_1A_test_reset"].map { name in
            let text = try String(contentsOf: folder.appendingPathComponent("\(name).xml"), encoding: .utf8)
            return Data(text.replacingOccurrences(of: "TENANT", with: tenant).utf8)
        }
    }
}
