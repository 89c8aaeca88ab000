import Foundation

/// A to-do item as the Task API sends it (`/api/tasks`; SPEC §3). Shared by the API and the SDK.
public struct TaskItem: Codable, Sendable, Equatable, Identifiable {
    public var id: UUID
    /// 1–1000 characters, trimmed.
    public var title: String
    public var completed: Bool
    public var createdAt: Date
    public var updatedAt: Date
    public var completedAt: Date?
    /// The `name` claim of the token that created the task.
    public var ownerName: String?

    enum CodingKeys: String, CodingKey {
        case id, title, completed, createdAt, updatedAt, completedAt, ownerName
    }

    /// Ids go on the wire in lowercase, the form of every other id in the system (and of `Location`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(title, forKey: .title)
        try container.encode(completed, forKey: .completed)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encodeIfPresent(completedAt, forKey: .completedAt)
        try container.encodeIfPresent(ownerName, forKey: .ownerName)
    }

    public init(
        id: UUID, title: String, completed: Bool, createdAt: Date, updatedAt: Date, completedAt: Date? = nil,
        ownerName: String? = nil
    ) {
        self.id = id
        self.title = title
        self.completed = completed
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.completedAt = completedAt
        self.ownerName = ownerName
    }
}

/// The body of `POST /api/tasks`.
public struct NewTask: Codable, Sendable, Equatable {
    public var title: String
    public var completed: Bool?

    public init(title: String, completed: Bool? = nil) {
        self.title = title
        self.completed = completed
    }
}

/// The body of `PATCH /api/tasks/{id}`: only the fields present change.
public struct TaskPatch: Codable, Sendable, Equatable {
    public var title: String?
    public var completed: Bool?

    public init(title: String? = nil, completed: Bool? = nil) {
        self.title = title
        self.completed = completed
    }
}

/// One page of `GET /api/tasks`, newest first; `nextCursor` fetches the next page.
public struct TaskPage: Codable, Sendable, Equatable {
    public var items: [TaskItem]
    public var nextCursor: String?

    public init(items: [TaskItem], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// Limits the API enforces and clients can check before sending.
public enum TaskLimits {
    public static let titleMaximumLength = 1000
    public static let pageSizeMaximum = 100
    public static let pageSizeDefault = 50

    /// The title as stored, or nil when it is empty after trimming, too long, or holds a control
    /// or format character (``TextRules/freeText(_:maximumLength:)``).
    public static func normalizedTitle(_ title: String) -> String? {
        try? TextRules.freeText(title, maximumLength: titleMaximumLength).get()
    }
}

/// An RFC 9457 problem document, the form of every Task API error.
public struct ProblemDetails: Codable, Sendable, Equatable, Error {
    public var type: String
    public var title: String
    public var status: Int
    public var detail: String?

    public init(type: String, title: String, status: Int, detail: String? = nil) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
    }
}
