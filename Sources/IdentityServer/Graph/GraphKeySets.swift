import Crypto
import Foundation
import Hummingbird
import IdentityDirectory
import UserJourneys
import WireCoding

/// Graph beta's policy key sets (`/beta/trustFramework/keySets`, SPEC §2.12), for app-only
/// tokens holding `TrustFrameworkKeySet.ReadWrite.All` (or `….Read.All` to read): create a set,
/// `generateKey`, `uploadSecret`, `getActiveKey`, read, list, delete. A key shows its public
/// parts only (`trustFrameworkKey`); private keys and secrets never leave the database.
struct GraphKeySets: Sendable {
    let permit: GraphCallers
    let keySets: PolicyKeySetLibrary
    /// Changes go through the directory's one door, so each is in the audit log.
    let administration: IdentityAdministration

    static let readRoles = ["TrustFrameworkKeySet.Read.All", "TrustFrameworkKeySet.ReadWrite.All"]
    static let writeRoles = ["TrustFrameworkKeySet.ReadWrite.All"]
    static let context = "https://graph.microsoft.com/beta/$metadata#trustFramework/keySets"

    @Sendable func list(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let sets = try await keySets.keySets(tenantID: tenant.id)
        return .json(.object([("@odata.context", .string(Self.context)), ("value", .array(sets.map(Self.json)))]))
    }

    @Sendable func get(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        return .json(Self.entity(try await keySet(context, tenant: tenant)))
    }

    @Sendable func create(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let id)? = body["id"], !id.isEmpty else { throw GraphError.badRequest("id is required.", code: "BadRequest") }
        let set = try await mapping { try await administration.createPolicyKeySet(tenantID: tenant.id, id: id) }
        context.logger.info("policy key set created through Graph", metadata: ["keySet": "\(set.id)"])
        return .json(Self.entity(set), status: .created)
    }

    @Sendable func delete(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        guard try await administration.deletePolicyKeySet(tenantID: tenant.id, id: context.parameters.get("id") ?? "") else { throw GraphError.resourceNotFound }
        return Response(status: .noContent)
    }

    @Sendable func generateKey(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        let (use, nbf, exp) = try Self.common(body)
        guard case .string(let kty)? = body["kty"] else { throw GraphError.badRequest("kty is required.", code: "BadRequest") }
        let key = try await mapping {
            try await administration.generatePolicyKey(
                tenantID: tenant.id, keySet: context.parameters.get("id") ?? "", use: use, kty: kty, notBefore: nbf, expires: exp)
        }
        return .json(Self.json(key))
    }

    @Sendable func uploadSecret(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        let (use, nbf, exp) = try Self.common(body)
        guard case .string(let value)? = body["k"] else { throw GraphError.badRequest("k is required.", code: "BadRequest") }
        let key = try await mapping {
            try await administration.uploadPolicySecret(
                tenantID: tenant.id, keySet: context.parameters.get("id") ?? "", use: use, value: value, notBefore: nbf, expires: exp)
        }
        return .json(Self.json(key))
    }

    /// `uploadPkcs12` `{"key": <PKCS#12, base64>, "password": …}`: a certificate with its private
    /// key, for a REST profile's `ClientCertificate`.
    @Sendable func uploadPkcs12(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let application = try context.requireApplication()
        let (tenant, administration) = (application.tenant, application.administration)
        let body = try await GraphBody.object(request, context: context)
        guard case .string(let file)? = body["key"] else { throw GraphError.badRequest("key is required.", code: "BadRequest") }
        var password = ""
        if case .string(let given)? = body["password"] { password = given }
        let key = try await mapping {
            try await administration.uploadPolicyCertificate(tenantID: tenant.id, keySet: context.parameters.get("id") ?? "", pkcs12: file, password: password)
        }
        return .json(Self.json(key))
    }

    @Sendable func activeKey(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let tenant = try context.requireApplication().tenant
        let key = try await mapping { try await keySets.activeKey(tenantID: tenant.id, keySet: context.parameters.get("id") ?? "") }
        guard let key else {
            throw GraphError(status: .notFound, code: "AADB2C", message: "The key set has no active key: none whose nbf has passed and exp has not.")
        }
        return .json(Self.json(key))
    }

    private func keySet(_ context: GraphRequestContext, tenant: Tenant) async throws -> PolicyKeySet {
        guard let set = try await keySets.keySet(tenantID: tenant.id, id: context.parameters.get("id") ?? "") else {
            throw GraphError.resourceNotFound
        }
        return set
    }

    private func mapping<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PolicyKeySetError {
            switch error.kind {
            case .notFound: throw GraphError(status: .notFound, code: "Request_ResourceNotFound", message: error.message)
            case .conflict: throw GraphError(status: .conflict, code: "AADB2C", message: error.message)
            case .invalid: throw GraphError.badRequest(error.message, code: "AADB2C")
            }
        }
    }

    /// `use` (default `sig`), and `nbf`/`exp` as Unix seconds.
    private static func common(_ body: [String: JSONValue]) throws -> (String, Date?, Date?) {
        var use = "sig"
        if case .string(let given)? = body["use"] { use = given }
        func date(_ name: String) throws -> Date? {
            switch body[name] {
            case nil, .null?: return nil
            // Unix seconds from 1970 to 9999, as a date can be.
            case .number(let seconds)? where (0...253_402_300_799).contains(seconds): return Date(timeIntervalSince1970: seconds.rounded())
            default: throw GraphError.badRequest("\(name) must be a number of seconds since 1970.", code: "BadRequest")
            }
        }
        return (use, try date("nbf"), try date("exp"))
    }

    static func json(_ key: PolicyKey) -> JSONText {
        var members: [(String, JSONText)] = [("kid", .string(key.kid)), ("use", .string(key.use)), ("kty", .string(key.kty))]
        if let n = key.n, let e = key.e { members += [("n", .string(n)), ("e", .string(e))] }
        if let nbf = key.notBefore { members.append(("nbf", .int(Int64(nbf.timeIntervalSince1970)))) }
        if let exp = key.expires { members.append(("exp", .int(Int64(exp.timeIntervalSince1970)))) }
        if let x5c = key.x5c, let der = Data(base64Encoded: x5c) {
            members += [("x5c", .array([.string(x5c)])), ("x5t", .string(Base64URL.encode(Data(Insecure.SHA1.hash(data: der)))))]
        }
        return .object(members)
    }

    static func json(_ set: PolicyKeySet) -> JSONText { .object([("id", .string(set.id)), ("keys", .array(set.keys.map(json)))]) }

    static func entity(_ set: PolicyKeySet) -> JSONText {
        .object([("@odata.context", .string(context + "/$entity")), ("id", .string(set.id)), ("keys", .array(set.keys.map(json)))])
    }
}

extension GraphKeySets {
    /// The routes, each under the Graph permission its operation's reference page names.
    var endpoints: RouteCollection<GraphRequestContext> {
        let collection = RouteCollection(context: GraphRequestContext.self)
        collection.group().add(middleware: permit.application(anyOf: Self.readRoles))
            .get("trustFramework/keySets", use: list)
            .get("trustFramework/keySets/:id", use: get)
            // An OData function: Microsoft's SDKs call it with its parentheses.
            .get("trustFramework/keySets/:id/getActiveKey()", use: activeKey)
            .get("trustFramework/keySets/:id/getActiveKey", use: activeKey)
        collection.group().add(middleware: permit.application(anyOf: Self.writeRoles))
            .post("trustFramework/keySets", use: create)
            .delete("trustFramework/keySets/:id", use: delete)
            .post("trustFramework/keySets/:id/generateKey", use: generateKey)
            .post("trustFramework/keySets/:id/uploadSecret", use: uploadSecret)
            .post("trustFramework/keySets/:id/uploadPkcs12", use: uploadPkcs12)
        return collection
    }
}
