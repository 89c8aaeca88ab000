import Foundation
import HTTPTypes
import Hummingbird
import IdentityDirectory
import WireCoding

/// The token endpoint's error form: HTTP 400 (401 for client authentication) with
/// `{"error", "error_description"}` (https://learn.microsoft.com/azure/active-directory-b2c/openid-connect#get-a-token).
/// On the Entra face the body is Entra's: `error_codes`, `timestamp`, `trace_id`,
/// `correlation_id` and `error_uri` besides the two OAuth fields (SPEC §2.9).
enum TokenErrorResponder {
    static func respond(
        _ error: ProtocolFailure, correlationID: String, now: Date, face: ProtocolFace = .b2c, origin: String = ""
    ) -> Response {
        let body = face.dialect.errorBody(error, correlationID: correlationID, now: now, origin: origin)
        var response = Response.json(body, status: error.status, noStore: true)
        if error.status == .unauthorized {
            response.headers[.wwwAuthenticate] = "Basic realm=\"token\""
        }
        return response
    }
}
