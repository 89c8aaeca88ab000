import Foundation
import Hummingbird
import IdentityDirectory
import TrustFramework
import UserJourneys
import WireCoding

/// Graph beta's custom-policy API (`/beta/trustFramework/policies`, SPEC §2.12), for app-only
/// tokens holding `Policy.ReadWrite.TrustFramework` (reads too, as in Graph): upload with
/// `PUT …/{id}/$value` or `POST`, read the XML back with `GET …/{id}/$value`, list, delete.
/// A policy is checked whole at upload; a refused one answers Graph's error shape with B2C's
/// "Validation failed" message naming every problem, and nothing is stored.
struct GraphTrustFramework: Sendable {
    let permit: GraphCallers
    let administration: IdentityAdministration

    /// Graph serves policies to `Policy.ReadWrite.TrustFramework` only, reads included.
    static let readRoles = ["Policy.ReadWrite.TrustFramework"]
    static let writeRoles = ["Policy.ReadWrite.TrustFramework"]
    static let context = "https://graph.microsoft.com/beta/$metadata#trustFramework/policies"

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let policies = try await administration.customPolicies(tenantID: tenant.id)
        return .json(
            .object([
                ("@odata.context", .string(Self.context)),
                ("value", .array(policies.map { .object([("id", .string($0.id))]) })),
            ]))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let policy = try await self.policy(context, tenant: tenant)
        return .json(.object([("@odata.context", .string(Self.context + "/$entity")), ("id", .string(policy.id))]))
    }

    @Sendable func value(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return Self.xml(try await policy(context, tenant: tenant).body, status: .ok)
    }

    /// `PUT …/{id}/$value`: 201 for a new policy, 200 for a changed one, the XML as the body.
    @Sendable func put(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let id = context.parameters.get("id") ?? ""
        return try await upload(request, context: context, tenant: tenant, administration: administration, expectedID: id)
    }

    /// `POST /trustFramework/policies` with the XML: creates (or replaces) the policy it names.
    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        return try await upload(request, context: context, tenant: tenant, administration: administration, expectedID: nil)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let id = context.parameters.get("id") ?? ""
        do {
            guard try await administration.deleteCustomPolicy(tenant: tenant, id: id) else { throw GraphError.resourceNotFound }
        } catch let rejection as PolicyRejection {
            throw GraphError(status: .badRequest, code: "AADB2C", message: rejection.description)
        }
        context.logger.info("custom policy deleted through Graph", metadata: ["policy": "\(id)"])
        return Response(status: .noContent)
    }

    private func upload(
        _ request: Request, context: GraphRequestContext, tenant: Tenant, administration: IdentityAdministration, expectedID: String?
    ) async throws -> Response {
        let contentType = (request.headers[.contentType] ?? "").split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        // Microsoft's SDKs send application/octet-stream to `$value`; the reference says application/xml.
        guard ["application/xml", "text/xml", "application/octet-stream"].contains(contentType) else {
            throw GraphError(status: .unsupportedMediaType, code: "BadRequest", message: "The request body must be application/xml.")
        }
        var request = request
        let body: Data
        do {
            body = Data(buffer: try await request.collectBody(upTo: PolicyXML.maximumBytes))
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw GraphError(
                status: .contentTooLarge, code: "AADB2C", message: "The policy is larger than \(PolicyXML.maximumBytes) bytes.")
        }
        do {
            let (policy, created) = try await administration.uploadCustomPolicy(body, tenant: tenant, expectedID: expectedID)
            context.logger.info("custom policy uploaded through Graph", metadata: ["policy": "\(policy.id)", "created": "\(created)"])
            return Self.xml(policy.body, status: created ? .created : .ok)
        } catch let rejection as PolicyRejection {
            throw GraphError(status: .badRequest, code: "AADB2C", message: rejection.description)
        }
    }

    private func policy(_ context: GraphRequestContext, tenant: Tenant) async throws -> CustomPolicy {
        guard let id = context.parameters.get("id"), let policy = try await administration.customPolicy(tenantID: tenant.id, id: id) else {
            throw GraphError.resourceNotFound
        }
        return policy
    }

    private static func xml(_ body: String, status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

extension GraphTrustFramework {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("trustFramework/policies", use: list)
            .get("trustFramework/policies/:id", use: get)
            .get("trustFramework/policies/:id/$value", use: value)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("trustFramework/policies", use: create)
            .delete("trustFramework/policies/:id", use: delete)
            .put("trustFramework/policies/:id/$value", use: put)
        return collection
    }
}
