import Foundation
import Hummingbird
import IdentityDirectory

/// The profile page of a profile-edit flow (B2C's `SelfAsserted-ProfileUpdate`): the flow's
/// attributes (the display name when it names none), saved for the account.
struct ProfileEditStep: OrchestrationStep {
    let users: any UserDirectory

    let id = "SelfAsserted-ProfileUpdate"
    var pages: Set<HostedPage> { [.profile] }
    var actsForUser: Bool { true }

    func applies(to run: JourneyRun) -> Bool { run.flow.type == .profileEdit }

    func enter(_ run: inout JourneyRun) async throws -> StepOutcome { .interact(.redirecting(to: run.url(.profile))) }

    private func editable(_ flow: UserFlow) -> [FlowAttribute] { flow.signUpAttributes.isEmpty ? [.displayName] : flow.signUpAttributes }

    func show(_ page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome { .interact(try profilePage(run)) }

    private func profilePage(_ run: JourneyRun, error: String? = nil, status: HTTPResponse.Status = .ok) throws -> Response {
        guard let user = run.user else { throw JourneyEngine.notThisStep }
        var values: [String: Any] = [
            "title": run.text("profile_title"), "action": run.url(.profile), "email": user.email ?? "",
            "attributes": run.attributeFields(editable(run.flow)) { run.form[$0.rawValue] ?? user.value(of: $0) },
        ]
        if let error { values["error"] = error }
        return try run.page(.profile, values, status: status)
    }

    func act(on page: HostedPage, _ run: inout JourneyRun) async throws -> StepOutcome {
        guard var user = run.user else { throw JourneyEngine.notThisStep }
        let posted: (displayName: String?, attributes: [String: String])
        switch run.postedAttributes(editable(run.flow), over: user.attributes) {
        case .success(let values): posted = values
        case .failure(let problem): return .interact(try profilePage(run, error: problem.message, status: .badRequest))
        }
        let displayName = posted.displayName ?? user.displayName
        try await users.updateProfile(id: user.id, displayName: displayName, attributes: posted.attributes, now: run.now)
        user.displayName = displayName
        user.attributes = posted.attributes
        run.user = user
        return .next
    }
}
