import Foundation
import SQLKit
import Storage

/// Errors the account store reports as domain conditions.
package enum UserDirectoryError: Error, Equatable {
    case duplicate
}

/// Consumer accounts.
package protocol UserDirectory: Sendable {
    func create(_ user: UserAccount) async throws
    func user(id: UUID) async throws -> UserAccount?
    func user(tenantID: UUID, provider: IdentityProviderKind, signInName: String) async throws -> UserAccount?
    func users(tenantID: UUID) async throws -> [UserAccount]
    /// A page of the tenant's accounts matching `text`, and the number matching in all.
    func search(tenantID: UUID, text: String, limit: Int) async throws -> (users: [UserAccount], total: Int)
    func delete(id: UUID) async throws -> Bool
    func updateProfile(id: UUID, displayName: String, attributes: [String: String], now: Date) async throws
    /// Replaces the password, clears lockout and revokes every refresh-token family of the user
    /// (a password change revokes grants: AADB2C90129). `emailProven`: the change followed a
    /// code sent to the account's address (the reset flow), which proves the address.
    /// `forceChange`: the next sign-in must set another one (an operator's temporary password).
    func setPassword(id: UUID, hash: String, emailProven: Bool, forceChange: Bool, now: Date) async throws
    /// Enables or disables the account (disabling ends its sessions and refresh tokens) and sets
    /// Graph's `passwordPolicies` (`.some(nil)` clears it); nil leaves a value as it is.
    func setAccountState(id: UUID, enabled: Bool?, passwordPolicies: String??, now: Date) async throws
    /// Graph's `revokeSignInSessions`: ends the SSO sessions and revokes every refresh-token family.
    func revokeSessions(id: UUID, now: Date) async throws
    /// Overwrites a stored account's identity, profile, password hash and state with `user`'s
    /// (an exported tenant re-applied); lockout and creation time stay.
    func replace(_ user: UserAccount) async throws
    /// Replaces the hash without revoking anything (a cost upgrade at sign-in).
    func upgradeHash(id: UUID, hash: String) async throws
    /// Marks the account's address proven (a code sent to it was returned), and nothing else.
    func markEmailVerified(id: UUID, now: Date) async throws
    /// Applies `transition` to the lockout state of one source (an IP address) and of the whole
    /// account atomically (no other transition of the same account runs in between, on any
    /// instance) and returns what it decided; nil when the account is gone.
    func updateLockout<Decision: Sendable>(
        id: UUID, source: String,
        _ transition: @escaping @Sendable (LockoutState, LockoutState) -> (LockoutState, LockoutState, Decision)
    ) async throws -> Decision?
    /// Clears every lockout counter of the account (the admin's unlock).
    func clearLockout(id: UUID) async throws
    /// ``updateLockout(id:source:_:)`` for a sign-in name no account has, keyed by `nameKey` (a
    /// keyed hash of the name): such names lock exactly like accounts, so the lockout answer
    /// does not tell which names exist (the security issue's L-6).
    func updateUnknownNameLockout<Decision: Sendable>(
        tenantID: UUID, nameKey: String, source: String, now: Date,
        _ transition: @escaping @Sendable (LockoutState, LockoutState) -> (LockoutState, LockoutState, Decision)
    ) async throws -> Decision
}

package struct SQLUserDirectory: UserDirectory {
    let database: any Database

    package init(database: any Database) { self.database = database }

    struct Row: Codable {
        var id: String
        var tenantId: String
        var identityProvider: String
        var signInName: String
        var email: String?
        var emailVerified: Bool
        var displayName: String
        var attributes: String
        var passwordHash: String?
        var createdAt: Int64
        var updatedAt: Int64
        var passwordChangedAt: Int64?
        var failedAttempts: Int64
        var lockoutCount: Int64
        var lockedUntil: Int64?
        var lastFailedFingerprint: String?
        var accountEnabled: Bool
        var forcePasswordChange: Bool
        var passwordPolicies: String?
        /// A local account's ``ConfusableSkeleton`` (unique per tenant): a look-alike of an
        /// existing name is a duplicate. nil for federated accounts (their name is a subject).
        var signInSkeleton: String?

        init(_ user: UserAccount) {
            id = user.objectID
            tenantId = user.tenantID.uuidString.lowercased()
            identityProvider = user.identityProvider.rawValue
            signInName = user.signInName
            email = user.email
            emailVerified = user.emailVerified
            displayName = user.displayName
            attributes = StoredJSON.encode(user.attributes)
            passwordHash = user.passwordHash
            createdAt = user.createdAt.epochSeconds
            updatedAt = user.updatedAt.epochSeconds
            passwordChangedAt = user.passwordHash == nil ? nil : user.createdAt.epochSeconds
            failedAttempts = Int64(user.lockout.failedAttempts)
            lockoutCount = Int64(user.lockout.lockoutCount)
            lockedUntil = user.lockout.lockedUntil?.epochSeconds
            lastFailedFingerprint = user.lockout.lastFailedFingerprint
            accountEnabled = user.accountEnabled
            forcePasswordChange = user.forcePasswordChange
            passwordPolicies = user.passwordPolicies
            signInSkeleton = Self.skeleton(of: user)
        }

        static func skeleton(of user: UserAccount) -> String? {
            user.identityProvider == .local ? ConfusableSkeleton.of(user.signInName) : nil
        }

        /// Column by column (``Database/rows(_:_:)``): every refresh grant reads its user, and
        /// SQLKit's `Decodable` path with snake-case keys was most of that read's cost.
        init(stored row: StoredRow) throws {
            id = try row.text("id")
            tenantId = try row.text("tenant_id")
            identityProvider = try row.text("identity_provider")
            signInName = try row.text("sign_in_name")
            email = try row.optionalText("email")
            emailVerified = try row.bool("email_verified")
            displayName = try row.text("display_name")
            attributes = try row.text("attributes")
            passwordHash = try row.optionalText("password_hash")
            createdAt = try row.integer("created_at")
            updatedAt = try row.integer("updated_at")
            passwordChangedAt = try row.optionalInteger("password_changed_at")
            failedAttempts = try row.integer("failed_attempts")
            lockoutCount = try row.integer("lockout_count")
            lockedUntil = try row.optionalInteger("locked_until")
            lastFailedFingerprint = try row.optionalText("last_failed_fingerprint")
            accountEnabled = try row.bool("account_enabled")
            forcePasswordChange = try row.bool("force_password_change")
            passwordPolicies = try row.optionalText("password_policies")
            signInSkeleton = try row.optionalText("sign_in_skeleton")
        }

        var lockout: LockoutState {
            LockoutState(stored: failedAttempts, lockoutCount, lockedUntil: lockedUntil, fingerprint: lastFailedFingerprint)
        }

        var user: UserAccount? {
            guard let id = UUID(uuidString: id), let tenantID = UUID(uuidString: tenantId),
                let provider = IdentityProviderKind(rawValue: identityProvider)
            else { return nil }
            var user = UserAccount(
                id: id, tenantID: tenantID, identityProvider: provider, signInName: signInName, email: email,
                displayName: displayName, attributes: StoredJSON.decode([String: String].self, attributes) ?? [:],
                passwordHash: passwordHash, createdAt: Date(timeIntervalSince1970: TimeInterval(createdAt)),
                lockout: lockout, emailVerified: emailVerified)
            user.updatedAt = Date(timeIntervalSince1970: TimeInterval(updatedAt))
            user.accountEnabled = accountEnabled
            user.forcePasswordChange = forcePasswordChange
            user.passwordPolicies = passwordPolicies
            return user
        }
    }

    package func create(_ user: UserAccount) async throws {
        let row = Row(user)
        do {
            try await database.transaction { sql in
                try await sql.insert(into: "users").model(row, with: .snakeCase).run()
            }
        } catch  where database.isUniqueViolation(error) {
            throw UserDirectoryError.duplicate
        }
    }

    package func user(id: UUID) async throws -> UserAccount? {
        try await database.rows("SELECT * FROM users WHERE id = ?", [.text(id.uuidString.lowercased())]).first
            .map(Row.init(stored:))?.user
    }

    package func user(tenantID: UUID, provider: IdentityProviderKind, signInName: String) async throws -> UserAccount? {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("users")
                .where("tenant_id", .equal, tenant).where("identity_provider", .equal, provider.rawValue)
                .where("sign_in_name", .equal, signInName)
                .first(decoding: Row.self, with: .snakeCase)
        }?.user
    }

    /// At most `limit` of the tenant's accounts whose sign-in name, email or display name contains
    /// `text` (any case), or whose object id it is, by sign-in name; and how many match in all.
    package func search(tenantID: UUID, text: String, limit: Int) async throws -> (users: [UserAccount], total: Int) {
        let tenant = tenantID.uuidString.lowercased()
        let escaped = text.lowercased().replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_")
        let pattern = "%\(escaped)%"
        return try await database.read { sql in
            let matching = SQLQueryString(
                "tenant_id = \(bind: tenant) AND (LOWER(sign_in_name) LIKE \(bind: pattern) ESCAPE '\\' OR LOWER(COALESCE(email, '')) LIKE \(bind: pattern) ESCAPE '\\' OR LOWER(display_name) LIKE \(bind: pattern) ESCAPE '\\' OR id = \(bind: text.lowercased()))")
            let users = try await sql.select().columns("*").from("users").where(matching).orderBy("sign_in_name").limit(limit)
                .all(decoding: Row.self, with: .snakeCase).compactMap(\.user)
            let total = try await sql.select().column(SQLFunction("COUNT", args: SQLLiteral.all), as: "n").from("users").where(matching)
                .first(decodingColumn: "n", as: Int.self) ?? 0
            return (users, total)
        }
    }

    package func users(tenantID: UUID) async throws -> [UserAccount] {
        let tenant = tenantID.uuidString.lowercased()
        return try await database.read { sql in
            try await sql.select().columns("*").from("users").where("tenant_id", .equal, tenant)
                .orderBy("sign_in_name").all(decoding: Row.self, with: .snakeCase)
        }.compactMap(\.user)
    }

    package func delete(id: UUID) async throws -> Bool {
        let key = id.uuidString.lowercased()
        return try await database.transaction { sql in
            let exists = try await sql.select().column("id").from("users").where("id", .equal, key).first()
            guard exists != nil else { return false }
            try await sql.delete(from: "sso_sessions").where("user_id", .equal, key).run()
            try await sql.raw(
                "DELETE FROM refresh_tokens WHERE family_id IN (SELECT id FROM refresh_token_families WHERE user_id = \(bind: key))"
            ).run()
            try await sql.delete(from: "refresh_token_families").where("user_id", .equal, key).run()
            try await sql.delete(from: "users").where("id", .equal, key).run()
            return true
        }
    }

    package func updateProfile(id: UUID, displayName: String, attributes: [String: String], now: Date) async throws {
        let key = id.uuidString.lowercased()
        let encoded = StoredJSON.encode(attributes)
        try await database.transaction { sql in
            try await sql.update("users").set("display_name", to: displayName).set("attributes", to: encoded)
                .set("updated_at", to: now.epochSeconds).where("id", .equal, key).run()
        }
    }

    package func setPassword(id: UUID, hash: String, emailProven: Bool, forceChange: Bool, now: Date) async throws {
        let key = id.uuidString.lowercased()
        try await database.transaction { sql in
            if emailProven { try await sql.update("users").set("email_verified", to: true).where("id", .equal, key).run() }
            try await sql.update("users").set("password_hash", to: hash).set("password_changed_at", to: now.epochSeconds)
                .set("force_password_change", to: forceChange).set("updated_at", to: now.epochSeconds).where("id", .equal, key).run()
            try await Self.clearLockout(key, sql: sql)
            // A new password ends every other way in: SSO sessions and refresh tokens (OWASP ASVS V3.3).
            try await Self.endSessions(key, reason: "password changed", now: now, sql: sql)
        }
    }

    package func setAccountState(id: UUID, enabled: Bool?, passwordPolicies: String??, now: Date) async throws {
        let key = id.uuidString.lowercased()
        try await database.transaction { sql in
            var update = sql.update("users").set("updated_at", to: now.epochSeconds)
            if let enabled { update = update.set("account_enabled", to: enabled) }
            if let passwordPolicies { update = update.set("password_policies", to: passwordPolicies) }
            try await update.where("id", .equal, key).run()
            // A disabled account keeps no way in (OWASP ASVS 7.4.2).
            if enabled == false { try await Self.endSessions(key, reason: "account disabled", now: now, sql: sql) }
        }
    }

    package func replace(_ user: UserAccount) async throws {
        let row = Row(user)
        // The skeleton follows a new name; an unchanged name keeps its own (none, for the younger
        // of two accounts that looked alike before skeletons existed).
        let skeleton = SQLQueryString(
            "CASE WHEN sign_in_name = \(bind: row.signInName) THEN sign_in_skeleton ELSE \(bind: row.signInSkeleton) END")
        do {
            try await database.transaction { sql in
                try await sql.update("users").set("identity_provider", to: row.identityProvider)
                    .set("sign_in_name", to: row.signInName)
                    .set("email", to: row.email).set("email_verified", to: row.emailVerified).set("display_name", to: row.displayName)
                    .set("attributes", to: row.attributes).set("password_hash", to: row.passwordHash)
                    .set("account_enabled", to: row.accountEnabled).set("force_password_change", to: row.forcePasswordChange)
                    .set("password_policies", to: row.passwordPolicies).set("updated_at", to: row.updatedAt)
                    .set(SQLIdentifier("sign_in_skeleton"), to: skeleton)
                    .where("id", .equal, row.id).run()
            }
        } catch  where database.isUniqueViolation(error) {
            throw UserDirectoryError.duplicate
        }
    }

    package func revokeSessions(id: UUID, now: Date) async throws {
        let key = id.uuidString.lowercased()
        try await database.transaction { sql in try await Self.endSessions(key, reason: "sessions revoked", now: now, sql: sql) }
    }

    /// Ends the user's SSO sessions and revokes every refresh-token family.
    static func endSessions(_ key: String, reason: String, now: Date, sql: any SQLDatabase) async throws {
        try await sql.delete(from: "sso_sessions").where("user_id", .equal, key).run()
        // The admin console's sessions end with the others (a revocation, a password change, a disable).
        try await sql.delete(from: "console_sessions").where("user_id", .equal, key).run()
        try await sql.update("refresh_token_families").set("revoked_at", to: now.epochSeconds).set("revoked_reason", to: reason)
            .where("user_id", .equal, key).where("revoked_at", .is, SQLLiteral.null).run()
    }

    package func upgradeHash(id: UUID, hash: String) async throws {
        let key = id.uuidString.lowercased()
        try await database.transaction { sql in
            try await sql.update("users").set("password_hash", to: hash).where("id", .equal, key).run()
        }
    }

    package func markEmailVerified(id: UUID, now: Date) async throws {
        let key = id.uuidString.lowercased()
        try await database.transaction { sql in
            try await sql.update("users").set("email_verified", to: true).set("updated_at", to: now.epochSeconds).where("id", .equal, key).run()
        }
    }

    struct SourceRow: Codable {
        var userId: String
        var source: String
        var failedAttempts: Int64
        var lockoutCount: Int64
        var lockedUntil: Int64?
        var lastFailedFingerprint: String?

        var lockout: LockoutState {
            LockoutState(stored: failedAttempts, lockoutCount, lockedUntil: lockedUntil, fingerprint: lastFailedFingerprint)
        }
    }

    package func updateLockout<Decision: Sendable>(
        id: UUID, source: String,
        _ transition: @escaping @Sendable (LockoutState, LockoutState) -> (LockoutState, LockoutState, Decision)
    ) async throws -> Decision? {
        let key = id.uuidString.lowercased()
        return try await database.transaction { sql -> Decision? in
            // The user's row is the lock for both counters: a row lock on PostgreSQL (so concurrent
            // attempts on one account queue here), none needed on SQLite (one writer).
            let select = sql.select().columns("*").from("users").where("id", .equal, key).for(.update)
            guard let row = try await select.first(decoding: Row.self, with: .snakeCase) else { return nil }
            let stored = try await sql.select().columns("*").from("lockout_sources").where("user_id", .equal, key)
                .where("source", .equal, source).first(decoding: SourceRow.self, with: .snakeCase)
            let current = stored?.lockout ?? LockoutState()
            let (nextSource, nextGlobal, decision) = transition(current, row.lockout)
            if nextGlobal != row.lockout { try await Self.writeAccountLockout(nextGlobal, key, sql: sql) }
            if nextSource != current {
                try await sql.delete(from: "lockout_sources").where("user_id", .equal, key).where("source", .equal, source).run()
                if nextSource != LockoutState() {
                    try await sql.insert(into: "lockout_sources").model(
                        SourceRow(
                            userId: key, source: source, failedAttempts: Int64(nextSource.failedAttempts),
                            lockoutCount: Int64(nextSource.lockoutCount), lockedUntil: nextSource.lockedUntil?.epochSeconds,
                            lastFailedFingerprint: nextSource.lastFailedFingerprint), with: .snakeCase
                    ).run()
                }
            }
            return decision
        }
    }

    package func clearLockout(id: UUID) async throws {
        let key = id.uuidString.lowercased()
        try await database.transaction { sql in try await Self.clearLockout(key, sql: sql) }
    }

    /// Every counter of the account back to zero: the account-wide one and each source's.
    static func clearLockout(_ key: String, sql: any SQLDatabase) async throws {
        try await writeAccountLockout(LockoutState(), key, sql: sql)
        try await sql.delete(from: "lockout_sources").where("user_id", .equal, key).run()
    }

    static func writeAccountLockout(_ state: LockoutState, _ key: String, sql: any SQLDatabase) async throws {
        try await sql.update("users")
            .set("failed_attempts", to: Int64(state.failedAttempts))
            .set("lockout_count", to: Int64(state.lockoutCount))
            .set("locked_until", to: state.lockedUntil?.epochSeconds)
            .set("last_failed_fingerprint", to: state.lastFailedFingerprint)
            .where("id", .equal, key).run()
    }
}
