import Crypto
import Foundation
import WireCoding

/// Who a valid access token speaks for.
public struct AuthenticatedUser: Sendable, Equatable {
    /// The key tasks are stored under: the issuer and the user's object id together
    /// (``ownerKey(issuer:objectID:)``), so a second trusted authority cannot reach the first
    /// one's users by minting their `oid` (the security issue's M-4).
    public var ownerID: String
    /// The token's `oid`, falling back to `sub` (https://github.com/MicrosoftDocs/azure-docs/blob/26c7c08941c4ce8fb2c45361d4914a5fe5b65039/articles/active-directory-b2c/active-directory-b2c-devquickstarts-api-node.md).
    public var objectID: String
    public var name: String?
    public var scopes: [String]
    public var issuer: String
    public var expiresAt: Date

    /// 22 base64url characters of SHA-256 over the issuer, a colon, the object id. The prefix has
    /// a fixed length, so no issuer/object-id pair can spell another pair's key; object ids
    /// stored before this rule (bare GUIDs) never contain a colon.
    public static func ownerKey(issuer: String, objectID: String) -> String {
        Base64URL.encode(Data(SHA256.hash(data: Data(directory(of: issuer).utf8)))).prefix(22) + ":" + objectID
    }

    /// The directory an issuer names, for keying its users: the issuer with one trailing slash.
    /// B2C writes its issuer with the slash (`…/{tid}/v2.0/`) and Entra, External ID's native
    /// authentication included, without (`…/{tid}/v2.0`): one directory, one user, the same
    /// tasks whichever way the person signed in. Issuers written with the slash (every B2C one)
    /// keep the keys they had.
    public static func directory(of issuer: String) -> String { issuer.hasSuffix("/") ? issuer : issuer + "/" }
}
