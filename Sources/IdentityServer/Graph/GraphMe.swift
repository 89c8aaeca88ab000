import Foundation
import Hummingbird
import IdentityDirectory
import JOSE
import UserJourneys
import WireCoding

/// The signed-in user of a delegated Graph token (``GraphCallers/user(_:requiring:)``): the
/// token checked by ``GraphBearer``, its user found in the directory.
struct GraphCaller: Sendable {
    /// The token's `sub`: B2C's is the object id, Entra's the app's pairwise one; either way the
    /// same as in that app's ID token, which is what UserInfo must answer (OIDC Core §5.3.2).
    let subject: String?
    let user: UserAccount
    let tenant: Tenant?
    let scopes: [String]
}

/// Microsoft Graph's `GET /v1.0/me`, for the MSAL tutorial: answers with Graph's shape for a
/// token this service issued for `User.Read` (https://learn.microsoft.com/graph/api/user-get?view=graph-rest-1.0).
struct GraphMe: Sendable {
    /// `User.Read`, delegated: ``GraphPermission`` admits the caller before this runs. Errors are
    /// Graph's, written by the route's ``GraphErrorMiddleware``.
    static let scope = "User.Read"

    @Sendable func handle(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let caller = try context.requireUser()
        let user = caller.user
        let principal = user.presentableEmail ?? "\(user.objectID)@\(caller.tenant?.name ?? "localhost")"
        func value(_ attribute: UserAttribute) -> JSONText { user.value(of: attribute).map(JSONText.string) ?? .null }
        let body = JSONText.object([
            ("@odata.context", .string("https://graph.microsoft.com/v1.0/$metadata#users/$entity")),
            ("businessPhones", .array([])),
            ("displayName", .string(user.displayName)),
            ("givenName", value(.givenName)),
            ("jobTitle", value(.jobTitle)),
            ("mail", user.presentableEmail.map(JSONText.string) ?? .null),
            ("mobilePhone", .null),
            ("officeLocation", value(.city)),
            ("preferredLanguage", .null),
            ("surname", value(.surname)),
            ("userPrincipalName", .string(principal)),
            ("id", .string(user.objectID)),
        ])
        return .json(body)
    }
}

/// `GET|POST {base}/oidc/userinfo`: the Microsoft identity platform's UserInfo endpoint
/// (OpenID Connect Core §5.3), which Entra serves from Graph: a Graph token in, the user's
/// claims out, `sub` the same pairwise value as in the app's ID token (SPEC §2.9).
struct UserInfo: Sendable {
    @Sendable func handle(_ request: Request, context: GraphRequestContext) async throws -> Response {
        let caller = try context.requireUser()
        let user = caller.user
        guard let subject = caller.subject else { throw GraphError.invalidToken }
        var body = JSONObjectBuilder()
        body.set("sub", subject)
        body.set("name", user.displayName)
        body.set("family_name", user.value(of: .surname))
        body.set("given_name", user.value(of: .givenName))
        if user.emailVerified { body.set("email", user.email) }
        return .json(body.object)
    }
}
