import CryptoExtras
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// RS256 signing through the system's OpenSSL 3 `libcrypto`, loaded at run time.
///
/// Why: every token is an RSA-2048 signature and a refresh signs two, so signing bounds the token
/// endpoint. On this project's machines OpenSSL 3 signs about twice as fast as the BoringSSL
/// inside swift-crypto (3,500 vs 1,700 signatures per second per core, `openssl speed rsa2048`
/// vs `todo-server crypto-cost`), thanks to its AVX-512 big-number code. Loading `libcrypto.so.3`
/// with `dlopen` needs no build-time dependency: where it is missing, or where its signature for a
/// probe message differs from BoringSSL's (PKCS #1 v1.5 is deterministic, so they must be equal),
/// swift-crypto signs instead.
final class SystemRSASigner: @unchecked Sendable {
    // @unchecked: `key` is an OpenSSL EVP_PKEY that is never mutated after loading; OpenSSL 3
    // allows concurrent signing with one key (each call makes its own EVP_MD_CTX).
    private let library: OpenSSLFunctions
    private let key: OpaquePointer

    /// A signer for `privateKey`, or nil when the system library is unavailable or disagrees with
    /// swift-crypto.
    init?(privateKey: _RSA.Signing.PrivateKey) {
        guard ProcessInfo.processInfo.environment["TODO_DISABLE_SYSTEM_RSA"] == nil,
            let library = OpenSSLFunctions.shared
        else { return nil }
        let pem = Array(privateKey.pemRepresentation.utf8)
        // BIO_new_mem_buf borrows the buffer, so the key is read while the buffer is pinned.
        let loaded = pem.withUnsafeBytes { buffer -> OpaquePointer? in
            guard let bio = library.bioNewMemBuf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { _ = library.bioFree(bio) }
            return library.pemReadBioPrivateKey(bio, nil, nil, nil)
        }
        guard let key = loaded else { return nil }
        self.library = library
        self.key = key
        let probe = Data("todob2c signing probe".utf8)
        guard let mine = try? sign(probe),
            let reference = try? privateKey.signature(for: probe, padding: .insecurePKCS1v1_5).rawRepresentation,
            mine == reference
        else { return nil }
    }

    deinit { library.pkeyFree(key) }

    enum SigningError: Error { case failed }

    /// RSASSA-PKCS1-v1_5 with SHA-256 over `message`.
    func sign(_ message: Data) throws -> Data {
        guard let context = library.mdCtxNew() else { throw SigningError.failed }
        defer { library.mdCtxFree(context) }
        guard library.digestSignInit(context, nil, library.sha256(), nil, key) == 1 else { throw SigningError.failed }
        var length = 0
        let status = message.withUnsafeBytes { input -> Int32 in
            library.digestSign(context, nil, &length, input.baseAddress, input.count)
        }
        guard status == 1, length > 0 else { throw SigningError.failed }
        var signature = Data(count: length)
        let signed = signature.withUnsafeMutableBytes { output in
            message.withUnsafeBytes { input in
                library.digestSign(
                    context, output.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, input.baseAddress, input.count)
            }
        }
        guard signed == 1 else { throw SigningError.failed }
        return signature.prefix(length)
    }
}

/// The few libcrypto 3 functions the signer calls, resolved once per process.
private struct OpenSSLFunctions: @unchecked Sendable {
    // @unchecked: immutable C function pointers.
    typealias BIONewMemBuf = @convention(c) (UnsafeRawPointer?, Int32) -> OpaquePointer?
    typealias BIOFree = @convention(c) (OpaquePointer?) -> Int32
    typealias PEMReadBioPrivateKey =
        @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> OpaquePointer?
    typealias PKeyFree = @convention(c) (OpaquePointer?) -> Void
    typealias MDCtxNew = @convention(c) () -> OpaquePointer?
    typealias MDCtxFree = @convention(c) (OpaquePointer?) -> Void
    typealias SHA256 = @convention(c) () -> OpaquePointer?
    typealias DigestSignInit =
        @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, OpaquePointer?, OpaquePointer?, OpaquePointer?) -> Int32
    typealias DigestSign =
        @convention(c) (OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int>?, UnsafeRawPointer?, Int) -> Int32

    let bioNewMemBuf: BIONewMemBuf
    let bioFree: BIOFree
    let pemReadBioPrivateKey: PEMReadBioPrivateKey
    let pkeyFree: PKeyFree
    let mdCtxNew: MDCtxNew
    let mdCtxFree: MDCtxFree
    let sha256: SHA256
    let digestSignInit: DigestSignInit
    let digestSign: DigestSign

    static let shared: OpenSSLFunctions? = {
        #if os(Linux)
            guard let handle = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL) else { return nil }
            func load<T>(_ name: String, as type: T.Type) -> T? {
                guard let symbol = dlsym(handle, name) else { return nil }
                return unsafeBitCast(symbol, to: type)
            }
            guard let bioNewMemBuf = load("BIO_new_mem_buf", as: BIONewMemBuf.self),
                let bioFree = load("BIO_free", as: BIOFree.self),
                let pemRead = load("PEM_read_bio_PrivateKey", as: PEMReadBioPrivateKey.self),
                let pkeyFree = load("EVP_PKEY_free", as: PKeyFree.self),
                let mdCtxNew = load("EVP_MD_CTX_new", as: MDCtxNew.self),
                let mdCtxFree = load("EVP_MD_CTX_free", as: MDCtxFree.self),
                let sha256 = load("EVP_sha256", as: SHA256.self),
                let digestSignInit = load("EVP_DigestSignInit", as: DigestSignInit.self),
                let digestSign = load("EVP_DigestSign", as: DigestSign.self)
            else { return nil }
            return OpenSSLFunctions(
                bioNewMemBuf: bioNewMemBuf, bioFree: bioFree, pemReadBioPrivateKey: pemRead, pkeyFree: pkeyFree,
                mdCtxNew: mdCtxNew, mdCtxFree: mdCtxFree, sha256: sha256, digestSignInit: digestSignInit, digestSign: digestSign)
        #else
            return nil
        #endif
    }()
}

extension IdentityServer {
    /// RS256 signatures per second on one thread with the system OpenSSL (nil when unavailable)
    /// and with swift-crypto, for `todo-server crypto-cost` and the benchmarks.
    public static func measureSigningRates(count: Int = 500) throws -> (system: Double?, swiftCrypto: Double) {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let message = Data(String(repeating: "x", count: 900).utf8)
        let clock = ContinuousClock()
        func rate(_ sign: () throws -> Void) rethrows -> Double {
            let elapsed = try clock.measure { for _ in 0..<count { try sign() } }
            return Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        let swiftCrypto = try rate { _ = try key.signature(for: message, padding: .insecurePKCS1v1_5) }
        let system = try SystemRSASigner(privateKey: key).map { signer in try rate { _ = try signer.sign(message) } }
        return (system, swiftCrypto)
    }
}
