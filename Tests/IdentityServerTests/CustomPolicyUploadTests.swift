import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer
@testable import UserJourneys
@testable import TrustFramework

/// Uploading custom policies through Graph beta's `trustFramework/policies` and the
/// administration facade (SPEC §2.12): checked whole, stored whole or not at all.
@Suite("Custom policies: upload, read back, list and delete")
struct CustomPolicyUploadTests {
    static func xml(_ headers: HTTPFields, type: String = "application/xml") -> HTTPFields {
        var headers = headers
        headers[.contentType] = type
        return headers
    }

    static func graphError(_ response: TestResponse) -> (code: String?, message: String) {
        let error = response.json["error"] as? [String: Any]
        return (error?["code"] as? String, error?["message"] as? String ?? "")
    }

    @Test("PUT $value creates (201) then updates (200) and answers the XML; GET $value gives back the bytes; list, get and delete", arguments: TestDatabase.engines)
    func graphRoundTrip(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["Policy.ReadWrite.TrustFramework"])
            for (text, id) in [(PolicyFixtures.base(), "B2C_1A_TestBase"), (PolicyFixtures.extensions(), "B2C_1A_TestExtensions")] {
                let put = try await driver.request(
                    .put, "/beta/trustFramework/policies/\(id)/$value", headers: Self.xml(auth, type: "application/octet-stream"), body: text)
                #expect(put.status == .created, "\(put.text)")
                #expect(put.headers[.contentType] == "application/xml")
                #expect(put.text == text)
            }
            let again = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: Self.xml(auth), body: PolicyFixtures.base())
            #expect(again.status == .ok, "\(again.text)")
            let created = try await driver.request(.post, "/beta/trustFramework/policies", headers: Self.xml(auth), body: PolicyFixtures.relyingParty())
            #expect(created.status == .created, "\(created.text)")

            let value = try await driver.get("/beta/trustFramework/policies/b2c_1a_testextensions/$value", headers: auth)
            #expect(value.status == .ok && value.text == PolicyFixtures.extensions(), "ids match in any case; the XML is as sent")
            let list = try await driver.get("/beta/trustFramework/policies", headers: auth)
            let ids = (list.json["value"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(ids == ["B2C_1A_test_signup", "B2C_1A_TestBase", "B2C_1A_TestExtensions"], "\(list.text)")
            let entity = try await driver.get("/beta/trustFramework/policies/B2C_1A_TestBase", headers: auth)
            #expect(entity.json["id"] as? String == "B2C_1A_TestBase")

            // A base others build on is not deleted; the leaf is, and then it is gone.
            let refused = try await driver.request(.delete, "/beta/trustFramework/policies/B2C_1A_TestExtensions", headers: auth)
            #expect(refused.status == .badRequest && Self.graphError(refused).message.contains("B2C_1A_test_signup"), "\(refused.text)")
            let deleted = try await driver.request(.delete, "/beta/trustFramework/policies/B2C_1A_test_signup", headers: auth)
            #expect(deleted.status == .noContent)
            let gone = try await driver.get("/beta/trustFramework/policies/B2C_1A_test_signup/$value", headers: auth)
            #expect(gone.status == .notFound && Self.graphError(gone).code == "Request_ResourceNotFound")
            let twice = try await driver.request(.delete, "/beta/trustFramework/policies/B2C_1A_test_signup", headers: auth)
            #expect(twice.status == .notFound)
        }
    }

    @Test("a refused upload answers 400 AADB2C naming every problem and stores nothing; the URL's id must be the policy's")
    func refusals() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["Policy.ReadWrite.TrustFramework"])
            // A relying party whose base is not there yet.
            let orphan = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_test_signup/$value", headers: Self.xml(auth), body: PolicyFixtures.relyingParty())
            #expect(orphan.status == .badRequest)
            let (code, message) = Self.graphError(orphan)
            #expect(code == "AADB2C")
            #expect(message.hasPrefix("Validation failed: 1 validation error(s) found in policy \"B2C_1A_TEST_SIGNUP\" of tenant \"\(h.tenant.name)\"."))
            #expect(message.contains("'B2C_1A_TestExtensions'") && message.contains("was not found"), "\(message)")

            // A JWT issuer naming a key set the tenant does not have, then one with no key in it.
            for step in ["missing", "empty"] {
                if step == "empty" { _ = try await h.server.administration.createPolicyKeySet(tenantID: h.tenant.id, id: PolicyFixtures.signingKeySet) }
                let keyless = try await driver.request(
                    .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: Self.xml(auth), body: PolicyFixtures.base())
                #expect(keyless.status == .badRequest, "\(step): \(keyless.text)")
                #expect(
                    Self.graphError(keyless).message.contains(
                        "TechnicalProfile 'TokenIssuer' names the policy key set 'B2C_1A_TokenSigningKeyContainer' (key 'issuer_secret')"),
                    "\(step): \(keyless.text)")
            }
            _ = try await h.server.administration.generatePolicyKey(tenantID: h.tenant.id, keySet: PolicyFixtures.signingKeySet, use: "sig")

            let dangling = PolicyFixtures.base().replacingOccurrences(of: "ReferenceId=\"MakeGreeting\"", with: "ReferenceId=\"MakeNothing\"")
            let broken = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: Self.xml(auth), body: dangling)
            #expect(broken.status == .badRequest && Self.graphError(broken).message.contains("'MakeNothing'"), "\(broken.text)")
            let mismatch = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_Other/$value", headers: Self.xml(auth), body: PolicyFixtures.base())
            #expect(mismatch.status == .badRequest && Self.graphError(mismatch).message.contains("differs from the id in the request"))
            let bomb = "<?xml version=\"1.0\"?><!DOCTYPE a [<!ENTITY a \"aaaa\">]><TrustFrameworkPolicy xmlns=\"\(PolicyXML.namespace)\">&a;</TrustFrameworkPolicy>"
            let refusedBomb = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: Self.xml(auth), body: bomb)
            #expect(refusedBomb.status == .badRequest && Self.graphError(refusedBomb).message.contains("document type declaration"))
            let json = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: GraphUsersTests.json("", auth), body: "{}")
            #expect(json.status == .unsupportedMediaType)
            let huge = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: Self.xml(auth),
                body: String(repeating: " ", count: PolicyXML.maximumBytes + 1))
            #expect(huge.status == .contentTooLarge)
            #expect(try await h.server.administration.customPolicies(tenantID: h.tenant.id).isEmpty, "nothing was stored")
        }
    }

    @Test("Graph's roles: only Policy.ReadWrite.TrustFramework reads or writes policies, as in Graph")
    func permissions() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            try await h.server.administration.uploadCustomPolicies([Data(PolicyFixtures.base().utf8)], tenant: h.tenant)
            let writer = try await GraphUsersTests.appToken(h, driver, roles: ["Policy.ReadWrite.TrustFramework"])
            #expect(try await driver.get("/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: writer).status == .ok)
            for roles in [["TrustFrameworkKeySet.ReadWrite.All"], ["User.ReadWrite.All"]] {
                let other = try await GraphUsersTests.appToken(h, driver, roles: roles)
                let read = try await driver.get("/beta/trustFramework/policies", headers: other)
                #expect(read.status == .forbidden && Self.graphError(read).code == "Authorization_RequestDenied", "\(roles)")
                let write = try await driver.request(
                    .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: Self.xml(other), body: PolicyFixtures.base())
                #expect(write.status == .forbidden, "\(roles)")
                #expect(try await driver.request(.delete, "/beta/trustFramework/policies/B2C_1A_TestBase", headers: other).status == .forbidden)
            }
            #expect(try await driver.get("/beta/trustFramework/policies").status == .unauthorized)
            let typed = try await driver.request(
                .put, "/beta/trustFramework/policies/B2C_1A_TestBase/$value", headers: Self.xml(writer, type: "application/xml-bogus"),
                body: PolicyFixtures.base())
            #expect(typed.status == .unsupportedMediaType, "the media type is matched whole")
        }
    }

    @Test("a set uploads in any order, all or nothing; a base change that would break a policy built on it is refused", arguments: TestDatabase.engines)
    func batchesAndDependents(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, _ in
            let administration = h.server.administration
            try await PolicyFixtures.makeKeys(administration, tenantID: h.tenant.id)
            let results = try await administration.uploadCustomPolicies(PolicyFixtures.set.map { Data($0.utf8) }, tenant: h.tenant)
            #expect(results.map(\.0.id) == ["B2C_1A_test_signup", "B2C_1A_TestExtensions", "B2C_1A_TestBase"])
            #expect(results.filter { !$0.created }.isEmpty)

            // The base without the claim type the extension's profile outputs: the extension and
            // the relying party built on it would break, so the base is not changed.
            let narrower = PolicyFixtures.base().replacingOccurrences(
                of: #"<ClaimType Id="displayName"><DisplayName>Display name</DisplayName><DataType>string</DataType></ClaimType>"#, with: "")
                .replacingOccurrences(of: #"<InputClaims><InputClaim ClaimTypeReferenceId="displayName" TransformationClaimType="inputClaim" /></InputClaims>"#, with: "")
            do {
                try await administration.uploadCustomPolicies([Data(narrower.utf8)], tenant: h.tenant)
                Issue.record("a base change that breaks its dependents was stored")
            } catch let rejection as PolicyRejection {
                #expect(rejection.problems.contains { $0.contains("Policy 'B2C_1A_TestExtensions', built on it") && $0.contains("'DisplayName'") }, "\(rejection.problems)")
            }
            #expect(try await administration.customPolicy(tenantID: h.tenant.id, id: "B2C_1A_TestBase")?.body == PolicyFixtures.base())

            // One bad file in a set: none of the set is stored.
            let fresh = [PolicyFixtures.relyingParty(id: "B2C_1A_second"), PolicyFixtures.relyingParty(id: "B2C_1A_third", journey: "Nowhere")]
            await #expect(throws: PolicyRejection.self) {
                try await administration.uploadCustomPolicies(fresh.map { Data($0.utf8) }, tenant: h.tenant)
            }
            #expect(try await administration.customPolicies(tenantID: h.tenant.id).count == 3)
            let compiled = try await h.server.service.customPolicies.program(tenantID: h.tenant.id, id: "b2c_1a_TEST_signup")
            #expect(compiled?.relyingParty?.defaultJourney == "SignUp")
        }
    }

    @Test("concurrent uploads of a base change and a policy built on the old base: never a stored policy that fails its checks", arguments: TestDatabase.engines)
    func concurrentUploads(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, _ in
            let administration = h.server.administration
            try await PolicyFixtures.makeKeys(administration, tenantID: h.tenant.id)
            try await administration.uploadCustomPolicies([Data(PolicyFixtures.base().utf8)], tenant: h.tenant)
            let narrower = PolicyFixtures.base().replacingOccurrences(of: #"<ClaimType Id="displayName"><DisplayName>Display name</DisplayName><DataType>string</DataType></ClaimType>"#, with: "")
                .replacingOccurrences(of: #"<InputClaims><InputClaim ClaimTypeReferenceId="displayName" TransformationClaimType="inputClaim" /></InputClaims>"#, with: "")
            let tenant = h.tenant
            for _ in 0..<10 {
                _ = try? await administration.deleteCustomPolicy(tenant: tenant, id: "B2C_1A_TestExtensions")
                try await administration.uploadCustomPolicies([Data(PolicyFixtures.base().utf8)], tenant: tenant)
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { _ = try? await administration.uploadCustomPolicies([Data(narrower.utf8)], tenant: tenant) }
                    group.addTask { _ = try? await administration.uploadCustomPolicies([Data(PolicyFixtures.extensions().utf8)], tenant: tenant) }
                }
                let stored = try await administration.customPolicies(tenantID: tenant.id)
                var parsed: [String: PolicyElement] = [:]
                for policy in stored { parsed[policy.id.lowercased()] = try PolicyXML.parse(Data(policy.body.utf8)) }
                for key in parsed.keys {
                    let problems = PolicyCheck.effective(PolicyMerge.effective(try CustomPolicyLibrary.chain(of: key, in: parsed)))
                    #expect(problems.isEmpty, "\(key): \(problems)")
                }
                // One of the two changes wins: the narrower base alone, or the extension on the old base.
                let base = stored.first { $0.id == "B2C_1A_TestBase" }?.body
                #expect((stored.count == 1 && base == narrower) || (stored.count == 2 && base == PolicyFixtures.base()), "\(stored.map(\.id))")
            }
        }
    }

    @Test("a declaration's policies directory: uploaded with the tenant, unchanged on a second apply, a broken one refused before any write")
    func declaredPolicies() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("declared-policies-\(UUID().uuidString)")
        let policies = directory.appendingPathComponent("policies")
        try FileManager.default.createDirectory(at: policies, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let tenant = "declared.onmicrosoft.com"
        @Sendable func write(_ text: String, _ name: String) throws {
            try text.replacingOccurrences(of: PolicyFixtures.tenant, with: tenant).write(
                to: policies.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        try write(PolicyFixtures.base(), "base.xml")
        try write(PolicyFixtures.extensions(), "extensions.xml")
        try write(PolicyFixtures.relyingParty(), "signup.xml")
        let file = directory.appendingPathComponent("tenant.yaml")
        try """
        tenant: { name: \(tenant), defaultPolicy: B2C_1_susi }
        userFlows:
          - { name: B2C_1_susi, type: signUpOrSignIn }
        policyKeys:
          - { id: TokenSigningKeyContainer, generate: sig }
          - { id: B2C_1A_SomeSecret, secret: "not-a-real-secret" }
        policies: ./policies
        """.write(to: file, atomically: true, encoding: .utf8)
        try await IdentityHarness.run(.sqlite) { h, _ in
            let applied = try await TenantDeclaration.load(path: file.path).applyReporting(to: h.server.administration, baseDirectory: directory)
            #expect(applied.changes.filter { $0.hasPrefix("custom policy") }.count == 3, "\(applied.changes)")
            #expect(applied.changes.filter { $0.hasPrefix("policy key set") }.count == 2, "\(applied.changes)")
            let keySets = try await h.server.administration.policyKeySets(tenantID: applied.tenant.id)
            #expect(keySets.map(\.id) == ["B2C_1A_SomeSecret", "B2C_1A_TokenSigningKeyContainer"])
            #expect(keySets.map { $0.keys.map(\.kty) } == [["oct"], ["RSA"]])
            #expect(try await h.server.administration.customPolicies(tenantID: applied.tenant.id).count == 3)
            let again = try await TenantDeclaration.load(path: file.path).applyReporting(to: h.server.administration, baseDirectory: directory)
            #expect(again.changes.isEmpty, "\(again.changes)")
            // One audit record for the apply that changed something, none for the one that did not.
            var everything = DirectoryAuditQuery()
            everything.activityDisplayName = AuditActivity.applyDeclaration.displayName
            let applies = try await h.server.service.directoryAudits.audits(tenantID: applied.tenant.id, everything)
            #expect(applies.count == 1, "\(applies)")
            let kinds = applies.first?.target?.modifiedProperties ?? []
            let counted = kinds.map { ($0.newValue ?? "").split(separator: " ").compactMap { Int($0) }.reduce(0, +) }.reduce(0, +)
            #expect(counted == applied.changes.count, "\(kinds)")
            #expect(kinds.first { $0.name == "custom policy" }?.newValue == "3 added, 0 updated", "\(kinds)")

            // A broken relying party and a new flow: refused whole, the flow is not written either.
            try write(PolicyFixtures.relyingParty(journey: "Nowhere"), "signup.xml")
            try """
            tenant: { name: \(tenant), defaultPolicy: B2C_1_susi }
            userFlows:
              - { name: B2C_1_susi, type: signUpOrSignIn }
              - { name: B2C_1_other, type: signUpOrSignIn }
            policyKeys:
              - { id: TokenSigningKeyContainer, generate: sig }
            policies: ./policies
            """.write(to: file, atomically: true, encoding: .utf8)
            do {
                _ = try await TenantDeclaration.load(path: file.path).applyReporting(to: h.server.administration, baseDirectory: directory)
                Issue.record("a broken policy was applied")
            } catch let error as TenantDeclaration.DeclarationError {
                #expect("\(error)".contains("'Nowhere'"), "\(error)")
            }
            #expect(try await h.server.tenants.userFlow(tenantID: applied.tenant.id, name: "B2C_1_other") == nil)
            #expect(try await h.server.administration.customPolicy(tenantID: applied.tenant.id, id: "B2C_1A_test_signup")?.body.contains("SignUp") == true)

            // A tenant whose policies name a key set it does not declare is refused before it is
            // written; a key set declared wrong is refused when the file is read.
            let keyless = directory.appendingPathComponent("keyless")
            try FileManager.default.createDirectory(at: keyless.appendingPathComponent("policies"), withIntermediateDirectories: true)
            try PolicyFixtures.base().replacingOccurrences(of: PolicyFixtures.tenant, with: "keyless.onmicrosoft.com").write(
                to: keyless.appendingPathComponent("policies/base.xml"), atomically: true, encoding: .utf8)
            let keylessFile = keyless.appendingPathComponent("tenant.yaml")
            for (keys, expected) in [
                ("", "names the policy key set 'B2C_1A_TokenSigningKeyContainer'"),
                ("policyKeys:\n  - { id: TokenSigningKeyContainer, generate: RSA }\n", "policyKeys TokenSigningKeyContainer: generate must be sig or enc"),
                ("policyKeys:\n  - { id: Both, generate: sig, secret: x }\n", "policyKeys Both: give one of generate or secret"),
            ] {
                try "tenant: { name: keyless.onmicrosoft.com }\nuserFlows: []\n\(keys)policies: ./policies\n".write(
                    to: keylessFile, atomically: true, encoding: .utf8)
                do {
                    _ = try await TenantDeclaration.load(path: keylessFile.path).applyReporting(to: h.server.administration, baseDirectory: keyless)
                    Issue.record("applied: \(keys)")
                } catch {
                    #expect("\(error)".contains(expected), "\(error)")
                }
                #expect(try await h.server.tenants.tenant(matching: "keyless.onmicrosoft.com") == nil)
            }
        }
    }
}
