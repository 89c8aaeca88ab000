import Foundation
import SQLKit
import Storage
import WireCoding

/// An app's client secret as Graph's `passwordCredential` shows it: a key id, a name, the first
/// three characters (`hint`) and its validity; never the secret, which only its hash keeps.
public struct PasswordCredential: Sendable, Equatable {
    // Graph: passwordCredential resource type (keyId, displayName, hint, startDateTime, endDateTime).
    public var keyID: UUID
    public var displayName: String?
    public var hint: String
    public var start: Date
    public var end: Date?
}

extension TenantDirectory {
    package func addSecret(clientID: UUID, secret: String, now: Date, expiresAt: Date?) async throws {
        _ = try await addPasswordCredential(clientID: clientID, secret: secret, now: now, expiresAt: expiresAt, displayName: nil)
    }
}

extension SQLTenantDirectory {
    struct CredentialRow: Codable {
        var id: String
        var hint: String
        var createdAt: Int64
        var expiresAt: Int64?
        var displayName: String?

        var credential: PasswordCredential? {
            guard let keyID = UUID(uuidString: id) else { return nil }
            return PasswordCredential(
                keyID: keyID, displayName: displayName, hint: hint, start: Date(timeIntervalSince1970: TimeInterval(createdAt)),
                end: expiresAt.map { Date(timeIntervalSince1970: TimeInterval($0)) })
        }
    }

    package func addPasswordCredential(clientID: UUID, secret: String, now: Date, expiresAt: Date?, displayName: String?) async throws
        -> PasswordCredential
    {
        let client = clientID.uuidString.lowercased()
        let keyID = UUID()
        let hint = String(secret.prefix(3))
        try await database.transaction { sql in
            try await sql.insert(into: "application_secrets")
                .columns("id", "client_id", "secret_hash", "hint", "created_at", "expires_at", "display_name")
                .values(
                    SQLBind(keyID.uuidString.lowercased()), SQLBind(client), SQLBind(Secrets.sha256Hex(secret)), SQLBind(hint),
                    SQLBind(now.epochSeconds), SQLBind(expiresAt?.epochSeconds), SQLBind(displayName)
                ).run()
        }
        return PasswordCredential(
            keyID: keyID, displayName: displayName, hint: hint, start: Date(timeIntervalSince1970: TimeInterval(now.epochSeconds)),
            end: expiresAt.map { Date(timeIntervalSince1970: TimeInterval($0.epochSeconds)) })
    }

    package func passwordCredentials(clientID: UUID) async throws -> [PasswordCredential] {
        let client = clientID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("id", "hint", "created_at", "expires_at", "display_name").from("application_secrets")
                .where("client_id", .equal, client).orderBy("created_at").orderBy("id")
                .all(decoding: CredentialRow.self, with: .snakeCase)
        }.compactMap(\.credential)
    }

    package func removePasswordCredential(clientID: UUID, keyID: UUID) async throws -> Bool {
        let client = clientID.uuidString.lowercased()
        let key = keyID.uuidString.lowercased()
        return try await database.transaction { sql in
            let exists = try await sql.select().column("id").from("application_secrets")
                .where("client_id", .equal, client).where("id", .equal, key).first()
            guard exists != nil else { return false }
            try await sql.delete(from: "application_secrets").where("client_id", .equal, client).where("id", .equal, key).run()
            return true
        }
    }
}
