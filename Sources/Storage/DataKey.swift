import Crypto
import Foundation
import WireCoding

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The key that seals what the database must not hold in clear: signing keys, server secrets
/// and web sessions' tokens (the security issue's M-6 and L-10). It lives outside the database,
/// in `TODO_DATA_KEY` or a file in the data dir, so a copied database file, a backup or a
/// PostgreSQL dump gives away no key material. Every instance sharing a database needs the same
/// key.
///
/// Values are sealed with AES-256-GCM (NIST SP 800-38D) under a fresh 96-bit random nonce, and
/// the column and row a value belongs to are authenticated with it, so a sealed value moved to
/// another row does not open.
public struct DataKey: Sendable {
    private let key: SymmetricKey
    /// Names the key in sealed values and errors without revealing it: a truncated SHA-256.
    public let id: String

    /// `sealed:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`
    static let prefix = "sealed:v1:"

    public init(rawValue: Data) throws {
        guard rawValue.count == 32 else { throw DataKeyError.malformedKey }
        key = SymmetricKey(data: rawValue)
        var hasher = SHA256()
        hasher.update(data: Data("todob2c data key id".utf8))
        hasher.update(data: rawValue)
        id = Self.base64URL(Data(hasher.finalize().prefix(6)))
    }

    /// A new random key.
    public static func generate() -> DataKey {
        // 32 bytes from the system CSPRNG: SymmetricKey(size:) uses it.
        try! DataKey(rawValue: SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
    }

    /// The key as text (base64url, 43 characters): the form of `TODO_DATA_KEY` and the key file.
    public var exported: String { Self.base64URL(key.withUnsafeBytes { Data($0) }) }

    public init(exported text: String) throws {
        guard let data = Self.data(base64URL: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw DataKeyError.malformedKey
        }
        try self.init(rawValue: data)
    }

    /// The key from `TODO_DATA_KEY` when set, else from `<directory>/data-key`, which is created
    /// (mode 0600) on first use.
    public static func load(environment: [String: String], directory: String) throws -> DataKey {
        if let text = environment["TODO_DATA_KEY"], !text.isEmpty {
            do { return try DataKey(exported: text) } catch { throw DataKeyError.malformedEnvironment }
        }
        let path = URL(fileURLWithPath: directory).appendingPathComponent("data-key").path
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            // An empty file is what an earlier version left after a crash or a full disk at its
            // first start: the caller decides whether a new key may replace it.
            if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw DataKeyError.emptyFile(path) }
            do { return try DataKey(exported: text) } catch { throw DataKeyError.malformedFile(path) }
        }
        let fresh = generate()
        // Durable before anything is sealed with it, and whole or absent: written to a file of
        // its own, flushed, then linked into place (a link, unlike a rename, fails when the name
        // exists: two instances starting on one data dir must not each write a key; the second
        // reads the first one's), and the directory flushed (issue 51, F3).
        switch createDurably(path: path, contents: fresh.exported + "\n") {
        case .created: return fresh
        case .exists:
            if let text = try? String(contentsOfFile: path, encoding: .utf8), let key = try? DataKey(exported: text) { return key }
            throw DataKeyError.unwritable(path, reason: "another process is writing it")
        case .failed(let reason): throw DataKeyError.unwritable(path, reason: reason)
        }
    }

    /// Replaces an empty key file (``DataKeyError/emptyFile(_:)``) with a new key: only for a
    /// store in which nothing was sealed, which the caller checked.
    public static func replaceEmpty(directory: String) throws -> DataKey {
        let path = URL(fileURLWithPath: directory).appendingPathComponent("data-key").path
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
        else { return try load(environment: [:], directory: directory) }
        guard unlink(path) == 0 || errno == ENOENT else { throw DataKeyError.unwritable(path, reason: String(cString: strerror(errno))) }
        return try load(environment: [:], directory: directory)
    }

    /// Seals `plaintext` for the place named by `context` (e.g. `signing_keys:<kid>`).
    public func seal(_ plaintext: String, context: String) throws -> String {
        let box = try AES.GCM.seal(Data(plaintext.utf8), using: key, authenticating: Data(context.utf8))
        guard let combined = box.combined else { throw DataKeyError.cannotOpen(context) }
        return Self.prefix + id + ":" + Self.base64URL(combined)
    }

    /// Opens a value sealed by ``seal(_:context:)``. A value without the sealed prefix was
    /// stored in clear before sealing existed: it is returned with `wasClear`, so that the
    /// caller can seal it in place.
    public func open(_ stored: String, context: String) throws -> (value: String, wasClear: Bool) {
        guard stored.hasPrefix(Self.prefix) else { return (stored, true) }
        let rest = stored.dropFirst(Self.prefix.count)
        guard let colon = rest.firstIndex(of: ":") else { throw DataKeyError.cannotOpen(context) }
        let keyID = String(rest[..<colon])
        guard keyID == id else { throw DataKeyError.wrongKey(context: context, sealedWith: keyID, have: id) }
        guard let combined = Self.data(base64URL: String(rest[rest.index(after: colon)...])),
            let box = try? AES.GCM.SealedBox(combined: combined),
            let plaintext = try? AES.GCM.open(box, using: key, authenticating: Data(context.utf8)),
            let text = String(data: plaintext, encoding: .utf8)
        else { throw DataKeyError.cannotOpen(context) }
        return (text, false)
    }

    static func base64URL(_ data: Data) -> String { Base64URL.encode(data) }

    static func data(base64URL text: String) -> Data? {
        guard text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
        return Base64URL.decode(text)
    }
}

public enum DataKeyError: Error, Equatable, CustomStringConvertible {
    case malformedKey
    case malformedEnvironment
    case malformedFile(String)
    case emptyFile(String)
    case unwritable(String, reason: String)
    /// The key file is empty while the store holds values sealed with the key `keyID`.
    case lost(path: String, keyID: String)
    case wrongKey(context: String, sealedWith: String, have: String)
    case cannotOpen(String)

    public var description: String {
        switch self {
        case .malformedKey: "a data key is 32 bytes in base64url (43 characters)"
        case .malformedEnvironment: "TODO_DATA_KEY is not a data key: 32 bytes in base64url (43 characters)"
        case .malformedFile(let path): "\(path) is not a data key: 32 bytes in base64url (43 characters)"
        case .emptyFile(let path): "\(path) is empty"
        case .unwritable(let path, let reason): "cannot create the data key file \(path): \(reason)"
        case .lost(let path, let keyID):
            "\(path) is empty, but the database holds values sealed with data key \(keyID): put that key back in the file (or TODO_DATA_KEY) from a backup of the data dir"
        case .wrongKey(let context, let sealedWith, let have):
            "the database's \(context.split(separator: ":").first ?? "") was sealed with data key \(sealedWith), but this instance has data key \(have): give every instance sharing the database the same TODO_DATA_KEY (or the data-key file of the data dir that created it)"
        case .cannotOpen(let context):
            "the database's \(context.split(separator: ":").first ?? "") does not open with this instance's data key (altered or moved)"
        }
    }
}

enum DurableCreation: Equatable {
    case created, exists
    case failed(String)
}

/// Writes a new file with mode 0600 that is, after a crash, either whole or absent: the bytes
/// go to a temporary file (`O_EXCL`, no symlink followed), which is flushed (`fsync`) and then
/// linked to `path` (failing when `path` exists), and the directory is flushed so the name
/// survives too. Nothing is left behind on failure.
func createDurably(path: String, contents: String) -> DurableCreation {
    let directory = (path as NSString).deletingLastPathComponent
    let temporary = (directory as NSString).appendingPathComponent(".data-key.\(UUID().uuidString.lowercased())")
    func failure() -> DurableCreation {
        let reason = String(cString: strerror(errno))
        unlink(temporary)
        return .failed(reason)
    }
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
    guard descriptor >= 0 else { return .failed(String(cString: strerror(errno))) }
    var bytes = Array(contents.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else {
            close(descriptor)
            return failure()
        }
        bytes = bytes.dropFirst(written)
    }
    guard fsync(descriptor) == 0 else {
        close(descriptor)
        return failure()
    }
    guard close(descriptor) == 0 else { return failure() }
    if link(temporary, path) != 0 {
        if errno == EEXIST {
            unlink(temporary)
            return .exists
        }
        return failure()
    }
    unlink(temporary)
    let folder = open(directory, O_RDONLY | O_DIRECTORY)
    if folder >= 0 {
        defer { close(folder) }
        guard fsync(folder) == 0 else { return .failed(String(cString: strerror(errno))) }
    }
    return .created
}
