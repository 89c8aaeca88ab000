import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing
import WireCoding

@testable import IdentityServer
@testable import UserJourneys

/// Who may be an app-only Microsoft Graph caller (issue 44, H-2): only an app the client-credentials
/// grant signed for, holding the role in the directory. A custom policy (the tenant's code, which
/// `Policy.ReadWrite.TrustFramework` uploads) writes the tokens of the tenant's own apps, never
/// Graph's.
@Suite("Microsoft Graph's trust boundary")
struct GraphTrustBoundaryTests {
    static let policy = "B2C_1A_test_susi"

    /// The starter relying party, with output claims that would make a user's token an app's.
    static func forgingPolicies() throws -> [Data] {
        try PolicyFixtures.localAccounts().map { data in
            var text = String(decoding: data, as: UTF8.self)
            text = text.replacingOccurrences(
                of: #"<ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType>"#,
                with: #"""
                    <ClaimType Id="greeting"><DisplayName>Greeting</DisplayName><DataType>string</DataType></ClaimType>
                    <ClaimType Id="appMarker"><DisplayName>Marker</DisplayName><DataType>string</DataType></ClaimType>
                    <ClaimType Id="roleList"><DisplayName>Roles</DisplayName><DataType>stringCollection</DataType></ClaimType>
                    """#)
            text = text.replacingOccurrences(
                of: #"<OutputClaim ClaimTypeReferenceId="greeting" />"#,
                with: #"""
                    <OutputClaim ClaimTypeReferenceId="greeting" />
                    <OutputClaim ClaimTypeReferenceId="appMarker" PartnerClaimType="idtyp" DefaultValue="app" AlwaysUseDefaultValue="true" />
                    <OutputClaim ClaimTypeReferenceId="roleList" PartnerClaimType="roles" DefaultValue="User.ReadWrite.All" AlwaysUseDefaultValue="true" />
                    <OutputClaim ClaimTypeReferenceId="appMarker" PartnerClaimType="wids" DefaultValue="62e90394-69f5-4237-9190-012177145e10" AlwaysUseDefaultValue="true" />
                    """#)
            return Data(text.utf8)
        }
    }

    @Test("a policy's output claims never reach a Graph token, and idtyp/wids never leave a policy", arguments: TestDatabase.engines)
    func policyClaims(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            try await PolicyFixtures.makeKeys(h.server.administration, tenantID: h.tenant.id)
            try await h.server.administration.uploadCustomPolicies(try Self.forgingPolicies(), tenant: h.tenant)
            _ = try await h.addUser("mallory@example.com", name: "Mallory")
            let attempt = AuthorizationAttempt(harness: h, policy: Self.policy, scope: "openid offline_access User.Read")
            let page = try await driver.start(attempt, harness: h)
            let done = try await driver.submit(page, [("signInName", "mallory@example.com"), ("password", "Passw0rd!")])
            let code = try #require(done.redirectParameters["code"], "\(done.status) \(done.text)")
            let tokens = try await driver.redeem(h, attempt: attempt, code: code)
            let access = try #require(tokens.json["access_token"] as? String, "\(tokens.text)")
            let graph = DecodedJWT(access).claims
            #expect(graph["aud"] as? String == APIPermission.graphResource)
            #expect(graph["idtyp"] == nil && graph["roles"] == nil && graph["wids"] == nil && graph["greeting"] == nil, "\(graph)")
            let id = DecodedJWT(try #require(tokens.json["id_token"] as? String)).claims
            #expect(id["greeting"] as? String == "Hello Mallory", "the policy's own claims still reach the app")
            #expect(id["roles"] as? [String] == ["User.ReadWrite.All"], "roles are the tenant's to send its app, as on B2C")
            #expect(id["idtyp"] == nil && id["wids"] == nil)
            let users = try await driver.get("/v1.0/users", headers: [.authorization: "Bearer \(access)"])
            #expect(users.status == .forbidden, "\(users.text)")
            // The user's own delegated call still works.
            let me = try await driver.get("/v1.0/me", headers: [.authorization: "Bearer \(access)"])
            #expect(me.status == .ok, "\(me.text)")
        }
    }

    /// A token signed by the service's ring from `claims` edited by `edit`.
    static func forged(_ h: IdentityHarness, from token: String, _ edit: (inout [String: Any]) -> Void) async throws -> HTTPFields {
        var claims = DecodedJWT(token).claims
        edit(&claims)
        let signed = try JSONWebToken.sign(claims: Self.json(claims), with: try await h.server.keys.activeKey())
        return [.authorization: "Bearer \(signed)"]
    }

    static func json(_ value: Any) -> JSONText {
        switch value {
        case let text as String: .string(text)
        case let flag as Bool: .bool(flag)
        case let number as Int: .int(Int64(number))
        case let list as [Any]: .array(list.map(json))
        case let object as [String: Any]: .object(object.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })
        default: .null
        }
    }

    @Test("Graph takes an app-only caller only as the directory grants it: no scp, the app as subject, the role held now")
    func appCallerRule() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["User.Read.All"])
            let token = String(try #require(auth[.authorization]).dropFirst(7))
            #expect(try await driver.get("/v1.0/users", headers: auth).status == .ok)
            let user = try await h.addUser("victim@example.com", name: "Victim")
            let cases: [(String, (inout [String: Any]) -> Void)] = [
                ("a user as the subject", { $0["sub"] = user.objectID; $0["oid"] = user.objectID }),
                ("a delegated scp beside the role", { $0["scp"] = "User.Read" }),
                ("a role the directory never granted", { $0["roles"] = ["User.ReadWrite.All"] }),
                ("another app's id", { $0["azp"] = UUID().uuidString.lowercased() }),
            ]
            for (name, edit) in cases {
                let headers = try await Self.forged(h, from: token, edit)
                let write = name.contains("granted") ? "/v1.0/users/\(user.objectID)" : "/v1.0/users"
                let response = name.contains("granted")
                    ? try await driver.request(.delete, write, headers: headers)
                    : try await driver.get(write, headers: headers)
                #expect(response.status == .forbidden, "\(name): \(response.status) \(response.text)")
            }
            #expect(try await h.server.users.user(id: UUID(uuidString: user.objectID)!) != nil, "nobody was deleted")
            // A role taken back in the directory stops counting at once, whatever the token says.
            let app = try #require(DecodedJWT(token).claims["azp"] as? String)
            var registration = try #require(try await h.server.tenants.application(tenantID: h.tenant.id, clientID: app))
            registration.apiPermissions = []
            try await h.server.tenants.save(registration, now: Date())
            #expect(try await driver.get("/v1.0/users", headers: auth).status == .forbidden)
        }
    }
}
