import Foundation
import SQLKit
import Storage

/// Random secrets the service makes for itself and keeps in the database, created on first use,
/// so every instance sharing the database uses the same one (the interaction store keeps them).
package protocol ServerSecrets: Sendable {
    /// The secret named `name`, created now when there is none yet.
    func serverSecret(named name: String, now: Date) async throws -> String
}

/// Secrets the service keeps in clear for its own use, today the dev web app's client secret,
/// sealed with the data key in the database, so that every instance sharing the database (each
/// with its own data dir) reads the same one (issue 14). The app registration itself holds only
/// the secret's hash, as for any client.
package struct ServiceSecretStore: Sendable {
    let database: any Database
    let dataKey: DataKey

    package static func webAppSecretName(clientID: UUID) -> String { "web-app-client-secret:\(clientID.uuidString.lowercased())" }

    /// The stored secret; an error when it was sealed with another data key (instances sharing a
    /// database need the same `TODO_DATA_KEY`).
    package func read(_ name: String) async throws -> String? {
        let stored = try await database.read { sql in
            try await sql.select().column("value").from("service_secrets").where("name", .equal, name)
                .first(decodingColumn: "value", as: String.self)
        }
        return try stored.map { try dataKey.open($0, context: "service_secrets:\(name)").value }
    }

    package func write(_ name: String, _ value: String, now: Date) async throws {
        let sealed = try dataKey.seal(value, context: "service_secrets:\(name)")
        try await database.transaction { sql in
            try await sql.delete(from: "service_secrets").where("name", .equal, name).run()
            try await sql.insert(into: "service_secrets").columns("name", "value", "created_at")
                .values(SQLBind(name), SQLBind(sealed), SQLBind(now.epochSeconds)).run()
        }
    }

    package init(database: any Database, dataKey: DataKey) {
        self.database = database
        self.dataKey = dataKey
    }
}
