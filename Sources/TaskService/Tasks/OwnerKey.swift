/// An owner key compared and hashed byte for byte, as the database compares `owner_id`: Swift's
/// `String ==` takes canonically equivalent spellings ("é" as one code point, or "e" and a
/// combining accent) for one string, which would let two owners share a cached page or a version.
struct OwnerKey: Hashable, Sendable {
    let owner: String

    init(_ owner: String) { self.owner = owner }

    static func == (left: OwnerKey, right: OwnerKey) -> Bool { left.owner.utf8.elementsEqual(right.owner.utf8) }

    func hash(into hasher: inout Hasher) {
        for byte in owner.utf8 { hasher.combine(byte) }
    }
}
