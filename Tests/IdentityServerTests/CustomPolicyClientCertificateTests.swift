import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Storage
import TestSupport
import Testing

@testable import IdentityDirectory
@testable import IdentityServer
@testable import UserJourneys

/// A custom policy's REST profile presenting a client certificate (SPEC §2.12;
/// `AuthenticationType` `ClientCertificate`): the certificate uploaded as a PKCS#12 file to a
/// policy key set (Graph beta `uploadPkcs12`), and the upload checks. The certificates are made
/// by `openssl`.
@Suite("Custom policies: REST profiles with a client certificate")
struct CustomPolicyClientCertificateTests {
    struct Material {
        var directory: URL
        var ca: String { directory.appendingPathComponent("ca.pem").path }
        var pkcs12: String
    }

    /// A CA, a server certificate for 127.0.0.1 and a client certificate it issued, the client's as PKCS#12.
    static func material() async throws -> Material {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("client-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // posix_spawn and waitpid: Foundation's Process never reports these children's exit in
        // this test process on Linux (its wait hangs), so the children are waited for directly.
        func openssl(_ arguments: String) async throws {
            let argv = ["/usr/bin/openssl"] + arguments.split(separator: " ").map { part in
                part.hasSuffix(".pem") || part.hasSuffix(".key") || part.hasSuffix(".csr") || part.hasSuffix(".p12") || part.hasSuffix(".ext")
                    || part.hasSuffix(".srl") ? directory.appendingPathComponent(String(part)).path : String(part)
            }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            var pid = pid_t()
            let cArguments = argv.map { strdup($0) } + [nil]
            defer { cArguments.forEach { free($0) } }
            guard posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ) == 0 else { throw CocoaError(.executableNotLoadable) }
            var status: Int32 = 0
            while waitpid(pid, &status, WNOHANG) == 0 { try await Task.sleep(for: .milliseconds(20)) }
            guard status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: ["openssl": arguments]) }
        }
        try "subjectAltName=IP:127.0.0.1\n".write(to: directory.appendingPathComponent("san.ext"), atomically: true, encoding: .utf8)
        try await openssl("req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=Test-CA")
        try await openssl("req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1")
        try await openssl("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAserial ca.srl -CAcreateserial -out server.pem -days 2 -extfile san.ext")
        try await openssl("req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=b2c-client")
        try await openssl("x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAserial ca.srl -CAcreateserial -out client.pem -days 2")
        try await openssl("pkcs12 -export -inkey client.key -in client.pem -out client.p12 -passout pass:p12-secret")
        let file = try Data(contentsOf: directory.appendingPathComponent("client.p12"))
        return Material(directory: directory, pkcs12: file.base64EncodedString())
    }

    @Test("uploadPkcs12: the certificate's public parts and validity shown, never the password; a wrong password refused; a certificate key neither signs tokens nor is a secret")
    func uploadPkcs12() async throws {
        let material = try await Self.material()
        defer { try? FileManager.default.removeItem(at: material.directory) }
        try await IdentityHarness.run(.sqlite) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["TrustFrameworkKeySet.ReadWrite.All"])
            let created = try await driver.request(
                .post, "/beta/trustFramework/keySets", headers: PolicyKeySetTests.json(auth), body: #"{"id":"RestClientCertificate"}"#)
            #expect(created.status == .created)
            let path = "/beta/trustFramework/keySets/B2C_1A_RestClientCertificate/uploadPkcs12"
            let wrong = try await driver.request(
                .post, path, headers: PolicyKeySetTests.json(auth), body: #"{"key":"\#(material.pkcs12)","password":"not-it"}"#)
            #expect(wrong.status == .badRequest && wrong.text.contains("could not be opened"), "\(wrong.text)")
            let garbage = try await driver.request(.post, path, headers: PolicyKeySetTests.json(auth), body: #"{"key":"bm90IGEgZmlsZQ==","password":""}"#)
            #expect(garbage.status == .badRequest)
            let uploaded = try await driver.request(
                .post, path, headers: PolicyKeySetTests.json(auth), body: #"{"key":"\#(material.pkcs12)","password":"p12-secret"}"#)
            #expect(uploaded.status == .ok, "\(uploaded.text)")
            #expect(uploaded.json["kty"] as? String == "RSA" && (uploaded.json["x5c"] as? [String])?.count == 1 && uploaded.json["x5t"] != nil)
            #expect(!uploaded.text.contains("p12-secret") && uploaded.json["exp"] != nil && uploaded.json["nbf"] != nil)
            let library = h.server.service.policyKeySets
            let identity = try #require(try await library.clientIdentity(tenantID: h.tenant.id, keySet: "B2C_1A_RestClientCertificate"))
            #expect(identity.kid == uploaded.json["kid"] as? String && identity.certificateChain.count == 1)
            #expect(try await library.activeSecret(tenantID: h.tenant.id, keySet: "B2C_1A_RestClientCertificate") == nil, "not a secret to send")
            await #expect(throws: PolicyKeySetError.self) {
                try await library.signingKey(tenantID: h.tenant.id, keySet: "B2C_1A_RestClientCertificate")
            }
        }
    }

    @Test("a ClientCertificate key must name a set holding a certificate, and the ServiceUrl must be https")
    func uploadChecks() async throws {
        try await IdentityHarness.run(.sqlite) { h, _ in
            try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id, secrets: ["B2C_1A_NotACertificate": "secret"])
            for (scheme, set, expected) in [
                ("https", "B2C_1A_NotACertificate", "holds no certificate (uploadPkcs12)"),
                ("http", "B2C_1A_NotACertificate", "presents a client certificate, which needs a ServiceUrl that is https"),
            ] {
                do {
                    try await CustomPolicyRestTests.upload(
                        h, port: 1, kind: "ok", scheme: scheme, authentication: "ClientCertificate",
                        key: #"<Key Id="ClientCertificate" StorageReferenceId="\#(set)" />"#)
                    Issue.record("uploaded: \(expected)")
                } catch let rejection as PolicyRejection {
                    #expect(rejection.problems.contains { $0.contains(expected) }, "\(rejection.problems)")
                }
            }
        }
    }
}

extension CustomPolicyClientCertificateTests {
    @Test("the REST call presents the key set's certificate to a service that requires one, and its answer reaches the token")
    func presentsCertificate() async throws {
        let material = try await Self.material()
        defer { try? FileManager.default.removeItem(at: material.directory) }
        let file = { (name: String) in material.directory.appendingPathComponent(name).path }
        let endpoint = try await MutualTLSEndpoint.start(
            certificate: file("server.pem"), key: file("server.key"), clientCA: material.ca, answer: #"{"loyaltyNumber":"L-TLS"}"#)
        defer { Task { try? await endpoint.close() } }
        var configuration = IdentityServerConfiguration(passwordHashCost: 4)
        configuration.outboundCACertificatePath = material.ca  // what --authority-ca or --tls gives the server
        try await IdentityHarness.run(.sqlite, configuration: configuration) { h, driver in
            _ = try await h.server.service.policyKeySets.create(tenantID: h.tenant.id, id: "RestClientCertificate")
            _ = try await h.server.service.policyKeySets.uploadPkcs12(
                tenantID: h.tenant.id, keySet: "B2C_1A_RestClientCertificate", pkcs12: material.pkcs12, password: "p12-secret")
            try await CustomPolicyRestTests.upload(
                h, port: endpoint.port, kind: "ok", scheme: "https", authentication: "ClientCertificate",
                key: #"<Key Id="ClientCertificate" StorageReferenceId="B2C_1A_RestClientCertificate" />"#)
            let (done, attempt) = try await CustomPolicyRestTests.signUp(h, driver, email: "tls@example.com")
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text.prefix(400))")
            let claims = DecodedJWT(try #require(try await driver.redeem(h, attempt: attempt, code: code).json["id_token"] as? String)).claims
            #expect(claims["loyaltyNumber"] as? String == "L-TLS")
            #expect(endpoint.subjects.count == 1 && endpoint.subjects[0].contains("b2c-client"), "\(endpoint.subjects)")
        }
        // The endpoint does require it: the same call without a certificate fails its handshake.
        try await IdentityHarness.run(.sqlite, configuration: configuration) { h, driver in
            try await CustomPolicyRestTests.upload(h, port: endpoint.port, kind: "ok", scheme: "https", authentication: "None", key: "")
            let (failed, _) = try await CustomPolicyRestTests.signUp(h, driver, email: "plain@example.com")
            #expect(failed.redirectParameters["error_description"]?.hasPrefix("AADB2C90075") == true, "\(failed.redirectParameters)")
            #expect(endpoint.subjects.count == 1, "no request got through without a certificate")
        }
    }
}
