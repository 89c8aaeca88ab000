import Foundation
import IdentityDirectory
import JOSE
import Storage
import TrustFramework

/// B2C's `id_token_hint` technical profile (id-token-hint.md): the app signs a JWT and sends it
/// with the authorization request; a `GetClaims` step (or a claims exchange) naming this profile
/// checks it and reads its claims into the journey. Invitations and magic links are built on it.
///
/// - **Symmetric**: the profile's `client_secret` key set holds the secret the app signs with
///   (`HS256`, `HS384` or `HS512`, the secret's UTF-8 bytes as the key, as the samples' apps
///   use it); `issuer` and `IdTokenAudience` must equal `iss` and `aud`.
/// - **Asymmetric**: `METADATA` is the app's configuration document; its `jwks_uri` holds the
///   RS256 keys, its `issuer` the expected `iss` unless the profile's `issuer` overrides it;
///   `IdTokenAudience`, when given, must be in `aud`.
///
/// The algorithm is decided by the profile, never by the token: a symmetric profile takes HMAC
/// only and an asymmetric one RS256 only, so a token cannot make a public key its secret
/// (RFC 8725 §2.1), and `none` is refused by both. `exp` and `nbf` are required (the document's
/// "mandatory" claims) with five minutes' leeway, Microsoft.IdentityModel's default clock skew.
struct PolicyIdTokenHint: Sendable {
    let keySets: PolicyKeySetLibrary
    let upstream: UpstreamDirectory
    /// Opens the hint the transaction keeps sealed.
    let dataKey: DataKey

    static let leeway: TimeInterval = 300

    /// Checks `token` by `profile` and writes the claims `references` name (each by its
    /// `PartnerClaimType`, else its own id), typed as the policy declares them. Nothing is
    /// written unless the whole token checks out.
    func read(
        _ token: String, by profile: PolicyTechnicalProfile, _ references: [PolicyClaimReference], into claims: inout PolicyClaims,
        policy: CompiledPolicy, tenant: Tenant, now: Date
    ) async throws(PolicyProfileFailure) {
        let verified = try await verify(token, by: profile, tenant: tenant, now: now)
        for reference in references {
            guard let value = verified[reference.partnerClaimType ?? reference.claimType] else { continue }
            let type = policy.claimType(reference.claimType)?.dataType ?? .string
            if let converted = Self.value(value, as: type) { claims[reference.claimType] = converted }
        }
    }

    /// The token's claims when it is signed as the profile says and its `iss`, `aud`, `exp` and
    /// `nbf` hold at `now`.
    func verify(_ token: String, by profile: PolicyTechnicalProfile, tenant: Tenant, now: Date) async throws(PolicyProfileFailure) -> JWTClaims {
        let refused = PolicyProfileFailure.protocolFailure(.idTokenHintRefused(expired: false))
        var issuer = profile.metadata["issuer"]
        let claims: JWTClaims
        if let metadataURL = profile.metadata["METADATA"] {
            guard let parsed = try? RS256.parse(token, requiringKeyID: false) else { throw refused }
            let document: UpstreamMetadata
            let signed: Bool
            do {
                document = try await upstream.tokenIssuer(metadataURL)
                signed = try await upstream.verifies(parsed, metadata: document)
            } catch let failure as UpstreamOIDC.Failure {
                throw .protocolFailure(failure.b2cError)
            } catch {
                throw .protocolFailure(.upstreamFailed("the token issuer's metadata could not be read"))
            }
            guard signed, let read = try? parsed.claims() else { throw refused }
            issuer = issuer ?? document.issuer
            claims = read
        } else {
            var secret: String?
            if let keySet = profile.keys["client_secret"] {
                do {
                    secret = try await keySets.activeSecret(tenantID: tenant.id, keySet: keySet)
                } catch {
                    throw .protocolFailure(.policyNotRunnable("The key set '\(keySet)' of '\(profile.id)' could not be read."))
                }
            }
            guard let secret, !secret.isEmpty else {
                throw .protocolFailure(
                    .policyNotRunnable("The key set '\(profile.keys["client_secret"] ?? "")' that '\(profile.id)' names has no active secret."))
            }
            guard let read = try? SharedSecretJWS.verify(token, secret: Array(secret.utf8)) else { throw refused }
            claims = read
        }
        guard let issuer else { throw refused }
        let rule = ClaimPolicy(
            issuers: .exactly([issuer]), audiences: profile.metadata["IdTokenAudience"].map { [$0] }, leeway: Self.leeway, required: ["nbf"])
        do throws(ClaimError) {
            try rule.check(claims, now: now)
        } catch .expired {
            throw .protocolFailure(.idTokenHintRefused(expired: true))
        } catch {
            throw refused
        }
        return claims
    }

    /// A token claim as the claim type's data type: text, a whole number, a boolean, or a
    /// collection from an array of strings; nil when it does not fit the type.
    static func value(_ claim: ClaimValue, as type: PolicyClaimType.DataType) -> PolicyClaimValue? {
        switch claim {
        case .string(let text): return PolicyClaimValue.parse(text, as: type)
        case .bool(let flag): return PolicyClaimValue.parse(flag ? "true" : "false", as: type)
        case .number(let number):
            let text = Int64(exactly: number).map(String.init) ?? String(number)
            return PolicyClaimValue.parse(text, as: type)
        case .array(let items):
            guard type == .stringCollection else { return nil }
            let texts = items.compactMap(\.string)
            return texts.count == items.count ? .collection(texts) : nil
        case .object, .null: return nil
        }
    }
}
