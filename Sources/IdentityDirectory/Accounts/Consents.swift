import Foundation
import SQLKit
import Storage

/// The delegated permissions each user granted each app on the Entra face's consent page
/// (SPEC §2.9). B2C has no user consent (its admins consent for the tenant), so only the Entra
/// face asks and records. A scope is kept as a key: `openid`, `offline_access`, or
/// `{resource}/{scope}` in lower case, so `User.Read` and `https://graph.microsoft.com/user.read`
/// are one permission.
package protocol ConsentStore: Sendable {
    func granted(userID: UUID, clientID: String) async throws -> Set<String>
    /// Adds `scopes` to what the user granted the app.
    func grant(_ scopes: Set<String>, userID: UUID, clientID: String, now: Date) async throws
}

package struct SQLConsentStore: ConsentStore {
    let database: any Database

    struct Row: Codable {
        var userId: String
        var clientId: String
        var scopes: String
        var updatedAt: Int64
    }

    package func granted(userID: UUID, clientID: String) async throws -> Set<String> {
        let row = try await database.read { sql in
            try await sql.select().columns("*").from("consents").where("user_id", .equal, userID.uuidString.lowercased())
                .where("client_id", .equal, clientID.lowercased()).first(decoding: Row.self, with: .snakeCase)
        }
        return Set(row.flatMap { StoredJSON.decode([String].self, $0.scopes) } ?? [])
    }

    package func grant(_ scopes: Set<String>, userID: UUID, clientID: String, now: Date) async throws {
        let user = userID.uuidString.lowercased()
        let client = clientID.lowercased()
        try await database.transaction { sql in
            let existing = try await sql.select().columns("*").from("consents").where("user_id", .equal, user)
                .where("client_id", .equal, client).first(decoding: Row.self, with: .snakeCase)
            let merged = Set(existing.flatMap { StoredJSON.decode([String].self, $0.scopes) } ?? []).union(scopes)
            let row = Row(userId: user, clientId: client, scopes: StoredJSON.encode(merged.sorted()), updatedAt: now.epochSeconds)
            if existing == nil {
                try await sql.insert(into: "consents").model(row, with: .snakeCase).run()
            } else {
                try await sql.update("consents").set("scopes", to: row.scopes).set("updated_at", to: row.updatedAt)
                    .where("user_id", .equal, user).where("client_id", .equal, client).run()
            }
        }
    }

    package init(database: any Database) {
        self.database = database
    }
}

extension GrantedScopes {
    /// The consent keys of this grant: `openid`, `offline_access`, each delegated scope of the
    /// resource, and the app's client id when it asks for a token to itself (the client id as a
    /// scope): that token carries the user's identity to the app's own API, so it is consented
    /// like any other (the second outside attack found ROPC passing with only the client id).
    package var consentKeys: Set<String> {
        var keys: Set<String> = []
        if openID { keys.insert("openid") }
        if offlineAccess { keys.insert("offline_access") }
        if let resource {
            if resource.scopeNames.isEmpty { keys.insert(resource.audience.lowercased()) }
            for name in resource.scopeNames where !name.isEmpty { keys.insert("\(resource.audience)/\(name)".lowercased()) }
        }
        return keys
    }
}
