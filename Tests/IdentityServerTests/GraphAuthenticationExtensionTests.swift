import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityDirectory
import Storage
import TestSupport
import Testing

@testable import IdentityServer

/// Graph's `/identity/customAuthenticationExtensions` (SPEC §2.15): External ID's four derived
/// types over the tenant's declared extensions, with Graph's permissions and error shape; what a
/// user flow binds stays until unbound; an export shows what Graph changed.
@Suite("Microsoft Graph custom authentication extensions")
struct GraphAuthenticationExtensionTests {
    static let path = "/v1.0/identity/customAuthenticationExtensions"

    static func claimsProvider(_ name: String = "loyalty") -> String {
        #"""
        {"@odata.type":"#microsoft.graph.onTokenIssuanceStartCustomExtension","displayName":"\#(name)","description":"Loyalty tier",
         "endpointConfiguration":{"@odata.type":"#microsoft.graph.httpRequestEndpoint","targetUrl":"https://api.example/claims"},
         "authenticationConfiguration":{"@odata.type":"#microsoft.graph.azureAdTokenAuthentication","resourceId":"api://claims.example"},
         "clientConfiguration":{"timeoutInMilliseconds":2000,"maximumRetries":0},
         "claimsForTokenConfiguration":[{"claimIdInApiResponse":"loyaltyTier"}]}
        """#
    }

    @Test("create, read, change and delete, each derived type; a bound one is kept until unbound; export writes what Graph made", arguments: TestDatabase.engines)
    func lifecycle(engine: DatabaseEngine) async throws {
        try await IdentityHarness.run(engine) { h, driver in
            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["CustomAuthenticationExtension.ReadWrite.All"])
            let created = try await GraphIdentityTests.send(driver, .post, Self.path, auth, Self.claimsProvider())
            #expect(created.status == .created, "\(created.text)")
            let id = try #require(created.json["id"] as? String)
            #expect(created.json["@odata.type"] as? String == "#microsoft.graph.onTokenIssuanceStartCustomExtension")
            #expect((created.json["endpointConfiguration"] as? [String: Any])?["targetUrl"] as? String == "https://api.example/claims")
            #expect((created.json["authenticationConfiguration"] as? [String: Any])?["resourceId"] as? String == "api://claims.example")
            #expect((created.json["clientConfiguration"] as? [String: Any])?["timeoutInMilliseconds"] as? Int == 2000)
            #expect(((created.json["claimsForTokenConfiguration"] as? [[String: Any]])?.first)?["claimIdInApiResponse"] as? String == "loyaltyTier")
            let stored = try #require(try await h.server.tenants.tenant(matching: h.tenant.name)?.authenticationExtensions.first)
            #expect(stored.name == "loyalty" && stored.event == .onTokenIssuanceStart && stored.claims == ["loyaltyTier"] && stored.timeoutSeconds == 2)
            #expect(stored.description == "Loyalty tier")

            // The other three types, as Microsoft's samples spell them.
            for (name, type) in [
                ("prefill", "#microsoft.graph.onAttributeCollectionStartCustomExtension"),
                ("validate", "#microsoft.graph.onAttributeCollectionSubmitCustomExtension"), ("mailer", "#microsoft.graph.OnOtpSendCustomExtension"),
            ] {
                let body = #"""
                    {"@odata.type":"\#(type)","displayName":"\#(name)","endpointConfiguration":{"targetUrl":"https://api.example/\#(name)"},
                     "authenticationConfiguration":{"resourceId":"api://\#(name).example"}}
                    """#
                let made = try await GraphIdentityTests.send(driver, .post, Self.path, auth, body)
                #expect(made.status == .created, "\(made.text)")
            }
            let list = try await GraphIdentityTests.send(driver, .get, Self.path, auth)
            #expect((list.json["value"] as? [[String: Any]])?.count == 4)
            let one = try await GraphIdentityTests.send(driver, .get, "\(Self.path)/\(id)", auth)
            #expect(one.json["displayName"] as? String == "loyalty" && one.json["@odata.context"] != nil)

            let changed = try await GraphIdentityTests.send(
                driver, .patch, "\(Self.path)/\(id)", auth,
                #"{"endpointConfiguration":{"targetUrl":"https://api.example/v2/claims"},"clientConfiguration":{"timeoutInMilliseconds":5000}}"#)
            #expect(changed.status == .noContent, "\(changed.text)")
            let after = try #require(try await h.server.tenants.tenant(matching: h.tenant.name)?.authenticationExtensions.first)
            #expect(after.url == "https://api.example/v2/claims" && after.timeoutSeconds == 5 && after.claims == ["loyaltyTier"])

            // Bound by a flow: kept; unbound: deleted.
            var flow = try #require(try await h.server.tenants.userFlow(tenantID: h.tenant.id, name: "B2C_1_susi"))
            flow.extensions = FlowExtensions(onTokenIssuanceStart: "loyalty")
            try await h.server.tenants.save(flow)
            let kept = try await GraphIdentityTests.send(driver, .delete, "\(Self.path)/\(id)", auth)
            #expect(kept.status == .badRequest && GraphUsersTests.errorCode(kept) != nil, "\(kept.text)")
            let yaml = try await h.server.administration.exportTenant(tenantID: h.tenant.id, withUsers: false)
            #expect(yaml.contains("https://api.example/v2/claims") && yaml.contains("Loyalty tier"), "\(yaml)")
            flow.extensions = FlowExtensions()
            try await h.server.tenants.save(flow)
            #expect(try await GraphIdentityTests.send(driver, .delete, "\(Self.path)/\(id)", auth).status == .noContent)
            #expect(try await GraphIdentityTests.send(driver, .get, "\(Self.path)/\(id)", auth).status == .notFound)
        }
    }

    @Test("refusals in Graph's shape, nothing stored: a type not served, missing or unknown members, a rule broken, another event, a rename; reading needs a role, writing ReadWrite")
    func refusals() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            let reader = try await GraphUsersTests.appToken(h, driver, roles: ["CustomAuthenticationExtension.Read.All"])
            #expect(try await GraphIdentityTests.send(driver, .get, Self.path, reader).status == .ok)
            let denied = try await GraphIdentityTests.send(driver, .post, Self.path, reader, Self.claimsProvider())
            #expect(denied.status == .forbidden, "\(denied.text)")
            let stranger = try await GraphUsersTests.appToken(h, driver, roles: ["User.Read.All"])
            #expect(try await GraphIdentityTests.send(driver, .get, Self.path, stranger).status == .forbidden)

            let auth = try await GraphUsersTests.appToken(h, driver, roles: ["CustomAuthenticationExtension.ReadWrite.All"])
            let base = Self.claimsProvider()
            for bad in [
                base.replacingOccurrences(of: "onTokenIssuanceStartCustomExtension", with: "onPasswordSubmitCustomExtension"),
                base.replacingOccurrences(of: "\"displayName\":\"loyalty\",", with: ""),
                base.replacingOccurrences(of: "https://api.example/claims", with: "http://api.example/claims"),
                base.replacingOccurrences(of: "api://claims.example", with: "https://graph.microsoft.com"),
                base.replacingOccurrences(of: "\"maximumRetries\":0", with: "\"maximumRetries\":3"),
                base.replacingOccurrences(of: "2000", with: "1500"), base.replacingOccurrences(of: "2000", with: "60000"),
                base.replacingOccurrences(of: "loyaltyTier", with: "oid"),
                base.replacingOccurrences(of: "\"description\"", with: "\"notes\""),
                base.replacingOccurrences(of: "\"loyalty\"", with: #""bad\u0007name""#),
                base.replacingOccurrences(of: "loyaltyTier", with: "role"),
                base.replacingOccurrences(of: "loyaltyTier", with: "http://schemas.microsoft.com/ws/2008/06/identity/claims/role"),
                base.replacingOccurrences(of: "#microsoft.graph.azureAdTokenAuthentication", with: "#microsoft.graph.basicAuthentication"),
                base.replacingOccurrences(of: "api://claims.example", with: "api://claims example"),
                base.replacingOccurrences(of: #"{"claimIdInApiResponse":"loyaltyTier"}"#, with: #"{"claimIdInApiResponse":"loyaltyTier","source":"x"}"#),
            ] {
                let refused = try await GraphIdentityTests.send(driver, .post, Self.path, auth, bad)
                #expect(refused.status == .badRequest && GraphUsersTests.errorCode(refused) != nil, "\(bad)\n\(refused.text)")
            }
            #expect(try await h.server.tenants.tenant(matching: h.tenant.name)?.authenticationExtensions.isEmpty == true)

            let made = try await GraphIdentityTests.send(driver, .post, Self.path, auth, Self.claimsProvider())
            let id = try #require(made.json["id"] as? String)
            #expect(try await GraphIdentityTests.send(driver, .post, Self.path, auth, Self.claimsProvider()).status == .badRequest, "a second of the name")
            for patch in [
                ##"{"@odata.type":"#microsoft.graph.onOtpSendCustomExtension"}"##, #"{"displayName":"renamed"}"#,
                #"{"endpointConfiguration":{"targetUrl":"https://api.example/x","extra":1}}"#,
            ] {
                let refused = try await GraphIdentityTests.send(driver, .patch, "\(Self.path)/\(id)", auth, patch)
                #expect(refused.status == .badRequest, "\(patch)\n\(refused.text)")
            }
            let stored = try #require(try await h.server.tenants.tenant(matching: h.tenant.name)?.authenticationExtensions.first)
            #expect(stored.name == "loyalty" && stored.event == .onTokenIssuanceStart && stored.url == "https://api.example/claims")

            // Graph's limit: 100 in a tenant.
            for index in 1..<AuthenticationExtension.maximumPerTenant {
                try await h.server.administration.saveAuthenticationExtension(
                    AuthenticationExtension(name: "x\(index)", event: .onOtpSend, url: "https://api.example/\(index)", resourceId: "api://x"),
                    tenantID: h.tenant.id, creating: true)
            }
            let over = try await GraphIdentityTests.send(driver, .post, Self.path, auth, Self.claimsProvider("onemore"))
            #expect(over.status == .badRequest && over.text.contains("at most 100"), "\(over.text)")
        }
    }
}
