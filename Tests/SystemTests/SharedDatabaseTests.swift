import Configuration
import Foundation
import Storage
import TestSupport
import Testing
import TodoB2CTesting
import TodoSystem

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Instances with their own data dirs on one database (issue 14): everything an instance needs
/// to serve is in the database, and a restart with nothing changed writes no files.
@Suite("Instances sharing one database")
struct SharedDatabaseTests {
    /// Starts the whole system on `dataDir` and `databaseURL` with the shared data key, runs `body`
    /// while it serves, and stops it.
    static func serve(
        dataDir: URL, databaseURL: String, dataKey: DataKey, ports: (identity: Int, api: Int), extra: [String: String] = [:],
        _ body: @Sendable (TodoSystem) async throws -> Void = { _ in }
    ) async throws {
        func text(_ value: String) -> ConfigValue { ConfigValue(.string(value), isSecret: false) }
        var flags: [String: ConfigValue] = [
            Setting.dataDir.key: text(dataDir.path), Setting.databaseURL.key: text(databaseURL),
            Setting.identityPort.key: text("\(ports.identity)"), Setting.apiPort.key: text("\(ports.api)"),
            Setting.passwordHashCost.key: text("4"),
        ]
        for (key, value) in extra { flags[key] = text(value) }
        let configuration = try SystemConfiguration(
            reader: try await SystemConfiguration.reader(flags: flags, environment: ["TODO_DATA_KEY": dataKey.exported]))
        try await LiveSystem.serving(configuration, body)
    }

    /// The web app's home page status, and where its sign-in sends the browser.
    static func webApp(_ system: TodoSystem) async throws -> (home: Int, signIn: String?) {
        let (_, home) = try await URLSession.shared.data(from: URL(string: system.apiBaseURL + "/")!)
        let noRedirects = NoRedirects()
        let session = URLSession(configuration: .ephemeral, delegate: noRedirects, delegateQueue: nil)
        let (_, signIn) = try await session.data(from: URL(string: system.apiBaseURL + "/auth/signin")!)
        return ((home as! HTTPURLResponse).statusCode, (signIn as! HTTPURLResponse).value(forHTTPHeaderField: "Location"))
    }

    @Test(
        "a second instance with its own data dir serves the web app from the shared database; a restart with nothing changed writes no settings files"
    )
    func secondDataDir() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("todob2c-shared-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let (first, second) = (root.appendingPathComponent("a"), root.appendingPathComponent("b"))
        let databaseURL = "sqlite:\(root.appendingPathComponent("shared.sqlite").path)"
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let dataKey = DataKey.generate()
        let ports = (identity: try LoopbackPorts.reserve(), api: try LoopbackPorts.reserve())

        try await Self.serve(dataDir: first, databaseURL: databaseURL, dataKey: dataKey, ports: ports) { system in
            let web = try await Self.webApp(system)
            #expect(web.home == 200)
        }
        #expect(!FileManager.default.fileExists(atPath: first.appendingPathComponent("webapp-client-secret").path))
        let other = (identity: try LoopbackPorts.reserve(), api: try LoopbackPorts.reserve())
        try await Self.serve(dataDir: second, databaseURL: databaseURL, dataKey: dataKey, ports: other) { system in
            let web = try await Self.webApp(system)
            #expect(web.home == 200, "no web app: its secret was not found")
            #expect(web.signIn?.contains("/oauth2/v2.0/authorize") == true)
        }

        // Nothing changed: settings.json and the plists keep their bytes and their dates.
        let files = ["settings.json", "settings.plist", "settings-nxoauth2.plist"].map { first.appendingPathComponent($0).path }
        let past = Date(timeIntervalSince1970: 1_000_000_000)
        for file in files { try FileManager.default.setAttributes([.modificationDate: past], ofItemAtPath: file) }
        let before = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        try await Self.serve(dataDir: first, databaseURL: databaseURL, dataKey: dataKey, ports: ports)
        for (file, bytes) in zip(files, before) {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            #expect(attributes[.modificationDate] as? Date == past, "\(file) was rewritten")
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == bytes)
        }
    }
}

extension SharedDatabaseTests {
    @Test("the dev outbox (reset codes) is off behind a balancer: a trusted proxy or a non-loopback public URL, unless asked for")
    func outboxBehindBalancer() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("todob2c-outbox-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let databaseURL = "sqlite:\(root.appendingPathComponent("outbox.sqlite").path)"
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let dataKey = DataKey.generate()
        let cases: [([String: String], Int)] = [
            ([:], 200),
            ([Setting.trustedProxies.key: "10.0.0.5"], 404),
            ([Setting.publicAPIURL.key: "https://todo.example.com"], 404),
            ([Setting.trustedProxies.key: "10.0.0.5", Setting.devEndpoints.key: "true"], 200),
        ]
        for (index, (extra, expected)) in cases.enumerated() {
            let ports = (identity: try LoopbackPorts.reserve(), api: try LoopbackPorts.reserve())
            try await Self.serve(
                dataDir: root.appendingPathComponent("d\(index)"), databaseURL: databaseURL, dataKey: dataKey, ports: ports, extra: extra
            ) { system in
                let (_, response) = try await URLSession.shared.data(from: URL(string: system.identityBaseURL + "/dev/outbox?format=json")!)
                #expect((response as? HTTPURLResponse)?.statusCode == expected, "\(extra)")
            }
        }
    }
}

/// Keeps a redirect's `Location` for the test to read.
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) { completionHandler(nil) }
}
