import Foundation
import SQLKit
import Storage

extension SQLInteractionStore {
    func setPendingSignUp(interactionID: String, signUp: FederatedSignUp?) async throws {
        let value = signUp.map { StoredJSON.encode($0) }
        try await database.transaction { sql in
            try await sql.update("authorization_requests").set("pending_sign_up", to: value).where("id", .equal, interactionID).run()
        }
    }
}
