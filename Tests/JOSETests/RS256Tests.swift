import CryptoExtras
import Foundation
import Testing
import WireCoding

@testable import JOSE

@Suite("RS256 and JWKs: the system's one JOSE implementation")
struct RS256Tests {
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    static let signer = RS256Signer(key)

    func part(_ json: String) -> String { Base64URL.encode(Data(json.utf8)) }

    @Test("a signed token parses, names its key, verifies with it and not with another, and keeps the claims' order")
    func roundTrip() throws {
        let claims = #"{"exp":1,"iss":"https://i/","sub":"s"}"#
        let token = try RS256.sign(claims: Array(claims.utf8), keyID: "k1", with: Self.signer)
        let parts = token.split(separator: ".").map(String.init)
        #expect(Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"typ":"JWT","alg":"RS256","kid":"k1"}"#)
        #expect(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) } == claims)
        let parsed = try RS256.parse(token)
        #expect(parsed.keyID == "k1")
        #expect(parsed.isSigned(by: Self.key.publicKey))
        #expect(!parsed.isSigned(by: try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey))
        #expect(try parsed.claims().subject == "s")
    }

    @Test("the signer's signatures are swift-crypto's, byte for byte, for any message and any key size")
    func signerMatchesSwiftCrypto() throws {
        // PKCS#1 v1.5 is deterministic (RFC 8017 §8.2.1): on Linux the signer uses OpenSSL, and
        // its bytes must be exactly what BoringSSL makes, which also verify with swift-crypto.
        for bits in [_RSA.Signing.KeySize.bits2048, .bits3072] {
            let key = try _RSA.Signing.PrivateKey(keySize: bits)
            let signer = RS256Signer(key)
            #if os(Linux)
                #expect(signer.library == "OpenSSL 3", "this Linux machine has libcrypto.so.3: the test must compare the two libraries")
            #endif
            for length in [0, 1, 55, 64, 1000, 4096] {
                let message = (0..<length).map { _ in UInt8.random(in: 0...255) }
                let ours = try signer.signature(for: message)
                let reference = try key.signature(for: message, padding: .insecurePKCS1v1_5).rawRepresentation
                #expect(ours == [UInt8](reference), "bits \(bits.bitCount), length \(length)")
                #expect(key.publicKey.isValidSignature(.init(rawRepresentation: ours), for: message, padding: .insecurePKCS1v1_5))
            }
        }
    }

    @Test("a new signer shared by 8 tasks at once: OpenSSL's key is loaded once, and all 320 signatures are the reference's")
    func signerConcurrently() async throws {
        let message = Array("a.b".utf8)
        let reference = [UInt8](try Self.key.signature(for: message, padding: .insecurePKCS1v1_5).rawRepresentation)
        // New, so the tasks race to load OpenSSL's copy of the key.
        let signer = RS256Signer(Self.key)
        let matches = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { try (0..<40).filter { _ in try signer.signature(for: message) == reference }.count }
            }
            return try await group.reduce(0, +)
        }
        #expect(matches == 320)
    }

    @Test("without OpenSSL the signer falls back to swift-crypto, with the same bytes")
    func signerFallback() throws {
        let fallback = RS256Signer.swiftCryptoOnly(Self.key)
        #expect(fallback.library == "swift-crypto")
        let message = Array("header.payload".utf8)
        #expect(try fallback.signature(for: message) == Self.signer.signature(for: message))
    }

    @Test("a changed payload no longer verifies")
    func tampered() throws {
        let token = try RS256.sign(claims: Array(#"{"sub":"alice"}"#.utf8), keyID: "k1", with: Self.signer)
        let parts = token.split(separator: ".").map(String.init)
        let forged = [parts[0], part(#"{"sub":"mallory"}"#), parts[2]].joined(separator: ".")
        #expect(!(try RS256.parse(forged)).isSigned(by: Self.key.publicKey))
    }

    @Test("none, HMAC, a critical header, a missing kid and broken encodings are refused before any key is tried")
    func refusals() throws {
        let body = part(#"{"sub":"x"}"#)
        #expect(throws: JWSError.unsupportedAlgorithm("none")) { try RS256.parse(part(#"{"alg":"none","kid":"k1"}"#) + "." + body + ".") }
        #expect(throws: JWSError.unsupportedAlgorithm("HS256")) {
            try RS256.parse(part(#"{"alg":"HS256","kid":"k1"}"#) + "." + body + ".c2ln")
        }
        #expect(throws: JWSError.malformed("unsupported critical header")) {
            try RS256.parse(part(#"{"alg":"RS256","kid":"k1","crit":["b64"]}"#) + "." + body + ".c2ln")
        }
        #expect(throws: JWSError.missingKeyID) { try RS256.parse(part(#"{"alg":"RS256"}"#) + "." + body + ".c2ln") }
        #expect(throws: JWSError.malformed("not a JWS compact serialization")) { try RS256.parse("a.b") }
        #expect(throws: JWSError.malformed("header")) { try RS256.parse("!!.\(body).c2ln") }
    }

    @Test("a JWKS yields its RSA signing keys by kid; encryption keys, other types and broken keys are left out")
    func jwks() throws {
        let (n, e) = JWKSet.components(of: Self.key.publicKey)
        let document = """
            {"keys":[{"kty":"RSA","use":"sig","kid":"good","n":"\(n)","e":"\(e)"},
            {"kty":"RSA","use":"enc","kid":"enc","n":"\(n)","e":"\(e)"},
            {"kty":"EC","kid":"ec","crv":"P-256","x":"AA","y":"AA"},
            {"kty":"RSA","kid":"broken","n":"AA","e":"AQAB"},
            {"kty":"RSA","kid":"implicit","n":"\(n)","e":"\(e)"}]}
            """
        let keys = JWKSet.signingKeys(from: Data(document.utf8))
        #expect(Set(keys.keys) == ["good", "implicit"])
        let token = try RS256.sign(claims: Array("{}".utf8), keyID: "good", with: Self.signer)
        #expect(try RS256.parse(token).isSigned(by: try #require(keys["good"])))
    }
}
