import Crypto
import Foundation
import Testing
import WireCoding

@testable import JOSE

@Suite("HMAC signatures: only for a secret the tenant uploaded")
struct SharedSecretJWSTests {
    static let secret = Array("a-shared-secret-of-thirty-two-by".utf8)

    func part(_ json: String) -> String { Base64URL.encode(Data(json.utf8)) }

    func token<H: HashFunction>(_ hash: H.Type, alg: String, claims: String = #"{"sub":"s"}"#, secret: [UInt8] = secret) -> String {
        let input = part(#"{"alg":"\#(alg)","typ":"JWT"}"#) + "." + part(claims)
        let mac = HMAC<H>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: secret))
        return input + "." + Base64URL.encode(Data(mac))
    }

    @Test("HS256, HS384 and HS512 verify with their secret and not with another; the claims are the payload's")
    func roundTrip() throws {
        for made in [token(SHA256.self, alg: "HS256"), token(SHA384.self, alg: "HS384"), token(SHA512.self, alg: "HS512")] {
            #expect(try SharedSecretJWS.verify(made, secret: Self.secret).subject == "s")
            #expect(throws: JWSError.signatureInvalid) { try SharedSecretJWS.verify(made, secret: Array("another".utf8)) }
        }
        // A header that names HS512 over an HS256 MAC is no signature.
        let mismatched = token(SHA256.self, alg: "HS512")
        #expect(throws: JWSError.signatureInvalid) { try SharedSecretJWS.verify(mismatched, secret: Self.secret) }
    }

    @Test("none, RS256, a critical header, an empty secret and broken encodings are refused; RS256.parse still refuses HMAC")
    func refusals() throws {
        let body = part(#"{"sub":"s"}"#)
        #expect(throws: JWSError.unsupportedAlgorithm("none")) { try SharedSecretJWS.verify(part(#"{"alg":"none"}"#) + "." + body + ".", secret: Self.secret) }
        #expect(throws: JWSError.unsupportedAlgorithm("RS256")) { try SharedSecretJWS.verify(part(#"{"alg":"RS256"}"#) + "." + body + ".c2ln", secret: Self.secret) }
        #expect(throws: JWSError.malformed("unsupported critical header")) {
            try SharedSecretJWS.verify(part(#"{"alg":"HS256","crit":["x"]}"#) + "." + body + ".c2ln", secret: Self.secret)
        }
        #expect(throws: JWSError.signatureInvalid) { try SharedSecretJWS.verify(token(SHA256.self, alg: "HS256", secret: []), secret: []) }
        #expect(throws: JWSError.malformed("not a JWS compact serialization")) { try SharedSecretJWS.verify("a.b", secret: Self.secret) }
        #expect(throws: JWSError.unsupportedAlgorithm("HS256")) { try RS256.parse(token(SHA256.self, alg: "HS256")) }
    }
}
