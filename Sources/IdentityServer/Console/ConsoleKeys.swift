import Foundation
import Hummingbird
import IdentityDirectory
import TrustFramework
import UserJourneys

/// The console's keys (the service's token signing keys, rotated; the custom policies' key sets,
/// created and given keys) and the custom-policy upload, as the signed-in admin.
extension AdminConsole {
    @Sendable func keys(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await page(request, context: context) { admin in
            let now = server.clock.now
            let keys = try await admin.administration.signingKeys().map { key -> [String: Any] in
                let state = key.signs(at: now) ? "signing" : key.isPublished(at: now) ? (key.retiredAt == nil ? "published, not yet signing" : "retired, still published") : "withdrawn"
                return ["kid": key.kid, "state": state, "created": ConsoleFormat.time(key.createdAt), "bits": key.bits]
            }
            let keySets = try await admin.administration.policyKeySets(tenantID: admin.tenant.id).map { set -> [String: Any] in
                ["id": set.id, "keys": set.keys.map { "\($0.kid) (\($0.kty), \($0.use))" }.joined(separator: ", ")]
            }
            return pages.render("keys", ["title": "Keys", "keys": keys, "keySets": keySets], admin: admin)
        }
    }

    @Sendable func rotateKey(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { admin, _ in
            _ = try await admin.administration.rotateSigningKey()
            return Response(status: .seeOther, headers: [.location: "/admin/keys"])
        }
    }

    @Sendable func createKeySet(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { admin, form in
            do {
                _ = try await admin.administration.createPolicyKeySet(tenantID: admin.tenant.id, id: form["id"] ?? "")
            } catch let refusal as PolicyKeySetError {
                return pages.message("Not created", refusal.message, admin: admin, status: .badRequest)
            }
            return Response(status: .seeOther, headers: [.location: "/admin/keys"])
        }
    }

    @Sendable func generateKey(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        try await posting(request, context: context) { admin, _ in
            do {
                _ = try await admin.administration.generatePolicyKey(tenantID: admin.tenant.id, keySet: context.parameters.get("id") ?? "", use: "sig")
            } catch let refusal as PolicyKeySetError {
                return pages.message("No key made", refusal.message, admin: admin, status: .badRequest)
            }
            return Response(status: .seeOther, headers: [.location: "/admin/keys"])
        }
    }

    /// `POST /admin/policies`: a policy's XML pasted in the form, checked whole and stored as
    /// Graph's upload stores it; a refusal names every problem and stores nothing.
    @Sendable func uploadPolicy(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        // A policy's XML, form-encoded: up to three bytes for each of its own.
        try await posting(request, context: context, upTo: PolicyXML.maximumBytes * 3 + 1024) { admin, form in
            let xml = form["xml"] ?? ""
            guard !xml.isEmpty, xml.utf8.count <= PolicyXML.maximumBytes else {
                return pages.message("Not uploaded", "Paste one policy's XML, at most \(PolicyXML.maximumBytes) bytes.", admin: admin, status: .badRequest)
            }
            do {
                let stored = try await admin.administration.uploadCustomPolicies([Data(xml.utf8)], tenant: admin.tenant)
                let names = stored.map { "\($0.0.id) (\($0.created ? "new" : "replaced"))" }.joined(separator: ", ")
                return pages.message("Uploaded", "Stored \(names).", admin: admin, status: .ok)
            } catch let rejection as PolicyRejection {
                return pages.message("Not uploaded", rejection.description, admin: admin, status: .badRequest)
            }
        }
    }
}
