import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An access token as cached: for one account, one set of scopes.
public struct CachedAccessToken: Sendable, Codable, Hashable {
    /// Lowercased and sorted, without `openid`, `profile` and `offline_access`.
    public var scopes: [String]
    public var token: String
    public var expiresOn: Date
}

/// Everything cached for one account of one client at one identity service.
public struct TokenCacheEntry: Sendable, Codable, Hashable {
    public var account: Account
    public var clientID: String
    /// The authority (with its user flow) the tokens came from: B2C binds refresh tokens to it.
    public var authority: String
    public var refreshToken: String?
    public var idToken: String?
    public var accessTokens: [CachedAccessToken]

    /// Accounts are keyed by home account id, environment and client id (MSAL's cache key);
    /// the home account id already carries the policy in B2C.
    func matches(_ account: Account, clientID: String) -> Bool {
        self.account.homeAccountID == account.homeAccountID && self.account.environment == account.environment
            && self.clientID == clientID
    }
}

/// The whole token cache: what a ``TokenStore`` saves and loads.
public struct TokenCache: Sendable, Codable, Hashable {
    public var version = 1
    public var entries: [TokenCacheEntry] = []
    /// The account `todo` and other apps use when none is named.
    public var currentAccountID: String?

    public init() {}
}

/// Where tokens persist. Implementations must make ``modify(_:)`` atomic: no other writer,
/// in this process or another, may run between its read and its write.
public protocol TokenStore: Sendable {
    /// The cache as stored (empty when nothing is).
    func read() async throws -> TokenCache
    /// Reads the cache, applies `change`, writes it back, atomically.
    func modify<T: Sendable>(_ change: @Sendable (inout TokenCache) throws -> T) async throws -> T
    /// The cache as stored right now, past any copy the store keeps for speed. A refresh reads
    /// through this, so it never redeems a refresh token someone else already rotated.
    func readLatest() async throws -> TokenCache
    /// Runs a refresh while no other user of this store (another process, another request of
    /// the same web session) runs one: a rotated refresh token redeemed twice revokes the whole
    /// family (RFC 9700 §4.14.2).
    func whileRefreshing<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T
}

extension TokenStore {
    public func readLatest() async throws -> TokenCache { try await read() }
    public func whileRefreshing<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T { try await body() }
}

/// Tokens in memory only, for tests and for apps that sign in on every launch.
public actor InMemoryTokenStore: TokenStore {
    private var cache = TokenCache()

    public init() {}

    public func read() -> TokenCache { cache }

    public func modify<T: Sendable>(_ change: @Sendable (inout TokenCache) throws -> T) throws -> T { try change(&cache) }
}

/// Tokens in a JSON file readable by its owner only (`0600`), replaced atomically (write a
/// temporary file, then `rename`), and locked with `flock` on a sibling `.lock` file around every
/// read-modify-write, so two processes (two `todo` commands at once) never lose each other's
/// update.
///
/// A file that cannot be decoded is moved aside (`<name>.corrupt-<time>`), reported through
/// `onCorruption`, and treated as empty: the user signs in again and nothing crashes.
public struct FileTokenStore: TokenStore {
    public let url: URL
    private let onCorruption: @Sendable (_ movedTo: URL) -> Void

    /// - Parameters:
    ///   - url: the cache file; its directory is created (`0700`) when missing.
    ///   - onCorruption: called with the path a corrupted file was moved to.
    public init(url: URL, onCorruption: @escaping @Sendable (_ movedTo: URL) -> Void = { _ in }) {
        self.url = url
        self.onCorruption = onCorruption
    }

    public func read() async throws -> TokenCache {
        try withLock { try load() }
    }

    /// An exclusive `flock` on `<file>.refresh.lock` for the whole refresh, network round trip
    /// included, so two `todo` processes never both redeem one refresh token. Polled without
    /// blocking, so a waiting process never ties up a thread another task needs.
    public func whileRefreshing<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try ensureDirectory()
        let path = url.path + ".refresh.lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw IdentityError.storage("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let deadline = ContinuousClock.now + .seconds(60)
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else {
                throw IdentityError.storage("another process holds \(path)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        defer { flock(descriptor, LOCK_UN) }
        return try await body()
    }

    public func modify<T: Sendable>(_ change: @Sendable (inout TokenCache) throws -> T) async throws -> T {
        try withLock {
            var cache = try load()
            let before = cache
            let result = try change(&cache)
            if cache != before { try save(cache) }
            return result
        }
    }

    /// The cache's directory, created `0700` when missing.
    private func ensureDirectory() throws {
        let directory = url.deletingLastPathComponent()
        guard !FileManager.default.fileExists(atPath: directory.path) else { return }
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw IdentityError.storage("cannot create \(directory.path): \(error.localizedDescription)")
        }
    }

    private func withLock<T>(_ body: () throws -> T) throws -> T {
        try ensureDirectory()
        let lockPath = url.path + ".lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw IdentityError.storage("cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw IdentityError.storage("cannot lock \(lockPath): \(String(cString: strerror(errno)))") }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    private func load() throws -> TokenCache {
        guard let data = FileManager.default.contents(atPath: url.path) else { return TokenCache() }
        if data.isEmpty { return TokenCache() }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        if let cache = try? decoder.decode(TokenCache.self, from: data), cache.version == 1 { return cache }
        let aside = url.appendingPathExtension("corrupt-\(Int(Date().timeIntervalSince1970))")
        do {
            try FileManager.default.moveItem(at: url, to: aside)
        } catch {
            throw IdentityError.storage("\(url.path) is corrupted and cannot be moved aside: \(error.localizedDescription)")
        }
        onCorruption(aside)
        return TokenCache()
    }

    private func save(_ cache: TokenCache) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data = try encoder.encode(cache)
        let temporary = url.path + ".tmp-\(getpid())"
        // Created 0600 from the start: the tokens are never readable by others, not even briefly.
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw IdentityError.storage("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = data.withUnsafeBytes { buffer in write(descriptor, buffer.baseAddress, buffer.count) }
        let synced = fsync(descriptor)
        close(descriptor)
        guard written == data.count, synced == 0, rename(temporary, url.path) == 0 else {
            unlink(temporary)
            throw IdentityError.storage("cannot replace \(url.path): \(String(cString: strerror(errno)))")
        }
    }
}

#if canImport(Security)
    import Security

    /// Tokens in the Keychain as one generic-password item (Apple platforms). Set `accessGroup`
    /// to share sign-ins between apps of a team; leave it nil otherwise; a missing entitlement
    /// for a group is the most common Keychain failure (errSecMissingEntitlement, -34018;
    /// https://github.com/AzureAD/microsoft-authentication-library-for-objc/issues/821 item 1), reported with that hint.
    public actor KeychainTokenStore: TokenStore {
        public let service: String
        public let accessGroup: String?

        public init(service: String = "TodoB2C.IdentityClient", accessGroup: String? = nil) {
            self.service = service
            self.accessGroup = accessGroup
        }

        private var query: [String: Any] {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "token-cache",
            ]
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            return query
        }

        public func read() throws -> TokenCache {
            var search = query
            search[kSecReturnData as String] = true
            search[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            let status = SecItemCopyMatching(search as CFDictionary, &item)
            if status == errSecItemNotFound { return TokenCache() }
            guard status == errSecSuccess, let data = item as? Data else { throw Self.failure(status) }
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .secondsSince1970
            return (try? decoder.decode(TokenCache.self, from: data)) ?? TokenCache()
        }

        public func modify<T: Sendable>(_ change: @Sendable (inout TokenCache) throws -> T) throws -> T {
            var cache = try read()
            let result = try change(&cache)
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .secondsSince1970
            let data = try encoder.encode(cache)
            let update = SecItemUpdate(query as CFDictionary, [kSecValueData as String: data] as CFDictionary)
            if update == errSecItemNotFound {
                var item = query
                item[kSecValueData as String] = data
                item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
                let added = SecItemAdd(item as CFDictionary, nil)
                guard added == errSecSuccess else { throw Self.failure(added) }
            } else if update != errSecSuccess {
                throw Self.failure(update)
            }
            return result
        }

        static func failure(_ status: OSStatus) -> IdentityError {
            if status == -34018 {
                return .storage("Keychain access denied (errSecMissingEntitlement): add the access group to the app's entitlements")
            }
            return .storage("Keychain error \(status)")
        }
    }
#endif
