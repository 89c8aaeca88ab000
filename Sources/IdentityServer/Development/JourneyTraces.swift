import Foundation
import Hummingbird
import IdentityDirectory
import Storage
import UserJourneys
import WireCoding

extension DevelopmentEndpoints {
    /// `GET /dev/journeys/{correlationId}`: the developer trace of the sign-ins a request started
    /// (SPEC §2.12) — each orchestration step or technical profile run, its result, the claims it
    /// changed (a custom policy's with their values, secrets a person typed hidden), its time
    /// and the error it ended with. B2C needs Application Insights for this. JSON, or a page for
    /// a browser.
    @Sendable func journeyTrace(_ request: Request, context: IdentityRequestContext) async throws -> Response {
        let control = try await control(request)
        let correlationID = context.parameters.get("correlationId") ?? ""
        let journeys = try await control.journeys(correlationID: correlationID)
        guard !journeys.isEmpty else { throw HTTPError(.notFound, message: "No sign-in was started with that correlation id.") }
        let body = DevelopmentControl.traceJSON(correlationID: correlationID, journeys: journeys)
        let wantsPage = request.headers[.accept]?.lowercased().contains("text/html") == true
        guard wantsPage else { return .json(body, noStore: true) }
        let rows = journeys.flatMap { journey in
            journey.state.trace.map { entry -> [String: Any] in
                [
                    "policy": journey.policy, "step": entry.step, "result": entry.result.rawValue, "claims": entry.claims.joined(separator: ", "),
                    "values": (entry.values ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: "; "),
                    "milliseconds": entry.milliseconds, "error": entry.error ?? "",
                ]
            }
        }
        return .html(try service.pages.render(.journeyTrace, ["title": "Journey \(correlationID.lowercased())", "rows": rows], tenant: control.tenant))
    }
}
