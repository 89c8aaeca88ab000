import Foundation

/// Which product's protocol a request speaks. B2C's URLs name a user flow; an authority without
/// one is the Microsoft identity platform's (Entra ID v2, Entra External ID; SPEC §2.9), with its
/// own discovery document, v2 token shapes and `AADSTS` errors.
package enum ProtocolFace: String, Sendable, Codable {
    case b2c
    case entra

    /// Consent is per user and app, asked on a page and required of grants without one (Entra);
    /// B2C has no consent (its apps are the tenant's own).
    package var asksConsent: Bool { self == .entra }
}
