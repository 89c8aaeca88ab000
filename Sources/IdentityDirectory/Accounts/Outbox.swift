import Foundation

/// A message the service would have mailed; shown on the dev outbox page and in the log.
public struct OutboxMessage: Sendable, Equatable {
    /// Sorts by when the message was written, finer than `createdAt`'s seconds: the outbox
    /// lists the newest first even when several arrive within one second.
    package var id: String
    var tenantID: UUID
    package var recipient: String
    package var subject: String
    package var body: String
    package var createdAt: Date

    package init(id: String, tenantID: UUID, recipient: String, subject: String, body: String, createdAt: Date) {
        self.id = id
        self.tenantID = tenantID
        self.recipient = recipient
        self.subject = subject
        self.body = body
        self.createdAt = createdAt
    }
}

/// The `outbox` table's row: one message, written in the transaction that made its code.
package struct OutboxRow: Codable {
    package var id: String
    var tenantId: String
    package var recipient: String
    package var subject: String
    package var body: String
    package var createdAt: Int64

    package init(_ message: OutboxMessage) {
        id = message.id
        tenantId = message.tenantID.uuidString.lowercased()
        recipient = message.recipient
        subject = message.subject
        body = message.body
        createdAt = message.createdAt.epochSeconds
    }
}
