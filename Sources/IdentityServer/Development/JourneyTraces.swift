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
        guard service.hosts.isAllowedHost(request), let tenant = try await service.tenants.defaultTenant() else { throw HTTPError(.notFound) }
        let correlationID = context.parameters.get("correlationId") ?? ""
        let journeys = try await service.interactions.journeys(tenantID: tenant.id, correlationID: correlationID)
        guard !journeys.isEmpty else { throw HTTPError(.notFound, message: "No sign-in was started with that correlation id.") }
        let formatter = ISO8601DateFormatter()
        let body = JSONText.object([
            ("correlationId", .string(correlationID.lowercased())),
            (
                "journeys",
                .array(
                    journeys.map { journey in
                        .object([
                            ("policy", .string(journey.policy)), ("startedAt", .string(formatter.string(from: journey.startedAt))),
                            (
                                "steps",
                                .array(
                                    journey.state.trace.map { entry in
                                        .object([
                                            ("step", .string(entry.step)), ("result", .string(entry.result.rawValue)),
                                            ("claims", .array(entry.claims.map(JSONText.string))),
                                            ("values", .object((entry.values ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
                                            ("milliseconds", .int(Int64(entry.milliseconds))),
                                            ("error", entry.error.map(JSONText.string) ?? .null), ("at", .string(formatter.string(from: entry.at))),
                                        ])
                                    })
                            ),
                        ])
                    })
            ),
        ])
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
        return .html(try service.pages.render(.journeyTrace, ["title": "Journey \(correlationID.lowercased())", "rows": rows], tenant: tenant))
    }
}
