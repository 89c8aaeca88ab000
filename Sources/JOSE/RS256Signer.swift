import Crypto
import CryptoExtras
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Makes RSASSA-PKCS1-v1_5 SHA-256 signatures (RFC 7518 §3.3) with one private key, as fast as
/// this machine's best RSA code allows.
///
/// Why two libraries: every token the identity service issues is one signature, and the refresh
/// grant is bound by them (issue 13). OpenSSL 3 has RSA code for CPUs with AVX-512 IFMA that
/// BoringSSL (swift-crypto) lacks: on such a machine `openssl speed rsa2048` made 4,100 signatures
/// per second per core where swift-crypto made 1,580; elsewhere the two are alike. So on Linux,
/// where the system's `libcrypto.so.3` is there, it signs; anywhere else, or if it cannot be
/// loaded, cannot read the key or fails to sign, swift-crypto does. PKCS#1 v1.5 signatures are deterministic
/// (RFC 8017 §8.2), so both give the same bytes for the same key and message, which the tests
/// check. Verification stays with swift-crypto everywhere.
public final class RS256Signer: Sendable {
    /// The key as swift-crypto holds it: its public half is what the JWKS publishes.
    public let privateKey: _RSA.Signing.PrivateKey
    #if os(Linux)
        /// OpenSSL's copy of the key, made on the first signature (so a server that has signed
        /// nothing has not mapped libcrypto: idle memory stays as it was); nil inside when OpenSSL
        /// is not available.
        private let openSSLKey = Mutex<OpenSSLKey??>(nil)
    #endif

    public init(_ privateKey: _RSA.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// A signer that never uses OpenSSL: the fallback, for the tests that compare the two.
    static func swiftCryptoOnly(_ privateKey: _RSA.Signing.PrivateKey) -> RS256Signer {
        let signer = RS256Signer(privateKey)
        #if os(Linux)
            signer.openSSLKey.withLock { $0 = .some(nil) }
        #endif
        return signer
    }

    /// Which library signs: "OpenSSL 3" or "swift-crypto" (for `todo-server crypto-cost`).
    public var library: String {
        #if os(Linux)
            if loadedOpenSSLKey() != nil { return "OpenSSL 3" }
        #endif
        return "swift-crypto"
    }

    /// The signature over `message`: as many bytes as the key's modulus.
    public func signature(for message: [UInt8]) throws -> [UInt8] {
        #if os(Linux)
            if let key = loadedOpenSSLKey() {
                if let signature = key.signature(for: message, length: (privateKey.keySizeInBits + 7) / 8) { return signature }
                // OpenSSL refused a key it had read: swift-crypto signs from now on, the same bytes.
                openSSLKey.withLock { $0 = .some(nil) }
            }
        #endif
        return [UInt8](try privateKey.signature(for: message, padding: .insecurePKCS1v1_5).rawRepresentation)
    }

    #if os(Linux)
        private func loadedOpenSSLKey() -> OpenSSLKey? {
            openSSLKey.withLock { key in
                if let key { return key }
                let made = LibCrypto.shared.flatMap { OpenSSLKey(privateKey, library: $0) }
                key = .some(made)
                return made
            }
        }
    #endif
}

#if os(Linux)
    /// The few libcrypto functions the signer calls, looked up in the system's OpenSSL 3 when first
    /// needed (dlopen(3)): no build-time dependency on OpenSSL's headers, and a machine without the
    /// library signs with swift-crypto instead. The C signatures are OpenSSL 3.0's (EVP_DigestSignInit(3),
    /// d2i_PrivateKey(3), EVP_MD_CTX_new(3), ERR_clear_error(3)).
    struct LibCrypto: @unchecked Sendable {
        typealias PrivateKeyFromDER =
            @convention(c) (
                UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, Int
            ) -> OpaquePointer?
        typealias Free = @convention(c) (OpaquePointer?) -> Void
        typealias NewContext = @convention(c) () -> OpaquePointer?
        typealias DigestSignInit =
            @convention(c) (
                OpaquePointer?, UnsafeMutablePointer<OpaquePointer?>?, OpaquePointer?, OpaquePointer?, OpaquePointer?
            ) -> Int32
        typealias Digest = @convention(c) () -> OpaquePointer?
        typealias DigestSign =
            @convention(c) (
                OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int>, UnsafePointer<UInt8>?, Int
            ) -> Int32
        typealias ClearErrors = @convention(c) () -> Void

        let privateKeyFromDER: PrivateKeyFromDER
        let freeKey: Free
        let newContext: NewContext
        let freeContext: Free
        let digestSignInit: DigestSignInit
        let sha256: Digest
        let digestSign: DigestSign
        let clearErrors: ClearErrors

        /// Loaded once per process, on first use; nil when there is no OpenSSL 3.
        static let shared: LibCrypto? = LibCrypto()

        private init?() {
            // RTLD_LOCAL: if nothing else has loaded libcrypto, its symbols stay out of the
            // process's global namespace (another library's copy is shared, which is harmless).
            guard let handle = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL) else { return nil }
            func symbol<T>(_ name: String, as type: T.Type) -> T? {
                dlsym(handle, name).map { unsafeBitCast($0, to: type) }
            }
            guard let privateKeyFromDER = symbol("d2i_AutoPrivateKey", as: PrivateKeyFromDER.self),
                let freeKey = symbol("EVP_PKEY_free", as: Free.self),
                let newContext = symbol("EVP_MD_CTX_new", as: NewContext.self),
                let freeContext = symbol("EVP_MD_CTX_free", as: Free.self),
                let digestSignInit = symbol("EVP_DigestSignInit", as: DigestSignInit.self),
                let sha256 = symbol("EVP_sha256", as: Digest.self),
                let digestSign = symbol("EVP_DigestSign", as: DigestSign.self),
                let clearErrors = symbol("ERR_clear_error", as: ClearErrors.self)
            else {
                dlclose(handle)
                return nil
            }
            (self.privateKeyFromDER, self.freeKey, self.newContext, self.freeContext) = (
                privateKeyFromDER, freeKey, newContext, freeContext
            )
            (self.digestSignInit, self.sha256, self.digestSign, self.clearErrors) = (digestSignInit, sha256, digestSign, clearErrors)
        }
    }

    /// A private key as OpenSSL's `EVP_PKEY`. Read-only once made, so threads may share it; each
    /// signature gets a digest context of its own, which must not be shared (openssl-threads(7)).
    final class OpenSSLKey: @unchecked Sendable {
        private let library: LibCrypto
        private let key: OpaquePointer

        init?(_ privateKey: _RSA.Signing.PrivateKey, library: LibCrypto) {
            // PKCS#1 `RSAPrivateKey` DER, which d2i_AutoPrivateKey recognises.
            let der = [UInt8](privateKey.derRepresentation)
            let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
                var cursor = buffer.baseAddress
                return library.privateKeyFromDER(nil, &cursor, buffer.count)
            }
            guard let key else {
                library.clearErrors()
                return nil
            }
            self.library = library
            self.key = key
        }

        deinit { library.freeKey(key) }

        /// The signature, or nil when OpenSSL fails (its error queue, per thread, is cleared).
        func signature(for message: [UInt8], length: Int) -> [UInt8]? {
            guard let context = library.newContext() else { return nil }
            defer { library.freeContext(context) }
            // An RSA key signs with PKCS#1 v1.5 padding unless told otherwise (EVP_DigestSignInit(3)).
            guard library.digestSignInit(context, nil, library.sha256(), nil, key) == 1 else {
                library.clearErrors()
                return nil
            }
            var signature = [UInt8](repeating: 0, count: length)
            var written = length
            let signed = signature.withUnsafeMutableBufferPointer { output in
                message.withUnsafeBufferPointer { input in
                    library.digestSign(context, output.baseAddress, &written, input.baseAddress, input.count)
                }
            }
            guard signed == 1, written == length else {
                library.clearErrors()
                return nil
            }
            return signature
        }
    }
#endif
