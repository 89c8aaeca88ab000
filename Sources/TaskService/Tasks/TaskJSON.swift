import Foundation
import TodoModels
import WireCoding

#if canImport(Glibc)
    import Glibc
#endif

/// Writes tasks as JSON by hand: the list is the API's hottest response, and Foundation's
/// `JSONEncoder` with ISO 8601 dates cost more than the database query. The output is the same
/// as `JSONEncoder` with `.sortedKeys` and `.iso8601` (a test compares the two).
enum TaskJSON {
    static func page(_ page: TaskPage) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(64 + page.items.count * 220)
        out.append(contentsOf: #"{"items":["#.utf8)
        for (index, item) in page.items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(item, into: &out)
        }
        out.append(UInt8(ascii: "]"))
        if let cursor = page.nextCursor {
            out.append(contentsOf: #","nextCursor":"#.utf8)
            string(cursor, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    static func item(_ item: TaskItem) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(220)
        write(item, into: &out)
        return out
    }

    private static func write(_ item: TaskItem, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"completed":"#.utf8)
        out.append(contentsOf: (item.completed ? "true" : "false").utf8)
        if let completedAt = item.completedAt {
            out.append(contentsOf: #","completedAt":""#.utf8)
            date(completedAt, into: &out)
            out.append(UInt8(ascii: "\""))
        }
        out.append(contentsOf: #","createdAt":""#.utf8)
        date(item.createdAt, into: &out)
        out.append(contentsOf: #"","id":""#.utf8)
        uuid(item.id, into: &out)
        out.append(UInt8(ascii: "\""))
        if let owner = item.ownerName {
            out.append(contentsOf: #","ownerName":"#.utf8)
            string(owner, into: &out)
        }
        out.append(contentsOf: #","title":"#.utf8)
        string(item.title, into: &out)
        out.append(contentsOf: #","updatedAt":""#.utf8)
        date(item.updatedAt, into: &out)
        out.append(contentsOf: #""}"#.utf8)
    }

    private static func uuid(_ id: UUID, into out: inout [UInt8]) { UUIDText.appendLowercase(id, to: &out) }

    private static func string(_ value: String, into out: inout [UInt8]) { JSONEscaping.appendQuoted(value, to: &out) }

    /// `yyyy-MM-ddTHH:mm:ssZ` in UTC, as `JSONEncoder.DateEncodingStrategy.iso8601` writes.
    private static func date(_ date: Date, into out: inout [UInt8]) {
        RFC3339.appendUTC(secondsSince1970: Int(date.timeIntervalSince1970.rounded(.down)), to: &out)
    }
}
