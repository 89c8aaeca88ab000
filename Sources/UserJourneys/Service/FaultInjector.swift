import Foundation
import Hummingbird
import IdentityDirectory
import Synchronization

/// Faults a tester asks for on a user flow (`POST /dev/faults`): the next authorize or token
/// call on that flow fails as B2C would fail it, or is delayed, once. This lets an app's error
/// handling be tested against the real wire forms without breaking anything for real. Kept in
/// memory: a fault is armed on the instance that received it.
package final class FaultInjector: Sendable {
    package enum Fault: Sendable, Equatable {
        /// An error in B2C's (or Entra's) form.
        case error(ProtocolFailure)
        /// The call waits this long, then proceeds normally.
        case delay(milliseconds: Int)
        /// An error of External ID's native authentication API, by its catalog name (armed on
        /// an endpoint, not a flow; the API's own code knows the errors).
        case nativeAuth(String)
    }

    /// The key a native-authentication endpoint's faults are armed under (`signup/v1.0/start`).
    package static func nativeKey(_ endpoint: String) -> String { "native:" + endpoint.lowercased() }

    /// The errors a tester may ask for, by the name B2C's documentation gives them.
    package static let errors: [String: ProtocolFailure] = [
        "AADB2C90118": .forgotPassword(loginHint: nil), "AADB2C90091": .userCancelled, "server_error": .internalError,
        "AADB2C90077": .noSession, "AADB2C90129": .grantRevoked, "temporarily_unavailable": .temporarilyUnavailable,
    ]

    private let armed = Mutex<[String: [Fault]]>([:])

    /// Arms `fault` for the next call on `policy` (case-insensitive), after any armed before it.
    package func arm(_ fault: Fault, policy: String) {
        // At most 100 armed per flow: a loop in a test script cannot grow this without bound.
        armed.withLock { faults in
            if faults[policy.lowercased(), default: []].count < 100 { faults[policy.lowercased(), default: []].append(fault) }
        }
    }

    /// The fault for this call, if one is armed; it is used up.
    package func take(policy: String) -> Fault? {
        armed.withLock { faults in
            guard var queue = faults[policy.lowercased()], !queue.isEmpty else { return nil }
            let fault = queue.removeFirst()
            faults[policy.lowercased()] = queue.isEmpty ? nil : queue
            return fault
        }
    }

    package func clear() { armed.withLock { $0.removeAll() } }

    /// Applies the fault armed for `policy`, if any: throws its error or waits its delay.
    func apply(policy: String) async throws {
        switch take(policy: policy) {
        case .error(let error): throw error
        case .delay(let milliseconds): try await Task.sleep(for: .milliseconds(milliseconds))
        case .nativeAuth, nil: return
        }
    }
}

/// Applies the fault armed on the request's flow (``FaultInjector``) before the endpoint runs:
/// its error in the group's wire form, or its delay. Added to the token routes only where the
/// development surface is on; the hosted pages get theirs from ``DevelopmentFaultStep``.
package struct FaultMiddleware: RouterMiddleware {
    package typealias Context = PolicyRequestContext
    let faults: FaultInjector

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await faults.apply(policy: context.flow.name)
        return try await next(request, context)
    }

    package init(faults: FaultInjector) {
        self.faults = faults
    }
}
