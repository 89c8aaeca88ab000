import Logging
import Synchronization

/// Tasks stored before owners were keyed by issuer and object id carry the bare object id.
/// They are moved to the new key the first time their user calls, but only while the API trusts
/// a single issuer: then that issuer is the one that issued them. With several trusted issuers
/// the owner is ambiguous and the tasks stay where they are (and unreachable), rather than going
/// to whichever authority presents that object id first (the security issue's M-4).
final class LegacyOwnerAdoption: Sendable {
    private let repository: SQLTaskRepository
    private let validator: BearerValidator
    private let logger: Logger
    /// Whether legacy rows may exist; checked once at start, cleared when none are left.
    private let pending: Mutex<Bool>
    private let done = Mutex<Set<String>>([])

    init(repository: SQLTaskRepository, validator: BearerValidator, pending: Bool, logger: Logger) {
        self.repository = repository
        self.validator = validator
        self.pending = Mutex(pending)
        self.logger = logger
    }

    func adopt(for user: AuthenticatedUser) async throws {
        guard pending.withLock({ $0 }), !done.withLock({ $0.contains(user.objectID) }) else { return }
        guard let issuer = validator.soleIssuer(), issuer == AuthenticatedUser.directory(of: user.issuer) else { return }
        let moved = try await repository.adoptLegacyTasks(objectID: user.objectID, ownerKey: user.ownerID)
        done.withLock { _ = $0.insert(user.objectID) }
        if moved > 0 {
            logger.info("tasks adopted under the issuer-bound owner key", metadata: ["oid": "\(user.objectID)", "count": "\(moved)"])
            if try await !repository.hasLegacyOwners() { pending.withLock { $0 = false } }
        }
    }
}
