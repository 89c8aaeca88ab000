import Crypto
import Foundation
import IdentityDirectory
import SQLKit
import Storage
import WireCoding

/// The admin console's sign-ins (SPEC §2.13), kept in the database so that every instance
/// knows them and a sign-out or a revocation ends them at once: the cookie holds a random
/// token, the table its SHA-256, the account and the session's CSRF token.
struct ConsoleSessions: Sendable {
    let database: any Database

    /// An hour, then the admin signs in again through the tenant's flow.
    static let lifetime: TimeInterval = 3600

    struct Session: Sendable {
        let tenantID: UUID
        let userID: UUID
        let csrf: String
    }

    /// A new session for `user`: the cookie's token.
    func start(for user: UserAccount, now: Date) async throws -> String {
        let token = Secrets.randomToken(byteCount: 32)
        let (hash, tenant, userID, csrf) = (Self.hash(token), user.tenantID.uuidString.lowercased(), user.objectID, Secrets.randomToken(byteCount: 24))
        let (created, expires) = (now.epochSeconds, now.addingTimeInterval(Self.lifetime).epochSeconds)
        try await run(
            """
            INSERT INTO console_sessions (token_hash, tenant_id, user_id, csrf, created_at, expires_at)
            VALUES (\(bind: hash), \(bind: tenant), \(bind: userID), \(bind: csrf), \(bind: created), \(bind: expires))
            """)
        // Sessions past their end go as new ones come.
        try await run("DELETE FROM console_sessions WHERE expires_at < \(bind: created)")
        return token
    }

    /// The live session the cookie's token names, or nil.
    func session(token: String, now: Date) async throws -> Session? {
        guard token.count <= 64 else { return nil }
        guard
            let row = try await database.rows(
                "SELECT tenant_id, user_id, csrf FROM console_sessions WHERE token_hash = ? AND expires_at > ?",
                [.text(Self.hash(token)), .integer(now.epochSeconds)]
            ).first,
            let tenantID = UUID(uuidString: try row.text("tenant_id")), let userID = UUID(uuidString: try row.text("user_id"))
        else { return nil }
        return Session(tenantID: tenantID, userID: userID, csrf: try row.text("csrf"))
    }

    func end(token: String) async throws {
        let hash = Self.hash(token)
        try await run("DELETE FROM console_sessions WHERE token_hash = \(bind: hash)")
    }

    /// Ends every console session of the account (its sessions revoked, its role taken).
    func endAll(userID: UUID) async throws {
        let id = userID.uuidString.lowercased()
        try await run("DELETE FROM console_sessions WHERE user_id = \(bind: id)")
    }

    private func run(_ statement: SQLQueryString) async throws {
        try await database.singleStatement { sql in try await sql.raw(statement).run() }
    }

    private static func hash(_ token: String) -> String { Hex.lowercase(SHA256.hash(data: Data(token.utf8))) }
}
