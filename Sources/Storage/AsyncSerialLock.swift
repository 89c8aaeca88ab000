/// A FIFO async lock. Actors are re-entrant across `await`, so an actor alone cannot keep two
/// transactions on one SQLite connection from interleaving; this lock can.
actor AsyncSerialLock {
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        if !held {
            held = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty {
            held = false
        } else {
            // Ownership passes straight to the next waiter, so `held` stays true.
            waiters.removeFirst().resume()
        }
    }

    func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        await acquire()
        do {
            let value = try await body()
            release()
            return value
        } catch {
            release()
            throw error
        }
    }
}
