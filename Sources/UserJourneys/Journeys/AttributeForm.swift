import Foundation
import IdentityDirectory

/// The attribute fields of the sign-up, profile and federated sign-up pages: shown with their
/// current values, and read back validated.
extension JourneyRun {
    /// The posted values of `list`, validated: the display name (nil when not in `list`; never
    /// empty when it is) and the other attributes over `existing` (an empty value removes one).
    /// An attribute left unchecked posts nothing: a boolean's box says "false" by its absence.
    func postedAttributes(_ list: [FlowAttribute], over existing: [String: String]) -> Result<
        (displayName: String?, attributes: [String: String]), AttributeProblem
    > {
        var attributes = existing
        var displayName: String?
        for attribute in list {
            switch attribute {
            case .builtIn(let builtIn):
                let value: String
                switch builtIn.validate(form[builtIn.rawValue] ?? "") {
                case .success(let valid): value = valid
                case .failure(let problem): return .failure(problem)
                }
                if builtIn == .displayName {
                    guard !value.isEmpty else { return .failure(AttributeProblem(message: text("error_displayName"))) }
                    displayName = value
                } else {
                    attributes[builtIn.rawValue] = value.isEmpty ? nil : value
                }
            case .custom(let name):
                // An attribute the tenant no longer declares is neither shown nor read.
                guard let declared = tenant.customAttribute(named: name) else { continue }
                let raw = form[attribute.rawValue] ?? (declared.type == .boolean ? "false" : "")
                switch declared.validate(raw) {
                case .success(let value): attributes[attribute.rawValue] = value
                case .failure(let problem): return .failure(problem)
                }
            }
        }
        return .success((displayName, attributes))
    }

    /// The page's fields for `list` with their current values: text inputs for built-in and
    /// string attributes, a number input for an int, a checkbox for a boolean.
    func attributeFields(_ list: [FlowAttribute], value: (FlowAttribute) -> String?) -> [[String: Any]] {
        list.compactMap { attribute in
            let current = value(attribute) ?? ""
            switch attribute {
            case .builtIn(let builtIn):
                return [
                    "name": builtIn.rawValue, "label": text("attribute_\(builtIn.rawValue)"), "value": current,
                    "autocomplete": builtIn.autocomplete,
                    "required": builtIn == .displayName, "inputType": "text",
                ]
            case .custom(let name):
                guard let declared = tenant.customAttribute(named: name) else { return nil }
                var field: [String: Any] = [
                    "name": attribute.rawValue, "label": declared.label, "value": current, "autocomplete": "off", "required": false,
                ]
                switch declared.type {
                case .string, .dateTime: field["inputType"] = "text"
                case .int: field["inputType"] = "number"
                case .stringCollection:
                    // Shown as its values separated by commas, as the page takes them.
                    field["inputType"] = "text"
                    field["value"] = StoredJSON.decode([String].self, current)?.joined(separator: ", ") ?? current
                case .boolean:
                    field["checkbox"] = true
                    field["checked"] = declared.validate(current) == .success("true")
                }
                return field
            }
        }
    }

    /// What is wrong with the posted new password (`newPassword`, repeated in
    /// `reenterPassword`): B2C's strong-password rule, then the repeat; nil when nothing is.
    func newPasswordProblem() -> String? {
        let password = form["newPassword"] ?? ""
        if let problem = PasswordPolicy.problem(with: password) { return problem }
        return password == form["reenterPassword"] ? nil : text("error_passwordMismatch")
    }
}
