import CryptoExtras
import Foundation
import JOSE
import Testing
import WireCoding

@Suite("RS256 and JWKs: the system's one JOSE implementation")
struct RS256Tests {
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    func part(_ json: String) -> String { Base64URL.encode(Data(json.utf8)) }

    @Test("a signed token parses, names its key, verifies with it and not with another, and keeps the claims' order")
    func roundTrip() throws {
        let claims = #"{"exp":1,"iss":"https://i/","sub":"s"}"#
        let token = try RS256.sign(claims: Array(claims.utf8), keyID: "k1", with: Self.key)
        let parts = token.split(separator: ".").map(String.init)
        #expect(Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"typ":"JWT","alg":"RS256","kid":"k1"}"#)
        #expect(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) } == claims)
        let parsed = try RS256.parse(token)
        #expect(parsed.keyID == "k1")
        #expect(parsed.isSigned(by: Self.key.publicKey))
        #expect(!parsed.isSigned(by: try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey))
        #expect(try parsed.claims()["sub"] as? String == "s")
    }

    @Test("a changed payload no longer verifies")
    func tampered() throws {
        let token = try RS256.sign(claims: Array(#"{"sub":"alice"}"#.utf8), keyID: "k1", with: Self.key)
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
        let token = try RS256.sign(claims: Array("{}".utf8), keyID: "good", with: Self.key)
        #expect(try RS256.parse(token).isSigned(by: try #require(keys["good"])))
    }
}
