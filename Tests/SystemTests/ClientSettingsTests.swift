import Foundation
import Testing
import TodoModels

@Suite("settings.json and settings.plist")
struct ClientSettingsTests {
    func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("settings-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("what the server writes, JSON and plist alike, reads back unchanged under the tutorials' keys")
    func roundTrip() throws {
        let folder = try directory()
        var written = ClientSettings(authority: "http://127.0.0.1:5080/t.onmicrosoft.com/", clientID: "c1")
        written.taskAPI = "http://127.0.0.1:3000"
        written.signUpPolicy = "B2C_1_sign_up"
        written.caCertificate = "/tmp/ca.pem"
        written.graphBaseURL = "http://127.0.0.1:5080"
        let json = try written.write(to: folder)

        #expect(try ClientSettings.read(from: json) == written)
        #expect(try ClientSettings.read(from: folder.appendingPathComponent("settings.plist")) == written)
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any])
        #expect(keys["clientId"] as? String == "c1")
        #expect(keys["emailSignUpPolicyId"] as? String == "B2C_1_sign_up")
        #expect(keys["redirectUri"] as? String == "http://127.0.0.1")
        #expect(keys["graphBaseURL"] as? String == "http://127.0.0.1:5080")
        #expect(keys["taskWebAPI"] == nil, "unset settings are left out, not written as null")
    }

    @Test("a tutorial's file: empty strings count as absent, taskWebAPI gives the API origin, scopes default to the client id")
    func tutorialFile() throws {
        let folder = try directory()
        let file = folder.appendingPathComponent("settings.json")
        try Data(
            #"{"authority":"https://a/t/","clientId":"c2","taskWebAPI":"https://api/tasks","scopes":[],"emailSignInPolicyId":""}"#.utf8
        )
        .write(to: file)
        let settings = try ClientSettings.read(from: file)
        #expect(settings.scopes == ["c2"])
        #expect(settings.signInPolicy == nil)
        #expect(settings.taskAPIOrigin == "https://api")
    }

    @Test("a file without clientId, or not settings at all, is refused naming the problem")
    func refusals() throws {
        let folder = try directory()
        let noClient = folder.appendingPathComponent("a.json")
        try Data(#"{"authority":"https://a/t/"}"#.utf8).write(to: noClient)
        #expect(throws: ClientSettings.ReadError.self) { try ClientSettings.read(from: noClient) }
        do {
            _ = try ClientSettings.read(from: noClient)
        } catch {
            #expect("\(error)".contains("'clientId'"))
        }
        let junk = folder.appendingPathComponent("b.json")
        try Data("not settings".utf8).write(to: junk)
        #expect(throws: ClientSettings.ReadError.self) { try ClientSettings.read(from: junk) }
        #expect(throws: ClientSettings.ReadError.self) { try ClientSettings.read(from: folder.appendingPathComponent("missing.json")) }
    }
}
