import Crypto
import Foundation
import IdentityClientCore
import SQLKit
import Storage
import Synchronization
import WireCoding

/// What the web app keeps about one browser, server side. The browser holds only a random
/// session id in an HttpOnly cookie; the database holds its SHA-256, so the table's keys are no
/// use as cookies, and several app instances share sessions (SPEC §5). The record holds the
/// session's tokens, so it is stored sealed with the data key (the security issue's L-10).
struct WebSession: Codable, Sendable {
    /// Compared with every state-changing form's `csrf_token`.
    var csrfToken: String
    /// The authorization request in flight (state, nonce, PKCE verifier): never sent to the browser.
    var pending: AuthorizationRequest?
    /// This session's tokens: the SDK's cache for one account.
    var tokens: TokenCache = TokenCache()
    /// A one-time message for the next page ("Signed out", "Session expired …").
    var notice: String?
    var expiresAt: Date

    static func fresh(lifetime: TimeInterval, now: Date) -> WebSession {
        WebSession(csrfToken: Secrets.randomToken(), expiresAt: now.addingTimeInterval(lifetime))
    }
}

extension Secrets {
    /// The database key of a session: the SHA-256 of its id (the id itself is only in the cookie).
    static func sessionKey(_ id: String) -> String { Hex.lowercase(SHA256.hash(data: Data(id.utf8))) }
}

/// Sessions in the `web_sessions` table (SQLite or PostgreSQL, through `Storage`).
struct SessionRepository: Sendable {
    let database: any Database
    let dataKey: DataKey
    let refreshLocks = KeyedSerialLock()

    static let migrations = MigrationRunner(
        namespace: "web",
        migrations: [
            Migration(
                version: 1, name: "sessions",
                [
                    "CREATE TABLE web_sessions (id_hash TEXT PRIMARY KEY, data TEXT NOT NULL, expires_at BIGINT NOT NULL)",
                    "CREATE INDEX web_sessions_expiry ON web_sessions (expires_at)",
                ]),
            // Sessions started before sign-in are counted per client address (the security
            // issue's L-4); signed-in sessions carry no address.
            Migration(
                version: 2, name: "anonymous session origin",
                [
                    "ALTER TABLE web_sessions ADD COLUMN client_address TEXT",
                    "ALTER TABLE web_sessions ADD COLUMN created_at BIGINT",
                    "CREATE INDEX web_sessions_address ON web_sessions (client_address, created_at)",
                ]),
        ])

    /// The row's `data`: the session as JSON, sealed for its row.
    func encode(_ session: WebSession, key: String) throws -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return try dataKey.seal(String(decoding: try encoder.encode(session), as: UTF8.self), context: "web_sessions:\(key)")
    }

    /// The session in a row's `data`; rows stored in clear before sealing still read (and are
    /// sealed when next written). A row that does not open ends its session.
    func decode(_ text: String, key: String) -> WebSession? {
        guard let json = try? dataKey.open(text, context: "web_sessions:\(key)").value else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try? decoder.decode(WebSession.self, from: Data(json.utf8))
    }

    func load(id: String, now: Date) async throws -> WebSession? {
        let key = Secrets.sessionKey(id)
        let text = try await database.read { sql in
            try await sql.select().column("data").from("web_sessions").where("id_hash", .equal, key)
                .where("expires_at", .greaterThan, Int64(now.timeIntervalSince1970)).first(decodingColumn: "data", as: String.self)
        }
        return text.flatMap { decode($0, key: key) }
    }

    func save(id: String, _ session: WebSession) async throws {
        let key = Secrets.sessionKey(id)
        let data = try encode(session, key: key)
        let expires = Int64(session.expiresAt.timeIntervalSince1970)
        try await database.transaction { sql in
            try await sql.delete(from: "web_sessions").where("id_hash", .equal, key).run()
            try await sql.insert(into: "web_sessions").columns("id_hash", "data", "expires_at")
                .values(SQLBind(key), SQLBind(data), SQLBind(expires)).run()
        }
    }

    /// Stores a new session started before sign-in by `clientAddress`, unless that address
    /// started `limitPerHour` in the last hour already: false then. Anonymous requests cannot
    /// fill the table (the security issue's L-4).
    func createAnonymous(id: String, _ session: WebSession, clientAddress: String, limitPerHour: Int, now: Date) async throws -> Bool {
        let key = Secrets.sessionKey(id)
        let data = try encode(session, key: key)
        let since = Int64(now.timeIntervalSince1970) - 3600
        return try await database.transaction { sql in
            let started =
                try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("web_sessions")
                .where("client_address", .equal, clientAddress).where("created_at", .greaterThan, since)
                .first(decodingColumn: "n", as: Int.self) ?? 0
            guard started < limitPerHour else { return false }
            try await sql.insert(into: "web_sessions").columns("id_hash", "data", "expires_at", "client_address", "created_at")
                .values(
                    SQLBind(key), SQLBind(data), SQLBind(Int64(session.expiresAt.timeIntervalSince1970)), SQLBind(clientAddress),
                    SQLBind(Int64(now.timeIntervalSince1970))
                ).run()
            return true
        }
    }

    func delete(id: String) async throws {
        let key = Secrets.sessionKey(id)
        try await database.transaction { sql in try await sql.delete(from: "web_sessions").where("id_hash", .equal, key).run() }
    }

    /// Read, change and write one session in a transaction (the row locked on PostgreSQL), so a
    /// token refresh in one request and a sign-out in another never overwrite each other.
    func modify<T: Sendable>(id: String, _ change: @Sendable (inout WebSession) throws -> T) async throws -> T {
        let key = Secrets.sessionKey(id)
        return try await database.transaction { sql in
            // A row lock on PostgreSQL; SQLite's dialect renders none (its single writer serialises).
            let select = sql.select().column("data").from("web_sessions").where("id_hash", .equal, key).for(.update)
            guard let text = try await select.first(decodingColumn: "data", as: String.self), var session = decode(text, key: key) else {
                throw IdentityError.storage("the session ended")
            }
            let result = try change(&session)
            try await sql.update("web_sessions").set("data", to: SQLBind(try encode(session, key: key))).where("id_hash", .equal, key).run()
            return result
        }
    }

    func sweep(now: Date) async throws {
        try await database.transaction { sql in
            try await sql.delete(from: "web_sessions").where("expires_at", .lessThanOrEqual, Int64(now.timeIntervalSince1970)).run()
        }
    }
}

/// The SDK's token store for one web session: the session row's `tokens`. Reads within one
/// request come from the copy loaded with the session (a page makes several silent calls);
/// writes go to the row, in a transaction, and update that copy.
struct SessionTokenStore: TokenStore {
    let sessions: SessionRepository
    let id: String
    let snapshot: TokenSnapshot

    func read() async throws -> TokenCache {
        if let cached = snapshot.value { return cached }
        return try await readLatest()
    }

    func readLatest() async throws -> TokenCache {
        let tokens = try await sessions.load(id: id, now: Date())?.tokens ?? TokenCache()
        snapshot.value = tokens
        return tokens
    }

    /// Two requests of one session (two tabs) refresh one at a time; the second then finds the
    /// first one's tokens through `readLatest` instead of spending the same refresh token.
    /// Instances sharing a PostgreSQL database do not see each other's lock.
    func whileRefreshing<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await sessions.refreshLocks.withLock(id, body)
    }

    func modify<T: Sendable>(_ change: @Sendable (inout TokenCache) throws -> T) async throws -> T {
        let (result, tokens) = try await sessions.modify(id: id) { session in
            let result = try change(&session.tokens)
            return (result, session.tokens)
        }
        snapshot.value = tokens
        return result
    }
}

/// One request's copy of its session's tokens.
final class TokenSnapshot: Sendable {
    private let stored: Mutex<TokenCache?>

    init(_ tokens: TokenCache?) { stored = Mutex(tokens) }

    var value: TokenCache? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

/// One holder at a time per key, first come first served.
actor KeyedSerialLock {
    private var held: Set<String> = []
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    func withLock<T: Sendable>(_ key: String, _ body: @Sendable () async throws -> T) async throws -> T {
        await lock(key)
        defer { unlock(key) }
        return try await body()
    }

    private func lock(_ key: String) async {
        guard held.contains(key) else {
            held.insert(key)
            return
        }
        await withCheckedContinuation { waiting[key, default: []].append($0) }
    }

    private func unlock(_ key: String) {
        if var queue = waiting[key], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[key] = queue.isEmpty ? nil : queue
            next.resume()  // the lock passes straight to the next waiter
        } else {
            held.remove(key)
        }
    }
}
