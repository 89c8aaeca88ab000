import Tracing

extension JourneyEngine {
    /// Runs a step's work in a span of its own (SPEC §2.13: a span per journey step), named for the
    /// step and holding its journey, result and error code: the span tree is the journey's trace
    /// as OpenTelemetry shows it (ARCHITECTURE.md). No claim, value or user goes into it. Calls the
    /// step makes (an API connector, a REST profile, an identity provider) are its children.
    static func span(of step: any OrchestrationStep, journey: String, _ work: () async throws -> StepOutcome) async throws -> StepOutcome {
        try await withSpan("journey step \(step.id)", ofKind: .internal) { span in
            span.attributes["todo.journey"] = journey
            span.attributes["todo.journey.step"] = step.id
            let outcome = try await work()
            switch outcome {
            case .next: span.attributes["todo.journey.result"] = "completed"
            case .interact: span.attributes["todo.journey.result"] = "interacting"
            case .back: span.attributes["todo.journey.result"] = "returned"
            case .finish: span.attributes["todo.journey.result"] = "finished"
            case .fail(let failure):
                span.attributes["todo.journey.result"] = "failed"
                span.attributes["todo.error_code"] = failure.code
                span.setStatus(SpanStatus(code: .error))
            }
            return outcome
        }
    }
}
