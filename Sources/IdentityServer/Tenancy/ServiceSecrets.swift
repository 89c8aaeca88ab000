import Foundation
import SQLKit
import Storage

/// Secrets the service keeps in clear for its own use, today the dev web app's client secret,
/// sealed with the data key in the database, so that every instance sharing the database (each
/// with its own data dir) reads the same one (issue 14). The app registration itself holds only
/// the secret's hash, as for any client.
struct ServiceSecretStore: Sendable {
    let database: any Database
    let dataKey: DataKey

    static func webAppSecretName(clientID: UUID) -> String { "web-app-client-secret:\(clientID.uuidString.lowercased())" }

    /// The stored secret; an error when it was sealed with another data key (instances sharing a
    /// database need the same `TODO_DATA_KEY`).
    func read(_ name: String) async throws -> String? {
        let stored = try await database.read { sql in
            try await sql.select().column("value").from("service_secrets").where("name", .equal, name)
                .first(decodingColumn: "value", as: String.self)
        }
        return try stored.map { try dataKey.open($0, context: "service_secrets:\(name)").value }
    }

    func write(_ name: String, _ value: String, now: Date) async throws {
        let sealed = try dataKey.seal(value, context: "service_secrets:\(name)")
        try await database.transaction { sql in
            try await sql.delete(from: "service_secrets").where("name", .equal, name).run()
            try await sql.insert(into: "service_secrets").columns("name", "value", "created_at")
                .values(SQLBind(name), SQLBind(sealed), SQLBind(now.epochSeconds)).run()
        }
    }
}
